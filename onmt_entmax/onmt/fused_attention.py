"""Sparse attention in one call while decoding: OpenNMT-py's SDPA branch, routed to our normalizer.

On CUDA, ``MultiHeadedAttention.forward`` computes softmax attention with one
``scaled_dot_product_attention`` call when ``self_attn_type == "scaled-dot-flash"``; a module with
a sparse normalizer is set to ``scaled-dot`` (``model.install_transformer_attention``) and takes
the eager branch instead: scaled matmul, mask fill, normalizer, cast, matmul, five calls of host
work per layer and step, which is what made sparse models decode slower (decoding is host-bound).

Two patches, used only in eval mode without gradients (decoding, validation):
- ``wrap_forward``: for a module whose normalizer the fused op takes, run upstream with
  ``self_attn_type`` set to ``scaled-dot-flash`` for the call, so upstream takes its SDPA branch,
  with the module remembered in a context variable. Not when upstream would use flash-attn
  (``flash2``: softmax kernels), a cached key-padding mask (the SDPA branch ignores it), or
  relative positions (the branch is not taken anyway).
- ``make_sdpa``: the ``scaled_dot_product_attention`` name in ``onmt.modules.multi_headed_attn``
  calls ``AttentionNormalizer.attend`` for the remembered module (``attn_mask`` is SDPA's keep
  mask; upstream's ``is_causal`` comes with an explicit mask that already holds the future mask)
  and the stock function otherwise.
Training (grad enabled) keeps the eager branch and its autograd unchanged.
"""
from __future__ import annotations

import contextvars
from typing import Callable

import torch

from onmt_entmax.modules import AttentionNormalizer
from onmt_entmax.ops.attention import KINDS

_SPARSE_MODULE: contextvars.ContextVar = contextvars.ContextVar("onmt_entmax_sparse_attention", default=None)


def fusable(module) -> bool:
    """Whether this attention module's call can go through the fused sparse path now."""
    norm = getattr(module, "softmax", None)
    return (isinstance(norm, AttentionNormalizer) and norm.transformation.name in KINDS
            and not torch.is_grad_enabled() and not module.training and not getattr(module, "flash2", False)
            and getattr(module, "max_relative_positions", 0) in (0, -1)
            and module.layer_cache[1].get("key_pad_mask") is None)


def wrap_forward(upstream: Callable) -> Callable:
    def forward(self, *args, **kwargs):
        if not fusable(self):
            return upstream(self, *args, **kwargs)
        token = _SPARSE_MODULE.set(self)
        saved = self.self_attn_type
        self.self_attn_type = "scaled-dot-flash"
        try:
            return upstream(self, *args, **kwargs)
        finally:
            self.self_attn_type = saved
            _SPARSE_MODULE.reset(token)

    return forward


def make_sdpa(upstream: Callable) -> Callable:
    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        module = _SPARSE_MODULE.get()
        if module is None:
            return upstream(query, key, value, attn_mask, dropout_p, is_causal=is_causal, **kwargs)
        if attn_mask is None and is_causal:
            tq, tk = query.shape[-2], key.shape[-2]
            attn_mask = torch.ones(tq, tk, dtype=torch.bool, device=query.device).tril(tk - tq)
        return module.softmax.attend(query, key, value, attn_mask)

    return scaled_dot_product_attention
