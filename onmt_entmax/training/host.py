"""Where a training step's host work runs: both adapters wrap their toolkit's training loop
(``Trainer.train``) with ``backward_on_calling_thread``; ``ONMT_ENTMAX_TRAIN_HOST`` chooses."""
from __future__ import annotations

import os
from typing import Callable

TRAIN_HOST_SETTINGS = ("calling-thread", "as-is")


def train_host_setting() -> str:
    """``ONMT_ENTMAX_TRAIN_HOST``: ``calling-thread`` (default) or ``as-is``; anything else is refused."""
    value = os.environ.get("ONMT_ENTMAX_TRAIN_HOST", "").strip() or TRAIN_HOST_SETTINGS[0]
    if value not in TRAIN_HOST_SETTINGS:
        from onmt_entmax.errors import EntmaxOptionError

        raise EntmaxOptionError(f"ONMT_ENTMAX_TRAIN_HOST={value!r}: expected one of {', '.join(TRAIN_HOST_SETTINGS)}")
    return value


def backward_on_calling_thread(upstream: Callable) -> Callable:
    """Wrapper of a toolkit's training loop (``Trainer.train``): backward runs on the calling thread.

    On CUDA, autograd hands every backward from the thread that called it to its own device thread;
    with ``torch.autograd.set_multithreading_enabled(False)`` the calling thread runs it itself, which
    speeds up a host-bound step (the SIGMORPHON RNN's: docs/benchmarks.md). Nothing is lost: OpenNMT-py and
    Eole run one process per GPU, so no backward could overlap another. ``ONMT_ENTMAX_TRAIN_HOST=as-is``
    keeps the toolkit's behaviour (what benchmarks compare against).
    """

    def train(self, *args, **kwargs):
        if train_host_setting() == "calling-thread":
            import torch

            torch.autograd.set_multithreading_enabled(False)
        return upstream(self, *args, **kwargs)

    return train
