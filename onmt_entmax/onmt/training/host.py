"""Backward on the calling thread for the training loop, whose steps are host-bound on small models.

A SIGMORPHON step (2-layer LSTM, batch 64) is ~5 ms of GPU kernels against ~30-40 ms of host time
(docs/benchmarks.md), so how the Python process runs around the kernels sets the speed. On CUDA,
autograd hands every backward from the thread that called it to its own device thread; with
``torch.autograd.set_multithreading_enabled(False)`` the calling thread runs it itself. Measured on
that step (``benchmarks/profile_train.py --host-ab``, H100): 1.21x softmax, 1.34x 1.5-entmax output
and attention; stock ``onmt_train``: 1.16x and 1.24x. Nothing is lost by it: OpenNMT-py runs one
process per GPU, so no backward could overlap another one.

``ONMT_ENTMAX_TRAIN_HOST=as-is`` keeps OpenNMT-py's behaviour (what benchmarks compare against).
"""
from __future__ import annotations

import os
from typing import Callable

import torch

SETTINGS = ("calling-thread", "as-is")


def chosen() -> str:
    """The ``ONMT_ENTMAX_TRAIN_HOST`` setting (default ``calling-thread``), checked."""
    value = os.environ.get("ONMT_ENTMAX_TRAIN_HOST", "").strip() or SETTINGS[0]
    if value not in SETTINGS:
        from ..validation import EntmaxOptionError

        raise EntmaxOptionError(f"ONMT_ENTMAX_TRAIN_HOST={value!r}: expected one of {', '.join(SETTINGS)}")
    return value


def wrap_train(upstream: Callable) -> Callable:
    """``Trainer.train``: backward on the calling thread (unless as-is), then upstream's loop."""

    def train(self, *args, **kwargs):
        setting = chosen()
        if setting == "calling-thread":
            torch.autograd.set_multithreading_enabled(False)
        return upstream(self, *args, **kwargs)

    return train
