"""Reading a checkpoint without running code from it.

``torch.load`` unpickles, and a pickle can call any function (``exec`` included). With
``weights_only=True`` torch unpickles only tensors, containers, numbers and an allowlist of classes;
OpenNMT-py checkpoints hold one class besides those, their options as an ``argparse.Namespace``,
which is the whole allowlist here. ``weights_only=True`` is passed explicitly: torch >= 2.6
defaults to it, but ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (and torch 2.4-2.5's default) turn only
the *default* off, never an explicit True. torch < 2.4 has no allowlist (``add_safe_globals``), so
an OpenNMT-py checkpoint cannot be read safely there: refused with the version to install.

What is read is then checked as a model: a dict with the keys its reader needs, and every weight finite.
A NaN or inf weight (a diverged run, a learned alpha's logit gone NaN) makes every probability NaN:
decoding then finds no hypothesis and writes empty lines, training goes on at ``loss: nan``. One pass of
``isfinite`` over the weights refuses it instead, naming the parameter and the file. (The one NaN that
means something is alpha-ReLU's ``generator.tau`` before ``generator_tau: auto`` resolves it.)
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import Callable, Iterable, Mapping

import torch
from torch import Tensor

from onmt_entmax.errors import CheckpointError

SAFE_GLOBALS = [argparse.Namespace]
MIN_TORCH = (2, 4)
WEIGHTS = ("model", "generator")  # the state dicts of an OpenNMT-py checkpoint
PENDING_NAN = ("generator.tau",)  # NaN by design until resolved (EntmaxGenerator's alpha-ReLU threshold)
ZIP_MAGIC, PICKLE_MAGIC = b"PK\x03\x04", b"\x80"  # torch.save's zip archive; the legacy format's pickle


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
    head = _head(path)
    if head is not None and not head.startswith((ZIP_MAGIC, PICKLE_MAGIC)):
        # (torch's own error for a text file is whatever its unpickler tripped on: "pop from empty list")
        return (f"{path}: not a readable PyTorch checkpoint (it begins {head[:24]!r}, not the zip archive "
                f"torch.save writes: a text file?)")
    # torch's weights-only failure opens with advice to load without weights_only (the very thing refused
    # here); the reason follows "WeightsUnpickler error:"
    reason = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
    detail = reason.group(1) if reason else text.splitlines()[0] if text else type(err).__name__
    return f"{path}: not a readable PyTorch checkpoint ({detail})"


def _head(path) -> bytes | None:
    """The first bytes of the file at ``path`` (None for a file object or an unreadable file)."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    try:
        with open(path, "rb") as f:
            return f.read(64)
    except OSError:
        return None


def load_checkpoint(path, map_location="cpu", keys: Iterable[str] = ()) -> dict:
    """``torch.load(path, map_location, weights_only=True)`` with the allowlist, then ``check_checkpoint``;
    CheckpointError (a ValueError naming the file) for a file that would run code, is no checkpoint (lacks
    one of ``keys``) or holds a weight that is not finite."""
    if isinstance(path, (str, os.PathLike)) and not os.path.isfile(path):
        what = "a folder, not a checkpoint file" if os.path.isdir(path) else "no such checkpoint file"
        raise CheckpointError(f"{path}: {what}")
    with allowlisted():
        try:
            ckpt = torch.load(path, map_location=map_location, weights_only=True)
        except Exception as err:  # any file can be given: its bytes trip torch's unpickler anywhere
            raise CheckpointError(_refusal(path, err)) from None
    return check_checkpoint(ckpt, path, keys)


