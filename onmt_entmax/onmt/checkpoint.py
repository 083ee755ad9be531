"""Every checkpoint OpenNMT-py 3.5.1 loads is read weights-only, whatever torch is installed.

Upstream reads checkpoints with a plain ``torch.load(path, map_location=...)`` in three modules:
``onmt.models.model_saver`` (``load_checkpoint``: ``onmt_translate``, ``-train_from``, and so our
``SparseDecoder`` and analysis commands), ``onmt.bin.average_models`` and ``onmt.bin.release_model``.
That call runs any code pickled into the file wherever torch's default is not weights-only (torch
2.1-2.5, or ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``). The name ``torch`` of those three modules is
bound to ``WeightsOnlyTorch``: torch itself, except that ``load`` is
``analysis.checkpoint.load_checkpoint`` (explicit ``weights_only=True``, the options' class
allowlisted, a one-line ``CheckpointError`` naming the file otherwise) and ``save`` to a path is
``training.saving.atomic_save`` (checkpoints, averaged models: written whole or not at all). Nothing else
in torch or in the process changes.
"""
from __future__ import annotations

import argparse
import contextvars
import importlib
import os
import types

import torch

from onmt_entmax.analysis.checkpoint import SAFE_GLOBALS, CheckpointError, check_torch, load_checkpoint
from onmt_entmax.training.saving import atomic_save

LOADING_MODULES = ("onmt.models.model_saver", "onmt.bin.average_models", "onmt.bin.release_model")
_LOADED = contextvars.ContextVar("onmt_entmax_loaded_checkpoints", default=None)  # [(path, options)] if recording


class WeightsOnlyTorch(types.ModuleType):
    """``torch`` as the checkpoint modules of OpenNMT-py see it: ``load`` is weights-only, ``save`` atomic."""

    def __init__(self) -> None:
        super().__init__("torch", "torch, with a weights-only torch.load (onmt_entmax.onmt.checkpoint)")

    def __getattr__(self, name: str):
        return getattr(torch, name)

    @staticmethod
    def load(f, map_location=None, *args, **kwargs):
        """``torch.load`` weights-only; the caller's ``weights_only`` and pickle options are not honoured."""
        ckpt = load_checkpoint(f, map_location=map_location)
        seen = _LOADED.get()
        if seen is not None:
            seen.append((str(f), ckpt.get("opt") if isinstance(ckpt, dict) else None))
        return ckpt

    @staticmethod
    def save(obj, f, *args, **kwargs) -> None:
        """``torch.save``; to a path, written whole or not at all (``training.saving.atomic_save``: a full disk
        leaves no truncated checkpoint under its name and ends the run in one line)."""
        if not isinstance(f, (str, os.PathLike)):
            return torch.save(obj, f, *args, **kwargs)
        atomic_save(obj, f, lambda value, file: torch.save(value, file, *args, **kwargs))


def allow_checkpoint_globals() -> None:
    """Allowlist the options' class process-wide (torch >= 2.6 ``torch.load`` calls of others)."""
    check_torch()
    torch.serialization.add_safe_globals(SAFE_GLOBALS)


def install_weights_only_loading() -> None:
    """Bind ``torch`` in each of ``LOADING_MODULES`` to ``WeightsOnlyTorch`` (idempotent)."""
    allow_checkpoint_globals()
    safe = WeightsOnlyTorch()
    for name in LOADING_MODULES:
        module = importlib.import_module(name)
        if not isinstance(module.torch, WeightsOnlyTorch):
            module.torch = safe


# --- onmt_average_models -------------------------------------------------------------------------
def _entmax_values(opt) -> dict:
    from onmt_entmax.options.model import model_option_names

    defaults = {"generator_function": "softmax", "global_attention_function": "softmax",
                "attention_function": "softmax", "learn_alpha": False}
    return {n: getattr(opt, n, defaults.get(n)) for n in model_option_names()}


def check_same_transformations(loaded) -> None:
    """Checkpoints averaged together must have the same Entmax options: the mean of a sparse and a
    softmax model's weights (or of two alphas) is neither model, and upstream keeps the first one's
    options for it."""
    if len(loaded) < 2:
        return
    first, first_opt = loaded[0]
    mine = _entmax_values(first_opt)
    for path, opt in loaded[1:]:
        theirs = _entmax_values(opt)
        for name, value in mine.items():
            if theirs[name] != value:
                raise CheckpointError(
                    f"-models: {first} and {path} differ in {name} ({value!r} vs {theirs[name]!r}): the average of "
                    f"their weights is neither model; average checkpoints of one training run")


def wrap_average_models(upstream):
    """``onmt.bin.average_models.average_models``: refuse checkpoints with different Entmax options
    (before ``main`` writes anything)."""

    def average_models(model_files, fp32=False):
        loaded: list = []
        token = _LOADED.set(loaded)
        try:
            final = upstream(model_files, fp32)
        finally:
            _LOADED.reset(token)
        check_same_transformations(loaded)
        return final

    return average_models


def wrap_average_main(upstream):
    """``onmt.bin.average_models.main``: ``-output`` must not be one of ``-models`` (checked first)."""

    def main(*args, **kwargs):
        from .file_checks import check_outputs

        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("-models", "-m", nargs="+")
        parser.add_argument("-output", "-o")
        known, _ = parser.parse_known_args()
        if known.models and known.output:
            check_outputs({"output": known.output}, {"models": known.models})
        return upstream(*args, **kwargs)

    return main


__all__ = ["CheckpointError", "WeightsOnlyTorch", "allow_checkpoint_globals", "check_same_transformations",
           "install_weights_only_loading", "wrap_average_main", "wrap_average_models"]
