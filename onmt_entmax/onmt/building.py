"""Wrappers of OpenNMT-py's model builders (see ``model.install``)."""
from __future__ import annotations

from typing import Callable

from .model import install, reset_learnable_alphas
from .translation import opts_for_build

_STOCK_GLOBAL_ATTENTION = "softmax"  # what we ask upstream to build before installing ours


def wrap_build_base_model(upstream: Callable) -> Callable:
    """Build with upstream, then install our generator and normalizers (before weights load).

    Upstream ``GlobalAttention`` asserts ``attn_func in {softmax, sparsemax}``: it is built as
    softmax and then given our normalizer (upstream's sparsemax is replaced too, by the -inf-safe
    one from ``onmt_entmax.ops``).
    """

    def build_base_model(model_opt, vocabs):
        opt = opts_for_build(model_opt)
        requested = getattr(model_opt, "global_attention_function", _STOCK_GLOBAL_ATTENTION)
        model_opt.global_attention_function = _STOCK_GLOBAL_ATTENTION
        try:
            model = upstream(model_opt, vocabs)
        finally:
            model_opt.global_attention_function = requested
        return install(model, opt)

    return build_base_model


def wrap_build_model(upstream: Callable) -> Callable:
    """A new model (no checkpoint) starts its learnable alphas at the configured alpha, not at
    ``param_init``'s uniform noise."""

    def build_model(model_opt, opt, vocabs, checkpoint, device_id):
        model = upstream(model_opt, opt, vocabs, checkpoint, device_id)
        if checkpoint is None:
            reset_learnable_alphas(model)
        return model

    return build_model
