"""``training.adam_fused`` in Eole: ``optim: adam`` through torch's fused Adam (``onmt_entmax.training.adam_fused``
says what changes and what does not), as ``adam_fused`` in the OpenNMT-py adapter.

Eole builds its optimizer in ``Optimizer.from_config``, and loads a resumed run's optimizer state there
too (``train_from``); after both, the run's ``training.adam_fused`` decides the implementation.
"""
from __future__ import annotations

from onmt_entmax.errors import ConfigError
from onmt_entmax.training import adam_fused as rule


def check(config) -> None:
    """``rule.refusal`` on a run's config (the options named as its YAML writes them)."""
    training = getattr(config, "training", None)
    if training is None or not hasattr(training, "adam_fused"):
        return
    why = rule.refusal(training.adam_fused, getattr(training, "optim", None), name=lambda n: f"training.{n}")
    if why:
        raise ConfigError(why)


def wrap_from_config(upstream):
    """``Optimizer.from_config``: the built (and, with train_from, loaded) Adam updates as the run's
    ``training.adam_fused`` says."""

    def from_config(cls, model, config, metadata=None):
        optim = upstream(cls, model, config, metadata)
        rule.apply(optim._optimizer, getattr(config.training, "adam_fused", False))
        return optim

    return from_config