def check_checkpoint(ckpt, path, keys: Iterable[str] = ()) -> dict:
    """``ckpt`` (read from ``path``) if it is a dict with every one of ``keys``, whose ``WEIGHTS`` are
    mappings of tensors, all finite (``check_finite``); else CheckpointError naming the file."""
    keys = list(keys)
    missing = [k for k in keys if k not in ckpt] if isinstance(ckpt, dict) else keys
    if not isinstance(ckpt, dict) or missing:
        holds = (f"the keys {', '.join(map(str, list(ckpt)[:6]))}" if isinstance(ckpt, dict) and ckpt
                 else "an empty dict" if isinstance(ckpt, dict) else f"a {type(ckpt).__name__}")
        expected = f"a dict with {', '.join(keys)}" if keys else "a dict"
        raise CheckpointError(f"{path}: a PyTorch file but not an OpenNMT-py checkpoint (expected {expected}; it "
                              f"holds {holds})")
    parts = [k for k in WEIGHTS if ckpt.get(k) is not None]
    for part in parts:
        state = ckpt[part]
        if not isinstance(state, Mapping) or not all(isinstance(v, Tensor) for v in state.values()):
            raise CheckpointError(f"{path}: its {part!r} is not a state dict (a mapping of names to tensors)")
    named = ((f"generator.{k}" if part == "generator" else k, v) for part in parts for k, v in ckpt[part].items())
    check_finite(named, str(path))
    return ckpt


def first_not_finite(named: Iterable[tuple[str, Tensor]], may_be_nan: Iterable[str] = ()) -> tuple[str, Tensor] | None:
    """The first (name, tensor) among ``named`` whose floating-point tensor holds a NaN or an infinity, or None;
    a name in ``may_be_nan`` may be NaN throughout. Other values than tensors are passed over.

    One ``isfinite(...).all()`` a tensor, gathered without a device sync per tensor (one at the end)."""
    may_be_nan = set(may_be_nan)
    named = [(n, t) for n, t in named if isinstance(t, Tensor) and t.is_floating_point() and not t.is_meta]
    flags = [torch.isfinite(t).all() | torch.isnan(t).all() if n in may_be_nan else torch.isfinite(t).all()
             for n, t in named]
    if not flags or bool(torch.stack([f.to(flags[0].device) for f in flags]).all()):
        return None
    return next((n, t) for (n, t), ok in zip(named, flags) if not bool(ok))


def not_finite_values(t: Tensor) -> str:
    """What of ``t`` is not finite, in words: "NaN and inf (3 of 256 values)"."""
    kinds = " and ".join(k for k, m in (("NaN", torch.isnan(t)), ("inf", torch.isinf(t))) if bool(m.any()))
    return f"{kinds} ({int((~torch.isfinite(t)).sum())} of {t.numel()} values)"


def check_finite(named: Iterable[tuple[str, Tensor]], source: str | Callable[[str], str]) -> None:
    """CheckpointError naming the first parameter among ``named`` (name, tensor) that holds a NaN or an
    infinity (``first_not_finite``), and its file: ``source``, or ``source(name)``; ``PENDING_NAN`` names may be
    NaN throughout."""
    bad = first_not_finite(named, PENDING_NAN)
    if bad is None:
        return
    name, t = bad
    what = " (a learned attention alpha)" if name.endswith("alpha.a") else ""
    source = source(name) if callable(source) else source
    raise CheckpointError(f"{source}: {name}{what} holds {not_finite_values(t)}: with a weight that is not finite "
                          f"the model decodes nothing and trains to NaN (a diverged run?); use an earlier checkpoint")


def parameter_difference(a: Mapping[str, tuple], b: Mapping[str, tuple], a_name: str = "the first",
                         b_name: str = "the second") -> str | None:
    """How two models' parameters (name -> shape) differ, in a few words; None if they have the same
    names with the same shapes (what averaging them key by key needs)."""
    only_a, only_b = [n for n in a if n not in b], [n for n in b if n not in a]

    def some(names):
        return ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")

    if only_a or only_b:
        return "; ".join(f"{some(names)} only in {name}" for names, name in ((only_a, a_name), (only_b, b_name))
                         if names)
    shaped = [n for n in a if tuple(a[n]) != tuple(b[n])]
    if shaped:
        return f"{shaped[0]} is {tuple(a[shaped[0]])} in {a_name} but {tuple(b[shaped[0]])} in {b_name}" + (
            f", and {len(shaped) - 1} more shapes differ" if len(shaped) > 1 else "")
    return None


__all__ = ["CheckpointError", "SAFE_GLOBALS", "MIN_TORCH", "allowlisted", "check_checkpoint", "check_finite",
           "first_not_finite", "not_finite_values", "check_torch", "load_checkpoint", "parameter_difference"]
