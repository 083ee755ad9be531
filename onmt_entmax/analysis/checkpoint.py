"""Reading a checkpoint without running code from it.

``torch.load`` unpickles, and a pickle can call any function (``exec`` included). With
``weights_only=True`` torch unpickles only tensors, containers, numbers and an allowlist of classes;
OpenNMT-py checkpoints hold one class besides those, their options as an ``argparse.Namespace``,
which is the whole allowlist here. ``weights_only=True`` is passed explicitly: torch >= 2.6
defaults to it, but ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (and torch 2.4-2.5's default) turn only
the *default* off, never an explicit True. torch < 2.4 has no allowlist (``add_safe_globals``), so
an OpenNMT-py checkpoint cannot be read safely there: refused with the version to install.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import re

import torch

SAFE_GLOBALS = [argparse.Namespace]
MIN_TORCH = (2, 4)


class CheckpointError(ValueError):
    """A checkpoint that is refused (it would run code, or is not a checkpoint); names the file."""


def torch_version() -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", torch.__version__).groups()
    return int(major), int(minor)


def check_torch() -> None:
    """Refuse a torch that cannot load OpenNMT-py checkpoints weights-only (no allowlist before 2.4)."""
    if torch_version() < MIN_TORCH or not hasattr(torch.serialization, "add_safe_globals"):
        raise CheckpointError(
            f"torch {torch.__version__} cannot load OpenNMT-py checkpoints without letting them run code "
            f"(weights-only loading has no allowlist for their options before torch "
            f"{'.'.join(map(str, MIN_TORCH))}): pip install 'torch>={'.'.join(map(str, MIN_TORCH))}'")


def allowlisted():
    """A context in which ``SAFE_GLOBALS`` are allowlisted; the global allowlist is left as it was
    (torch's own context, where it exists, removes on exit what it added)."""
    check_torch()
    ser = torch.serialization
    if all(g in ser.get_safe_globals() for g in SAFE_GLOBALS) if hasattr(ser, "get_safe_globals") else False:
        return contextlib.nullcontext()
    if hasattr(ser, "safe_globals"):
        return ser.safe_globals(SAFE_GLOBALS)
    ser.add_safe_globals(SAFE_GLOBALS)  # torch 2.4: no context manager
    return contextlib.nullcontext()


def _refusal(path, err: Exception) -> str:
    text = str(err)
    found = re.search(r"Unsupported global: GLOBAL (\S+)", text)
    if found:
        return (f"{path}: refused: loading it would call {found.group(1)} (a checkpoint holds tensors, numbers "
                f"and its options only; this file could run code when unpickled)")
    # torch's weights-only failure opens with advice to load without weights_only (the very thing refused
    # here); the reason follows "WeightsUnpickler error:"
    reason = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
    detail = reason.group(1) if reason else text.splitlines()[0] if text else type(err).__name__
    return f"{path}: not a readable PyTorch checkpoint ({detail})"


def load_checkpoint(path, map_location="cpu") -> dict:
    """``torch.load(path, map_location, weights_only=True)`` with the allowlist; CheckpointError (a
    ValueError naming the file) for a file that would run code or is no checkpoint."""
    if isinstance(path, (str, os.PathLike)) and not os.path.isfile(path):
        what = "a folder, not a checkpoint file" if os.path.isdir(path) else "no such checkpoint file"
        raise CheckpointError(f"{path}: {what}")
    with allowlisted():
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError) as err:
            raise CheckpointError(_refusal(path, err)) from None


__all__ = ["CheckpointError", "SAFE_GLOBALS", "MIN_TORCH", "allowlisted", "check_torch", "load_checkpoint"]
