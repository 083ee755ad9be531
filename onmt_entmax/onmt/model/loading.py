"""Model loading for translation (``model_builder.load_test_model``): translate-time overrides of the
checkpoint's Entmax options, the alpha-ReLU threshold, and whether the model is loaded for a GPU.
"""
from __future__ import annotations

import argparse
import contextvars
from typing import Callable, Optional

from onmt_entmax.errors import EntmaxOptionError
from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.options.files import check_positions
from onmt_entmax.registry import transformation_class

from ..options import translate_option_names
from ..validation import check_applicable, validate_entmax_opts
from .surgery import formula_tau


def _logger():
    """OpenNMT-py's logger, imported late: importing this module must not import ``onmt`` (the
    import hook would then activate the plugin while this module is half-initialised)."""
    from onmt.utils.logging import logger

    return logger


_OVERRIDES = contextvars.ContextVar("onmt_entmax_overrides", default=None)
_GPU_LOAD = contextvars.ContextVar("onmt_entmax_gpu_load", default=False)


def overrides_from(opt) -> dict:
    return {n: getattr(opt, n) for n in translate_option_names() if getattr(opt, n, None) is not None}


def apply_overrides(model_opt, overrides: dict):
    """A copy of the checkpoint's options with translate-time overrides laid over, checked."""
    if not overrides:
        return model_opt
    changed = {k: v for k, v in overrides.items() if getattr(model_opt, k, None) != v}
    if not changed:
        return model_opt
    if getattr(model_opt, "learn_alpha", False) and any("attention" in k for k in changed):
        raise EntmaxOptionError(f"cannot override {', '.join(k for k in changed if 'attention' in k)}: "
                                f"the model learned its attention alphas (learn_alpha)")
    if "generator_function" in changed:
        old = getattr(model_opt, "generator_function", "softmax")
        if transformation_class(old).uses_tau or transformation_class(changed["generator_function"]).uses_tau:
            raise EntmaxOptionError("generator_function: switching to or from alpha_relu at translation time is not "
                                    "supported (its threshold is a model weight)")
    merged = argparse.Namespace(**{**vars(model_opt), **changed})
    validate_entmax_opts(merged)
    check_applicable(merged, set(changed), where="onmt_translate override: ")
    for k, v in changed.items():
        _logger().warning("onmt_translate overrides the model's %s=%r with %r", k, getattr(model_opt, k, None), v)
    return merged


def current_overrides() -> dict:
    return _OVERRIDES.get() or {}


def wrap_load_test_model(upstream: Callable) -> Callable:
    """``model_builder.load_test_model``: pass overrides to the model build; refuse a copy_attn model (upstream
    cannot decode one), an unresolved tau, and -src lines or a -max_length longer than the model's position
    encoding covers (``check_positions``)."""

    def load_test_model(opt, device_id=0, model_path=None):
        from onmt.utils.misc import use_gpu

        token, gpu = _OVERRIDES.set(overrides_from(opt)), _GPU_LOAD.set(bool(use_gpu(opt)))
        try:
            vocabs, model, model_opt = upstream(opt, device_id, model_path)
        finally:
            _OVERRIDES.reset(token)
            _GPU_LOAD.reset(gpu)
        if getattr(model_opt, "copy_attn", False):  # (its first batch would end in KeyError: 'src_map')
            raise EntmaxOptionError(f"-model {model_path or opt.models[0]} was trained with copy_attn, which "
                                    f"OpenNMT-py 3.5.1 cannot decode: its translation data path builds no source "
                                    f"map for the copy generator (-train_from resumes such a model)")
        check_positions(getattr(opt, "src", None), getattr(opt, "max_length", None), position_limit(model))
        gen = getattr(model, "generator", None)
        tau = overrides_from(opt).get("generator_tau")
        if tau == "auto":
            raise EntmaxOptionError("generator_tau: 'auto' is resolved during training; onmt_translate takes a number")
        if isinstance(gen, EntmaxGenerator) and hasattr(gen, "tau") and tau is not None:
            gen.set_tau(formula_tau(gen) if tau == "formula" else tau)
        if isinstance(gen, EntmaxGenerator) and gen.tau_pending():
            raise EntmaxOptionError("generator_tau: this alpha_relu model's threshold was never resolved "
                                    "(saved before its first training batch); pass -generator_tau NUMBER")
        return vocabs, model, apply_overrides(model_opt, overrides_from(opt))

    return load_test_model


def position_limit(model) -> Optional[int]:
    """Positions the model's sinusoidal position tables cover (the fewest; None: no table, no limit)."""
    from onmt.modules.embeddings import PositionalEncoding

    rows = [m.pe.size(0) for m in model.modules() if isinstance(m, PositionalEncoding)]
    return min(rows) if rows else None


def loading_onto_gpu() -> bool:
    """True while ``load_test_model`` (onmt_translate, scoring) loads a model for a GPU."""
    return _GPU_LOAD.get()


def opts_for_build(model_opt):
    """The options the model is built from: checkpoint's plus any translate-time overrides."""
    return apply_overrides(model_opt, current_overrides())


__all__ = ["wrap_load_test_model", "opts_for_build", "loading_onto_gpu"]


def generator_keys_as_model_keys(checkpoint: dict) -> dict:
    """``checkpoint`` with the dotted keys of its ``generator`` state (a copy generator's ``linear.weight``,
    ``linear_copy.bias``, ...) moved to its ``model`` state as ``generator.<key>``; the checkpoint itself when
    there are none.

    ``BaseModel.load_state_dict`` looks a generator parameter up in ``checkpoint["generator"]`` by its last
    name alone (``weight``) or, under a module whose name holds "linear", as ``generator.linear.weight``:
    neither is how OpenNMT-py saves a ``CopyGenerator`` (``linear.weight``), so every ``copy_attn``
    checkpoint fails to load ("Missing key in checkpoint: generator.linear.weight"), for ``onmt_translate``
    and ``-train_from`` alike. Under ``model`` the full name is what upstream's first lookup uses."""
    generator = checkpoint.get("generator")
    dotted = [k for k in generator if "." in k] if isinstance(generator, dict) else []
    if not dotted or not isinstance(checkpoint.get("model"), dict):
        return checkpoint
    model = {**checkpoint["model"], **{f"generator.{k}": generator[k] for k in dotted}}
    return {**checkpoint, "model": model, "generator": {k: v for k, v in generator.items() if k not in dotted}}


def wrap_load_state_dict(upstream: Callable) -> Callable:
    def load_state_dict(self, checkpoint, *args, **kwargs):
        return upstream(self, generator_keys_as_model_keys(checkpoint), *args, **kwargs)

    return load_state_dict
