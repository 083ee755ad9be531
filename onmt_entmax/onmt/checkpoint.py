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
in torch or in the process changes. A file read is refused too if it is no OpenNMT-py checkpoint
(``CHECKPOINT_KEYS`` missing) or holds a NaN or inf weight.

``onmt_average_models`` averages ``model`` and ``generator`` key by key into the first checkpoint's
tensors and keeps its options and vocabulary: each further checkpoint is compared with the first as it
is loaded, before upstream averages it (Entmax options, parameter names and shapes, vocabularies).
"""
from __future__ import annotations

import argparse
import contextvars
import importlib
import types
from typing import NamedTuple

import torch

from onmt_entmax.analysis.checkpoint import SAFE_GLOBALS, check_torch, load_checkpoint, parameter_difference
from onmt_entmax.decoding import check_same_vocab
from onmt_entmax.errors import CheckpointError
from onmt_entmax.training.saving import torch_save

LOADING_MODULES = ("onmt.models.model_saver", "onmt.bin.average_models", "onmt.bin.release_model")
CHECKPOINT_KEYS = ("model", "generator", "vocab", "opt")  # what onmt_translate, -train_from and averaging read
_LOADED = contextvars.ContextVar("onmt_entmax_loaded_checkpoints", default=None)  # [Averaged] while averaging


class WeightsOnlyTorch(types.ModuleType):
    """``torch`` as the checkpoint modules of OpenNMT-py see it: ``load`` is weights-only, ``save`` atomic."""

    def __init__(self) -> None:
        super().__init__("torch", "torch, with a weights-only torch.load (onmt_entmax.onmt.checkpoint)")

    def __getattr__(self, name: str):
        return getattr(torch, name)

    @staticmethod
    def load(f, map_location=None, *args, **kwargs):
        """``torch.load`` weights-only; the caller's ``weights_only`` and pickle options are not honoured."""
        ckpt = load_checkpoint(f, map_location=map_location, keys=CHECKPOINT_KEYS)
        seen = _LOADED.get()
        if seen is not None:
            seen.append(Averaged.of(str(f), ckpt))
            check_averageable(seen[0], seen[-1])
        return ckpt

    # to a path, written whole or not at all (a full disk leaves no truncated checkpoint, one line says so)
    save = staticmethod(torch_save)


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


class Averaged(NamedTuple):
    """What ``onmt_average_models`` must find equal in every checkpoint it averages (read at load time:
    upstream then averages into the first checkpoint's tensors in place)."""

    path: str
    opt: object
    shapes: dict  # parameter name ("generator." for the output layer's) -> shape
    vocab: dict  # side -> tokens

    @classmethod
    def of(cls, path: str, ckpt: dict) -> "Averaged":
        shapes = {f"{prefix}{k}": tuple(v.shape) for part, prefix in (("model", ""), ("generator", "generator."))
                  for k, v in (ckpt.get(part) or {}).items()}
        vocab = ckpt.get("vocab") if isinstance(ckpt.get("vocab"), dict) else {}
        return cls(path, ckpt.get("opt"), shapes, {side: vocab.get(side) for side in ("src", "tgt")})


def check_same_transformations(loaded) -> None:
    """Checkpoints averaged together must have the same Entmax options: the mean of a sparse and a
    softmax model's weights (or of two alphas) is neither model, and upstream keeps the first one's
    options for it. ``loaded``: (path, options) pairs."""
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


def check_averageable(first: Averaged, other: Averaged) -> None:
    """``other`` can be averaged into ``first``: the same Entmax options, the same parameters (names and
    shapes: upstream adds them key by key) and the same vocabularies (upstream keeps the first one's, so
    an average of rows that name different tokens would be decoded as the first's)."""
    check_same_transformations([(first.path, first.opt), (other.path, other.opt)])
    differ = parameter_difference(first.shapes, other.shapes, first.path, other.path)
    if differ:
        raise CheckpointError(f"-models: {first.path} and {other.path} differ in their parameters ({differ}): "
                              f"models of different architectures or options cannot be averaged; average "
                              f"checkpoints of one training run")
    for side, what in (("src", "source vocabulary"), ("tgt", "target vocabulary")):
        if first.vocab[side] is not None and other.vocab[side] is not None:
            try:
                check_same_vocab([first.vocab[side], other.vocab[side]], names=[first.path, other.path], what=what,
                                 whose="checkpoints averaged together")
            except ValueError as err:
                raise CheckpointError(f"-models: {err}: the average would be decoded with the first one's; average "
                                      f"checkpoints of one training run") from None


def wrap_average_models(upstream):
    """``onmt.bin.average_models.average_models``: each checkpoint after the first is checked against it
    as it loads (``check_averageable``), before upstream averages it and before ``main`` writes anything."""

    def average_models(model_files, fp32=False):
        token = _LOADED.set([])
        try:
            return upstream(model_files, fp32)
        finally:
            _LOADED.reset(token)

    return average_models


def wrap_average_main(upstream):
    """``onmt.bin.average_models.main``: ``-output`` must not be one of ``-models`` (checked first)."""

    def main(*args, **kwargs):
        from .files import check_outputs

        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("-models", "-m", nargs="+")
        parser.add_argument("-output", "-o")
        known, _ = parser.parse_known_args()
        if known.models and known.output:
            check_outputs({"output": known.output}, {"models": known.models})
        return upstream(*args, **kwargs)

    return main


__all__ = ["CHECKPOINT_KEYS", "CheckpointError", "WeightsOnlyTorch", "allow_checkpoint_globals", "check_averageable",
           "check_same_transformations", "install_weights_only_loading", "wrap_average_main", "wrap_average_models"]
