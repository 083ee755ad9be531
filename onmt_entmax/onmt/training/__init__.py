"""Training hooks (``onmt.utils.loss``, ``onmt.utils.statistics``, ``onmt.utils.optimizers``,
``onmt.trainer``): the Fenchel-Young criterion, reports, learning-rate halving, the alphas CSV."""
