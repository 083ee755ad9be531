"""Checks of the Entmax options, run by ``validate_model_opts`` before any model is built."""
from __future__ import annotations

import math
from typing import Optional

from onmt_entmax.modules.attention import ALPHA_MAX, ALPHA_MIN
from onmt_entmax.registry import get_transformation, transformation_class

from .options import ATTENTION_KINDS, DEFERRED_TAU


class EntmaxOptionError(ValueError):
    """A bad Entmax option; the message names the option."""


def _alpha(opt, name: str) -> Optional[float]:
    value = getattr(opt, name, None)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 1:
        raise EntmaxOptionError(f"{name} must be a finite number >= 1 (1 is softmax), got {value!r}")
    return float(value)


def attention_spec(opt, kind: str) -> tuple[str, Optional[float]]:
    """(function, alpha) of the Transformer attention ``kind`` in {enc, dec, context}."""
    name = getattr(opt, f"{kind}_attention_function", None) or getattr(opt, "attention_function", "softmax")
    alpha = _alpha(opt, f"{kind}_attention_alpha")
    if alpha is None:
        alpha = _alpha(opt, "attention_alpha")
    return name, alpha


def _uses_transformer(opt) -> bool:
    return "transformer" in (getattr(opt, "encoder_type", ""), getattr(opt, "decoder_type", ""))


def validate_entmax_opts(opt) -> None:
    """Raise ``EntmaxOptionError`` (a ValueError) naming the first bad Entmax option of ``opt``."""
    bisect_iter = getattr(opt, "bisect_iter", None)
    if bisect_iter is not None and (not isinstance(bisect_iter, int) or bisect_iter < 1):
        raise EntmaxOptionError(f"bisect_iter must be a positive integer, got {bisect_iter!r}")

    gen = getattr(opt, "generator_function", "softmax")
    try:
        cls = transformation_class(gen, "generator_function")
    except ValueError as err:
        raise EntmaxOptionError(str(err)) from None
    alpha = _alpha(opt, "generator_alpha")
    tau = getattr(opt, "generator_tau", None)
    if cls.uses_tau:
        if tau is None:
            raise EntmaxOptionError(
                f"generator_function {gen} needs generator_tau: a number, 'auto' (the mean 1.5-entmax "
                f"threshold of the untrained model on the first training batch) or 'formula' (eq. 3 of "
                f"Speeding Up Entmax)")
        if tau not in DEFERRED_TAU and (not isinstance(tau, (int, float)) or not math.isfinite(tau)):
            raise EntmaxOptionError(f"generator_tau must be a finite number, 'auto' or 'formula', got {tau!r}")
    try:
        get_transformation(gen, alpha=alpha, tau=None if tau in DEFERRED_TAU else tau,
                           n_iter=bisect_iter, option="generator_function")
    except ValueError as err:
        raise EntmaxOptionError(f"generator_alpha / generator_function: {err}") from None
    if getattr(opt, "copy_attn", False) and gen != "softmax":
        raise EntmaxOptionError(
            f"copy_attn mixes the generator's probabilities with copy probabilities and supports only "
            f"generator_function softmax, got generator_function {gen}")

    ga = getattr(opt, "global_attention_function", "softmax")
    try:
        get_transformation(ga, alpha=_alpha(opt, "global_attention_alpha"), n_iter=bisect_iter,
                           option="global_attention_function")
        if not transformation_class(ga).for_attention:
            raise ValueError(f"global_attention_function: {ga} is not an attention normalizer")
    except ValueError as err:
        raise EntmaxOptionError(str(err)) from None

    sparse_kinds = []
    for kind in ATTENTION_KINDS:
        name, kalpha = attention_spec(opt, kind)
        option = f"{kind}_attention_function" if getattr(opt, f"{kind}_attention_function", None) \
            else "attention_function"
        try:
            t = get_transformation(name, alpha=kalpha, n_iter=bisect_iter, option=option)
        except ValueError as err:
            raise EntmaxOptionError(str(err)) from None
        if not t.for_attention:
            raise EntmaxOptionError(f"{option}: {name} is not an attention normalizer")
        if getattr(opt, "learn_alpha", False) and t.sparse:
            if name == "sparsemax":
                raise EntmaxOptionError(
                    f"learn_alpha starts from the alpha of {option}; sparsemax (alpha = 2) is the upper end "
                    f"of the learnable range: use entmax15 or entmax_bisect with attention_alpha")
            start = getattr(t, "alpha", 1.5) or 1.5
            if not ALPHA_MIN <= start < ALPHA_MAX:
                raise EntmaxOptionError(
                    f"learn_alpha: the starting alpha ({kind}_attention_alpha / attention_alpha = {start}) must "
                    f"be in [{ALPHA_MIN}, {ALPHA_MAX})")
            sparse_kinds.append(kind)
    if getattr(opt, "learn_alpha", False):
        if not sparse_kinds:
            raise EntmaxOptionError(
                "learn_alpha needs a sparse Transformer attention: set attention_function to entmax15 or "
                "entmax_bisect (softmax has no alpha to learn)")
        if not _uses_transformer(opt):
            raise EntmaxOptionError("learn_alpha applies to Transformer attention (encoder_type/decoder_type "
                                    "transformer)")


def wrap_validate_model_opts(upstream):
    """``ArgumentParser.validate_model_opts`` (classmethod): stock checks, then ours."""

    def validate_model_opts(cls, model_opt):
        upstream(cls, model_opt)
        validate_entmax_opts(model_opt)

    return validate_model_opts
