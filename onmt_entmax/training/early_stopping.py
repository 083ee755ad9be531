"""Early stopping that a resumed run continues, in both toolkits.

OpenNMT-py 3.5.1's and Eole 0.6's ``EarlyStopping`` (``early_stopping: N``, the same class in both)
counts validations without a gain against the best score so far, but their checkpoints hold neither:
a run resumed with ``train_from`` starts the count at N again and takes its first validation as the
best, so a run trained in pieces (``reproduce.py --max-minutes``, one lent machine after another)
would stop later than the same run trained at once. The state rides in the optimizer's state dict
(``onmt_entmax.training.resume_state``; both toolkits save a checkpoint after the step's validation and patience
update) and goes back into the early stopper when the trainer is built (``wrap_build_trainer``, over
either toolkit's ``build_trainer``). This module imports neither toolkit.
"""
from __future__ import annotations

import logging
from typing import Callable

STATE_KEY = "entmax_early_stopping"
_log = logging.getLogger("onmt_entmax.training.early_stopping")


def snapshot(stopper) -> dict:
    """What ``restore`` needs: the patience left (decreasing and stalled), the status, the step of
    the best validation and each criterion's best score."""
    return {"tolerance": stopper.tolerance, "current_tolerance": stopper.current_tolerance,
            "stalled_tolerance": stopper.stalled_tolerance, "status": stopper.status.name,
            "current_step_best": stopper.current_step_best,
            "best_scores": {s.name: s.best_score for s in stopper.early_stopping_scorers}}


def restore(stopper, state: dict, log: logging.Logger = _log) -> bool:
    """Continue ``state`` in ``stopper``. Validations already spent without a gain stay spent, also
    when ``early_stopping`` changed between pieces (the patience left is the new N minus those); a
    resumed run with other criteria starts afresh (their best scores were never measured). Returns
    whether the state was taken."""
    scorers = {s.name: s for s in stopper.early_stopping_scorers}
    best = state.get("best_scores") or {}
    if set(best) != set(scorers):
        log.info("early stopping starts afresh: the checkpoint's criteria %s are not this run's %s",
                 sorted(best), sorted(scorers))
        return False
    for name, score in best.items():
        scorers[name].best_score = score
    spent = state["tolerance"] - state["current_tolerance"]
    stalled = state["tolerance"] - state["stalled_tolerance"]
    stopper.current_tolerance = max(stopper.tolerance - spent, 0)
    stopper.stalled_tolerance = max(stopper.tolerance - stalled, 0)
    stopper.current_step_best = state["current_step_best"]
    status = type(stopper.status)
    stopper.status = (status.STOPPED if min(stopper.current_tolerance, stopper.stalled_tolerance) == 0
                      else status[state["status"]])
    log.info("early stopping resumed: best %s at step %d, patience %d/%d (stalled %d/%d)",
             ", ".join(f"{n} {v:g}" for n, v in best.items()), stopper.current_step_best,
             stopper.current_tolerance, stopper.tolerance, stopper.stalled_tolerance, stopper.tolerance)
    return True


def state_of(optim) -> dict:
    """The early stopper's state saved with the optimizer (none without early stopping)."""
    stopper = getattr(optim, "_entmax_earlystopper", None)
    return {} if stopper is None else {STATE_KEY: snapshot(stopper)}


def load_into(optim, state_dict: dict) -> None:
    """Keep a checkpoint's early-stopping state until the trainer (and its early stopper) is built."""
    optim._entmax_early_state = state_dict.get(STATE_KEY)


def continue_in(trainer, optim, log: logging.Logger = _log) -> None:
    """A trainer just built: its early stopper continues the checkpoint's state (kept by ``load_into``),
    and the optimizer can reach the stopper when a checkpoint is saved (``state_of``)."""
    stopper = getattr(trainer, "earlystopper", None)
    if stopper is None or optim is None:
        return
    optim._entmax_earlystopper = stopper
    saved = getattr(optim, "_entmax_early_state", None)
    if saved:
        restore(stopper, saved, log)


def wrap_build_trainer(upstream: Callable, logger: Callable[[], logging.Logger]) -> Callable:
    """Wrapper of a toolkit's ``build_trainer`` (the same signature in OpenNMT-py 3.5.1 and Eole 0.6):
    the early stopper continues the checkpoint's state (``continue_in``; ``logger``: the toolkit's)."""

    def build_trainer(config, device_id, model, vocabs, optim, model_saver=None):
        trainer = upstream(config, device_id, model, vocabs, optim, model_saver)
        continue_in(trainer, optim, logger())
        return trainer

    return build_trainer
