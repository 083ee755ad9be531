"""Stop on a signal after the step under way, in both toolkits' training loops.

A training process asked to stop (SIGTERM from a runner's time limit or a cluster's pre-emption,
SIGINT = Ctrl-C) finishes the step under way; the toolkit's loop then ends and saves its end-of-
training checkpoint at that step (both toolkits save one after the loop), and the process exits
with 128 + the signal's number, so a runner tells it from a finished run. A second signal stops at
once. Only where one process trains (world_size 1): ranks stopping at different steps would wait
for each other forever.
"""
from __future__ import annotations

import functools
import logging
import os
import signal
import threading
from typing import Callable, Optional

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_stop_request: list[int] = []  # the signal number received, once one was
_previous_handlers: dict = {}  # signal number -> the handler ours replaced


def stop_requested() -> Optional[int]:
    """The signal that asked this training process to stop, or None."""
    return _stop_request[0] if _stop_request else None


def _on_stop_signal(signum, frame) -> None:
    if _stop_request:  # the second one: stop at once, as the handler before ours would
        signal.signal(signum, _previous_handlers.get(signum, signal.SIG_DFL))
        os.kill(os.getpid(), signum)
        return
    _stop_request.append(signum)


def stop_on_signal(upstream: Callable, single_process: Callable[..., bool]) -> Callable:
    """Wrapper of a toolkit's per-process training entry (``train_single.main``): while it runs,
    SIGTERM and SIGINT ask the loop to stop after its step (``stop_between_steps``); when it has, exit
    with 128 + the signal's number. ``single_process(*args)`` says whether this process trains alone."""

    @functools.wraps(upstream)
    def main(*args, **kwargs):
        if not single_process(*args, **kwargs) or threading.current_thread() is not threading.main_thread():
            return upstream(*args, **kwargs)
        _stop_request.clear()
        for signum in STOP_SIGNALS:
            _previous_handlers[signum] = signal.signal(signum, _on_stop_signal)
        try:
            result = upstream(*args, **kwargs)
        finally:
            for signum, handler in _previous_handlers.items():
                signal.signal(signum, handler)
            _previous_handlers.clear()
        if _stop_request:
            raise SystemExit(128 + _stop_request[0])
        return result

    return main


def stop_between_steps(upstream: Callable, logger: str) -> Callable:
    """Wrapper of a trainer's batch generator (``Trainer._accum_batches``): once a stop is requested,
    it hands the loop no further batch, so the loop ends after the step under way and saves its
    checkpoint there. Asked before this process trained a step, it exits at once (the newest
    checkpoint on disk is still the newest state). ``logger``: the toolkit's logger's name."""

    @functools.wraps(upstream)
    def _accum_batches(self, iterator):
        batches = upstream(self, iterator)
        trained = False
        while not _stop_request:
            try:
                item = next(batches)
            except StopIteration:
                return
            if _stop_request:
                break
            trained = True
            yield item
        name = signal.Signals(_stop_request[0]).name
        step = self.optim.training_step - 1  # the optimizer counts the step it will take next
        if not trained:
            logging.getLogger(logger).warning("%s: stopping before the first step of this process; nothing to save",
                                              name)
            raise SystemExit(128 + _stop_request[0])
        logging.getLogger(logger).warning("%s: stopping after step %d; its checkpoint is saved next "
                                          "(train_from it resumes the run)", name, step)

    return _accum_batches
