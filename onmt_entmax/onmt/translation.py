"""Translation-side hooks: the model's own log-probabilities, and translate-time option overrides.

Upstream ``Inference._decode_and_generate`` computes ``log_softmax(generator(h))``. While it runs
we make the module-level ``log_softmax`` of ``onmt.translate.translator`` resolve to the model's
``generator_log_probs`` (log of the sparse probabilities, -inf for zeros, the mapping training
used); stock softmax models get ``log_softmax`` exactly as before.
"""
from __future__ import annotations

import argparse
import contextvars
from typing import Callable

from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.registry import transformation_class

from .model import formula_tau, generator_log_probs
from .options import translate_option_names
from .validation import EntmaxOptionError, validate_entmax_opts

def _logger():
    """OpenNMT-py's logger, imported late: importing this module must not import ``onmt`` (the
    import hook would then activate the plugin while this module is half-initialised)."""
    from onmt.utils.logging import logger

    return logger



_GENERATOR = contextvars.ContextVar("onmt_entmax_generator", default=None)
_OVERRIDES = contextvars.ContextVar("onmt_entmax_overrides", default=None)
_GPU_LOAD = contextvars.ContextVar("onmt_entmax_gpu_load", default=False)


def make_log_softmax(upstream_log_softmax: Callable) -> Callable:
    """Replacement for ``onmt.translate.translator.log_softmax``."""

    def log_softmax(input, dim=-1, *args, **kwargs):  # noqa: A002 (upstream signature)
        generator = _GENERATOR.get()
        if generator is None or dim not in (-1, input.dim() - 1):
            return upstream_log_softmax(input, dim, *args, **kwargs)
        return generator_log_probs(generator, input)

    return log_softmax


def wrap_decode_and_generate(upstream: Callable) -> Callable:
    def _decode_and_generate(self, *args, **kwargs):
        token = _GENERATOR.set(getattr(self.model, "generator", None))
        try:
            return upstream(self, *args, **kwargs)
        finally:
            _GENERATOR.reset(token)

    return _decode_and_generate


# --- overrides ---------------------------------------------------------------------------------
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
    for k, v in changed.items():
        _logger().warning("onmt_translate overrides the model's %s=%r with %r", k, getattr(model_opt, k, None), v)
    return merged


def current_overrides() -> dict:
    return _OVERRIDES.get() or {}


def wrap_load_test_model(upstream: Callable) -> Callable:
    """``model_builder.load_test_model``: pass overrides to the model build; refuse an unresolved tau."""

    def load_test_model(opt, device_id=0, model_path=None):
        from onmt.utils.misc import use_gpu

        token, gpu = _OVERRIDES.set(overrides_from(opt)), _GPU_LOAD.set(bool(use_gpu(opt)))
        try:
            vocabs, model, model_opt = upstream(opt, device_id, model_path)
        finally:
            _OVERRIDES.reset(token)
            _GPU_LOAD.reset(gpu)
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


def loading_onto_gpu() -> bool:
    """True while ``load_test_model`` (onmt_translate, scoring) loads a model for a GPU."""
    return _GPU_LOAD.get()


def opts_for_build(model_opt):
    """The options the model is built from: checkpoint's plus any translate-time overrides."""
    return apply_overrides(model_opt, current_overrides())


__all__ = ["make_log_softmax", "wrap_decode_and_generate", "wrap_load_test_model", "opts_for_build", "loading_onto_gpu"]
