"""``valid_lr_halving``: halve the learning rate whenever the validation loss rises, in both toolkits.

Peters et al. (2019) train with Adam at 1e-3 "halved whenever the loss increases on the validation
set"; OpenNMT-py 3.5.1 and Eole 0.6 only have step-based decays. ``valid_lr_halving_every: k`` checks
only at every k-th validation, against the loss k validations before: the paper validates its medium
SIGMORPHON runs every ten epochs, so a run that validates every epoch (for its best checkpoint and its
stop rule) halves on the paper's cadence with k = 10.

The halving is the whole schedule, as ``-decay_method smart`` was in the paper's fork of OpenNMT-py:
the toolkits' default step decay (rate x 0.5 every ``decay_steps`` = 10,000 steps from
``start_decay_steps`` = 50,000, on whenever ``decay_method`` is none) is switched off, also when a run
resumes from a checkpoint, where the toolkits rebuild the schedule from the checkpoint's options.

Both toolkits' ``Optimizer`` keep the base rate in ``_learning_rate`` and the step schedule in
``_learning_rate_decay_fn``; the halving state lives beside them (``_entmax_*``) and rides in the
optimizer's state dict (``state_of`` / ``load_into``, through ``onmt_entmax.training.resume_state``), so a
resumed run goes on at the halved rate and on the same cadence. Each adapter keeps its options and
checks and wires ``configure``, ``wrap_validate`` and ``refusal``. This module imports neither toolkit.
"""
from __future__ import annotations

import functools
import logging
from typing import Callable, Optional

STATE_KEYS = ("entmax_lr_halvings", "entmax_last_valid_loss", "entmax_validations")
# both toolkits' step decay options and their defaults: with valid_lr_halving, a value other than these
# means the user asked for both schedules
STEP_DECAY_DEFAULTS = {"start_decay_steps": 50000, "decay_steps": 10000, "learning_rate_decay": 0.5}

def refusal(options, has_valid: bool, name: Callable[[str], str] = str) -> Optional[str]:
    """Why ``options`` (the toolkit's training options, as attributes) cannot halve as asked
    (``has_valid``: the run has validation data), in one line naming the options (``name``: an option
    as the toolkit's config writes it), or None. The halving needs validation data, one process (only
    rank 0 validates: the ranks' rates would diverge) and no other schedule."""
    every = getattr(options, "valid_lr_halving_every", 1)
    if not isinstance(every, int) or every < 1:
        return f"{name('valid_lr_halving_every')}: {every!r}; give a whole number of validations >= 1"
    if not getattr(options, "valid_lr_halving", False):
        if every != 1:
            return (f"{name('valid_lr_halving_every')} is set but {name('valid_lr_halving')} is not: add "
                    f"{name('valid_lr_halving')}: true (or remove {name('valid_lr_halving_every')})")
        return None
    method = getattr(options, "decay_method", "none") or "none"
    if method != "none":
        return (f"{name('valid_lr_halving')} is a learning-rate schedule and {name('decay_method')} {method} is "
                "another: remove one of them")
    asked = [f"{name(k)} {getattr(options, k)}" for k, v in STEP_DECAY_DEFAULTS.items()
             if getattr(options, k, v) != v]
    if asked:
        return (f"{name('valid_lr_halving')} replaces the step decay, but {', '.join(asked)} is set: remove it "
                f"(or {name('valid_lr_halving')})")
    if (getattr(options, "world_size", 1) or 1) > 1:
        return (f"{name('valid_lr_halving')}: only rank 0 validates, so the ranks' learning rates would diverge; "
                f"use it with {name('world_size')} 1")
    if not has_valid:
        return (f"{name('valid_lr_halving')} halves the learning rate when the validation loss rises, but there "
                "is no validation data: add a 'valid' corpus under data")
    return None


def configure(optim, halving: bool, every: int, step_decay: Callable) -> None:
    """After the toolkit built ``optim``: remember whether and how often to halve; with the halving, the
    step decay is switched off (``step_decay``: the toolkit's ``exponential_decay``, which its
    ``make_learning_rate_decay_fn`` binds with ``functools.partial`` when ``decay_method`` is none)."""
    optim._entmax_halving = bool(halving)
    optim._entmax_halving_every = int(every or 1)
    decay = getattr(optim, "_learning_rate_decay_fn", None)
    if optim._entmax_halving and isinstance(decay, functools.partial) and decay.func is step_decay:
        optim._learning_rate_decay_fn = None


def after_validation(optim, loss: float, log: logging.Logger) -> bool:
    """One validation's loss per target token: at every ``_entmax_halving_every``-th validation of a
    halving ``optim``, the base rate is halved if the loss rose since the last check. Returns whether
    it was halved."""
    if not getattr(optim, "_entmax_halving", False):
        return False
    optim._entmax_validations = getattr(optim, "_entmax_validations", 0) + 1
    if optim._entmax_validations % getattr(optim, "_entmax_halving_every", 1):
        return False  # not a checking validation
    last = getattr(optim, "_entmax_last_valid", None)
    optim._entmax_last_valid = loss
    if last is None or loss <= last:
        return False
    optim._learning_rate *= 0.5
    optim._entmax_halvings = getattr(optim, "_entmax_halvings", 0) + 1
    log.info("valid_lr_halving: validation loss %.4f > %.4f, learning rate halved to %g", loss, last,
             optim._learning_rate)
    return True


def wrap_validate(upstream: Callable, tokens: str, logger: Callable[[], logging.Logger]) -> Callable:
    """Wrapper of a toolkit's ``Trainer.validate``: the validation's loss per target token (``tokens``:
    the name of the statistics' token count, ``n_words`` in OpenNMT-py, ``n_tokens`` in Eole) goes to
    ``after_validation``."""

    def validate(self, valid_iter, moving_average=None):
        stats = upstream(self, valid_iter, moving_average)
        count = getattr(stats, tokens)
        if count:
            after_validation(self.optim, stats.loss / count, logger())
        return stats

    return validate


def state_of(optim) -> dict:
    """The halving state, for the optimizer's state dict."""
    return {"entmax_lr_halvings": getattr(optim, "_entmax_halvings", 0),
            "entmax_last_valid_loss": getattr(optim, "_entmax_last_valid", None),
            "entmax_validations": getattr(optim, "_entmax_validations", 0)}


def load_into(optim, state_dict: dict) -> None:
    """Back from a checkpoint: the base rate halved as often as the saved run halved it (a stock
    checkpoint has no halvings: the rate stays)."""
    halvings = int(state_dict.get("entmax_lr_halvings", 0) or 0)
    optim._learning_rate *= 0.5 ** (halvings - getattr(optim, "_entmax_halvings", 0))
    optim._entmax_halvings = halvings
    optim._entmax_last_valid = state_dict.get("entmax_last_valid_loss")
    optim._entmax_validations = int(state_dict.get("entmax_validations", 0) or 0)
