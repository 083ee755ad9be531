"""``eole predict`` hooks: beam search, analyses and records, ensembles, teacher-forced scoring."""
