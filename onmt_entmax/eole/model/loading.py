"""An Eole model folder checked as it loads: its files before Eole reads them, its weights after.

Eole reads a model folder (``config.json``, ``vocab.json``, ``model.*.safetensors``) in ``get_metadata``
on every load (``eole predict``, each member of an ensemble, ``train_from``) and the first folder's
``config.json`` once more while ``eole predict`` builds its config (``PredictConfig``). A file missing
there, truncated or malformed ended in a traceback (``No safetensors file found``, ``SafetensorError``,
``FileNotFoundError``) or in a JSON or pydantic error that named no file: each is one ``ConfigError``
line here, naming the file and what it should hold. Once ``load_safe_state_dict`` has filled the model,
every weight is checked finite (``analysis.checkpoint.check_finite``, as the OpenNMT-py adapter checks its
checkpoints): a NaN or inf weight (a diverged run) decodes every line empty and trains to NaN.
"""
from __future__ import annotations

import glob
import json
import os
from typing import Callable

from onmt_entmax.analysis.checkpoint import check_finite
from onmt_entmax.errors import CheckpointError, ConfigError

WEIGHTS = "model.*.safetensors"  # Eole's shards: model.00.safetensors, ...


def _json_file(path: str, what: str, expand: bool = False) -> dict:
    """The JSON object in ``path`` (``expand``: with ``$VARS`` expanded, as Eole reads ``config.json``)."""
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: no such file; an Eole model folder holds {what} there")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        value = json.loads(os.path.expandvars(text) if expand else text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path}: not a JSON file ({err}); it should hold {what}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: holds a JSON {type(value).__name__}, not {what}")
    return value


def check_model_config_file(folder: str, required: bool = True) -> None:
    """``folder/config.json`` (unless not ``required`` and absent) valid JSON and a valid Eole model and
    training config (checked as ``PredictConfig`` reads it); else a ``ConfigError`` naming the file."""
    from eole.config.models import build_model_config
    from eole.config.training import TrainingConfig
    from pydantic import ValidationError

    from ..validation import describe

    path = os.path.join(folder, "config.json")
    if not required and not os.path.isfile(path):
        return  # (PredictConfig reads none then: files.check_model_folders refuses it once the config is built)
    os.environ["MODEL_PATH"] = folder  # what Eole sets before it expands config.json's variables
    config = _json_file(path, "the model's config (model, training, ...)", expand=True)
    try:
        build_model_config(config.get("model", {}))
        TrainingConfig(**config.get("training", {}))
    except ValidationError as err:
        raise ConfigError(f"{path}: {describe(err)}") from None


def check_model_folder(folder: str) -> None:
    """Every file Eole loads from a local model ``folder`` there and readable: ``config.json`` (valid),
    ``vocab.json`` (the source and target token lists), at least one ``model.*.safetensors`` whose header
    reads (a truncated file's does not); else a ``ConfigError`` naming the file."""
    from safetensors import safe_open

    if not os.path.isdir(folder):
        return  # (Eole's to refuse or to fetch from the Hugging Face hub)
    check_model_config_file(folder)
    vocab = _json_file(os.path.join(folder, "vocab.json"), "the vocabularies (src, tgt)")
    for side in ("src", "tgt"):
        if not isinstance(vocab.get(side), list):
            raise ConfigError(f"{os.path.join(folder, 'vocab.json')}: no {side!r} token list (an Eole vocab.json "
                              f"holds src and tgt)")
    shards = sorted(glob.glob(os.path.join(glob.escape(folder), WEIGHTS)))
    if not shards:
        raise ConfigError(f"{folder}: no model.00.safetensors (the model's weights) in this model folder")
    for shard in shards:
        try:
            with safe_open(shard, framework="pt", device="cpu"):
                pass
        except Exception as err:  # (safetensors raises its own SafetensorError, OSError, ...)
            reason = " ".join(str(err).split()) or type(err).__name__
            raise ConfigError(f"{shard}: not a readable safetensors file ({reason}): truncated, or not "
                              f"written whole?") from None


def wrap_get_metadata(upstream: Callable) -> Callable:
    """``eole.models.model_saver.get_metadata(model_path)``: the folder's files checked first."""

    def get_metadata(model_path):
        check_model_folder(model_path)
        return upstream(model_path)

    return get_metadata


def wrap_predict_config_init(upstream: Callable) -> Callable:
    """``PredictConfig.__init__``: the first ``model_path``'s ``config.json`` checked before the config's
    validator reads it (an error raised there would reach the user as a pydantic error naming no file)."""

    def __init__(self, /, **data):
        paths = data.get("model_path")
        first = paths[0] if isinstance(paths, (list, tuple)) and paths else paths
        if isinstance(first, (str, os.PathLike)) and os.path.isdir(first):
            check_model_config_file(str(first), required=False)
        upstream(self, **data)

    return __init__


def _shard_of(folder: str, name: str) -> str:
    """The shard of ``folder`` that holds the weight ``name`` (the folder if none names it)."""
    from safetensors import safe_open

    for shard in sorted(glob.glob(os.path.join(glob.escape(str(folder)), WEIGHTS))):
        with safe_open(shard, framework="pt", device="cpu") as f:
            if name in f.keys():
                return shard
    return str(folder)


def wrap_load_safe_state_dict(upstream: Callable) -> Callable:
    """``BaseModel.load_safe_state_dict(model_path, ...)``: once loaded, every weight finite, else a
    ``ConfigError`` naming the weight and its file (alpha-ReLU's unresolved ``generator.tau`` may be NaN)."""

    def load_safe_state_dict(self, model_path, *args, **kwargs):
        found = upstream(self, model_path, *args, **kwargs)
        try:
            check_finite(self.state_dict(keep_vars=True).items(), lambda name: _shard_of(model_path, name))
        except CheckpointError as err:
            raise ConfigError(str(err)) from None
        return found

    return load_safe_state_dict


__all__ = ["check_model_config_file", "check_model_folder", "wrap_get_metadata", "wrap_load_safe_state_dict",
           "wrap_predict_config_init"]
