"""Training hooks in Eole: the loss, reports, data order, the training options' checks and hooks."""
