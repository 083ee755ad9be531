"""``valid_lr_halving``: halve the learning rate whenever the validation loss rises.

Peters et al. (2019) train with Adam at 1e-3 "halved whenever the loss increases on the validation
set"; OpenNMT-py 3.5.1 only has step-based decays. ``valid_lr_halving_every: k`` checks only at every
k-th validation, against the loss k validations before: the paper validates its medium SIGMORPHON
runs every ten epochs, so a run that validates every epoch (for its best checkpoint and its stop rule)
halves on the paper's cadence with k = 10.

The halving is the whole schedule, as ``-decay_method smart`` was in the paper's fork of OpenNMT-py:
upstream's default step decay (rate x 0.5 every ``decay_steps`` = 10,000 steps from
``start_decay_steps`` = 50,000, on whenever ``decay_method`` is none) is switched off, also on
``-train_from``, where upstream rebuilds the schedule from the checkpoint's options. The halving count,
the validations so far and the last checked loss per target token live in the optimizer's state dict
(``resume_state``), so ``-train_from`` resumes at the halved rate and on the same cadence.
"""
from __future__ import annotations

import functools
import logging

from ..validation import EntmaxOptionError

STATE_KEYS = ("entmax_lr_halvings", "entmax_last_valid_loss", "entmax_validations")
# OpenNMT-py 3.5.1's step decay options and their defaults (onmt/opts.py): with valid_lr_halving, a value
# other than these means the user asked for both schedules
STEP_DECAY_DEFAULTS = {"start_decay_steps": 50000, "decay_steps": 10000, "learning_rate_decay": 0.5}


def _logger() -> logging.Logger:
    return logging.getLogger("onmt")


def add_options(group) -> None:
    """valid_lr_halving and valid_lr_halving_every, into the plugin's option group."""
    group.add("--valid_lr_halving", "-valid_lr_halving", action="store_true",
              help="Halve the learning rate whenever the validation loss per target token rises above the "
                   "previous validation's (Peters et al. 2019); kept across -train_from. One GPU only. It "
                   "replaces the step decay (start_decay_steps, decay_steps, learning_rate_decay).")
    group.add("--valid_lr_halving_every", "-valid_lr_halving_every", type=int, default=1,
              help="With valid_lr_halving: compare only every k-th validation's loss, with the loss k "
                   "validations before (the paper's medium SIGMORPHON runs validate every 10 epochs).")


def check_train_opts(opt) -> None:
    """valid_lr_halving needs validation data, one process (only rank 0 validates) and no other schedule;
    valid_lr_halving_every is a count of validations, and means nothing without it."""
    every = getattr(opt, "valid_lr_halving_every", 1)
    if not isinstance(every, int) or every < 1:
        raise EntmaxOptionError(f"valid_lr_halving_every: {every!r}; give a whole number of validations >= 1")
    if not getattr(opt, "valid_lr_halving", False):
        if every != 1:
            raise EntmaxOptionError("valid_lr_halving_every is set but valid_lr_halving is not: add "
                                    "valid_lr_halving: true (or remove valid_lr_halving_every)")
        return
    method = getattr(opt, "decay_method", "none") or "none"
    if method != "none":
        raise EntmaxOptionError(f"valid_lr_halving is a learning-rate schedule and decay_method {method} is "
                                "another: remove one of them")
    asked = [f"{k} {getattr(opt, k)}" for k, v in STEP_DECAY_DEFAULTS.items() if getattr(opt, k, v) != v]
    if asked:
        raise EntmaxOptionError(f"valid_lr_halving replaces the step decay, but {', '.join(asked)} is set: "
                                "remove it (or valid_lr_halving)")
    if getattr(opt, "world_size", 1) > 1:
        raise EntmaxOptionError("valid_lr_halving: only rank 0 validates, so the ranks' learning rates would "
                                "diverge; use it with world_size 1")
    data = getattr(opt, "data", None) or {}
    if isinstance(data, str):  # the YAML text until upstream parses it (after validate_train_opts)
        import yaml

        data = yaml.safe_load(data) or {}
    if "valid" not in data:
        raise EntmaxOptionError("valid_lr_halving halves the learning rate when the validation loss rises, but "
                                "there is no validation data: add a 'valid' corpus under data")


def _is_step_decay(fn) -> bool:
    """Whether ``fn`` is upstream's step decay (``make_learning_rate_decay_fn`` with decay_method none)."""
    from onmt.utils.optimizers import exponential_decay

    return isinstance(fn, functools.partial) and fn.func is exponential_decay


def wrap_from_opt(upstream):
    """``Optimizer.from_opt``: remember whether to halve (the halvings come with the state dict); with
    valid_lr_halving, no step decay (upstream builds it from the checkpoint's options on -train_from, so
    the options alone cannot switch it off there)."""

    def from_opt(cls, model, opt, checkpoint=None):
        optim = upstream(cls, model, opt, checkpoint)
        optim._entmax_halving = bool(getattr(opt, "valid_lr_halving", False))
        optim._entmax_halving_every = int(getattr(opt, "valid_lr_halving_every", 1) or 1)
        if optim._entmax_halving and _is_step_decay(optim._learning_rate_decay_fn):
            optim._learning_rate_decay_fn = None
        return optim

    return from_opt


def state_of(optim) -> dict:
    """The halving state saved with the optimizer (``resume_state``)."""
    return {"entmax_lr_halvings": getattr(optim, "_entmax_halvings", 0),
            "entmax_last_valid_loss": getattr(optim, "_entmax_last_valid", None),
            "entmax_validations": getattr(optim, "_entmax_validations", 0)}


def load_into(optim, state_dict: dict) -> None:
    """Back from a checkpoint: the learning rate halved as often as the saved run halved it
    (a stock checkpoint has no halvings: the rate stays)."""
    halvings = int(state_dict.get("entmax_lr_halvings", 0) or 0)
    optim._learning_rate *= 0.5 ** (halvings - getattr(optim, "_entmax_halvings", 0))
    optim._entmax_halvings = halvings
    optim._entmax_last_valid = state_dict.get("entmax_last_valid_loss")
    optim._entmax_validations = int(state_dict.get("entmax_validations", 0) or 0)


def wrap_validate(upstream):
    """``Trainer.validate``: at every ``valid_lr_halving_every``-th validation, compare its loss per target
    token with the previous check's; halve the learning rate if it rose."""

    def validate(self, valid_iter, moving_average=None):
        stats = upstream(self, valid_iter, moving_average)
        optim = self.optim
        if not getattr(optim, "_entmax_halving", False) or not stats.n_words:
            return stats
        optim._entmax_validations = getattr(optim, "_entmax_validations", 0) + 1
        if optim._entmax_validations % getattr(optim, "_entmax_halving_every", 1):
            return stats  # not a checking validation (valid_lr_halving_every)
        loss = stats.loss / stats.n_words
        last = getattr(optim, "_entmax_last_valid", None)
        if last is not None and loss > last:
            optim._learning_rate *= 0.5
            optim._entmax_halvings = getattr(optim, "_entmax_halvings", 0) + 1
            _logger().info("valid_lr_halving: validation loss %.4f > %.4f, learning rate halved to %g",
                           loss, last, optim._learning_rate)
        optim._entmax_last_valid = loss
        return stats

    return validate
