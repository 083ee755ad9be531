"""Wrappers of OpenNMT-py's model builders (see ``surgery.install``)."""
from __future__ import annotations

from typing import Callable

from onmt_entmax import ops

from .loading import loading_onto_gpu, opts_for_build
from .surgery import has_sparse_transformation, install, reset_learnable_alphas

_STOCK_GLOBAL_ATTENTION = "softmax"  # what we ask upstream to build before installing ours


def wrap_build_base_model(upstream: Callable) -> Callable:
    """Build with upstream, then install our generator and normalizers (before weights load).

    Loaded for a GPU (``load_test_model``), a sparse model also starts the kernels' host set-up in
    the background (``ops.prepare_kernels_in_background``).
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
        model = install(model, opt)
        if loading_onto_gpu() and has_sparse_transformation(model):
            # the kernels' host set-up overlaps the weights' loading; the translator's warm-up waits for it
            ops.prepare_kernels_in_background()
        return model

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
