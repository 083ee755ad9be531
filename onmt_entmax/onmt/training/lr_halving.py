"""``valid_lr_halving`` in OpenNMT-py 3.5.1: the checks of its options and its hooks over the shared rule
(``onmt_entmax.training.lr_halving``, whose docstring says what the schedule is).

The flag and the step decay's removal go on ``Optimizer.from_opt`` (upstream rebuilds the step decay
from the checkpoint's options on ``-train_from``, so the options alone cannot switch it off there), the
check on ``Trainer.validate``; the state rides in the optimizer's state dict
(``onmt_entmax.training.resume_state``).
"""
from __future__ import annotations

import logging

from onmt_entmax.errors import EntmaxOptionError
from onmt_entmax.training import lr_halving as rule

from ..files import corpora


def _logger() -> logging.Logger:
    return logging.getLogger("onmt")


def check_train_opts(opt) -> None:
    """``rule.refusal`` on onmt_train's options, as ``EntmaxOptionError``."""
    why = rule.refusal(opt, "valid" in corpora(opt))
    if why:
        raise EntmaxOptionError(why)


def wrap_from_opt(upstream):
    """``Optimizer.from_opt``: remember whether to halve; with valid_lr_halving, no step decay."""

    def from_opt(cls, model, opt, checkpoint=None):
        from onmt.utils.optimizers import exponential_decay

        optim = upstream(cls, model, opt, checkpoint)
        rule.configure(optim, getattr(opt, "valid_lr_halving", False), getattr(opt, "valid_lr_halving_every", 1),
                       exponential_decay)
        return optim

    return from_opt


def wrap_validate(upstream):
    """``Trainer.validate``: the validation's loss per target token goes to the halving rule."""
    return rule.wrap_validate(upstream, "n_words", _logger)
