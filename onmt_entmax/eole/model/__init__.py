"""Model hooks in Eole: building our output layer and attention, loading model folders."""
