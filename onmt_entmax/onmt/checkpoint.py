"""Checkpoints under torch >= 2.6, whose ``torch.load`` defaults to ``weights_only=True``.

OpenNMT-py 3.5.1 stores its options as an ``argparse.Namespace``, which the weights-only
unpickler refuses. We allowlist exactly the classes OpenNMT-py checkpoints (stock and ours)
contain instead of turning weights-only loading off, which would let a checkpoint run code.
"""
from __future__ import annotations

import argparse

import torch

SAFE_GLOBALS = [argparse.Namespace]


def allow_checkpoint_globals() -> None:
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is not None:  # torch < 2.4 has no weights-only default to worry about
        add(SAFE_GLOBALS)
