"""``training.valid_lr_halving`` in Eole: the checks of its options and its hooks over the shared rule
(``onmt_entmax.training.lr_halving``, whose docstring says what the schedule is), as in the OpenNMT-py adapter.

The flag and the step decay's removal go on ``Optimizer.from_config`` (with ``train_from`` Eole
rebuilds the schedule from the checkpoint's training config), the check on ``Trainer.validate``; the
halving state rides in the optimizer's state dict (``onmt_entmax.training.resume_state``), which Eole saves as
each step's ``optimizer.pt``.
"""
from __future__ import annotations

from onmt_entmax.errors import ConfigError
from onmt_entmax.training import lr_halving as rule

from .loss import eole_logger


def check(config) -> None:
    """``rule.refusal`` on a run's config (the options named as its YAML writes them)."""
    training = getattr(config, "training", None)
    if training is None or not hasattr(training, "valid_lr_halving"):
        return
    why = rule.refusal(training, "valid" in (getattr(config, "data", None) or {}), name=lambda n: f"training.{n}")
    if why:
        raise ConfigError(why)


def wrap_from_config(upstream):
    """``Optimizer.from_config``: remember whether to halve; with training.valid_lr_halving, no step decay."""

    def from_config(cls, model, config, metadata=None):
        from eole.utils.optimizers import exponential_decay

        optim = upstream(cls, model, config, metadata)
        training = config.training
        rule.configure(optim, getattr(training, "valid_lr_halving", False),
                       getattr(training, "valid_lr_halving_every", 1), exponential_decay)
        return optim

    return from_config


def wrap_validate(upstream):
    """``Trainer.validate``: the validation's loss per target token (Eole counts ``n_tokens``) goes to the
    halving rule."""
    return rule.wrap_validate(upstream, "n_tokens", eole_logger)
