"""Sparse attention in one call: OpenNMT-py's SDPA branch, routed to our normalizer.

On CUDA, ``MultiHeadedAttention.forward`` computes softmax attention with one
``scaled_dot_product_attention`` call when ``self_attn_type == "scaled-dot-flash"``; a module with
a sparse normalizer is set to ``scaled-dot`` (``surgery.install_transformer_attention``) and would
take the eager branch instead: scaled matmul, mask fill, normalizer, cast, dropout, matmul, each
an autograd node in training. That host work is what made sparse models train and decode slower
(a small Transformer's steps are host-bound); ``AttentionNormalizer.attend`` is one fused kernel
without gradient and one autograd node with (``ops.sparse_attention``).

Two patches:
- ``wrap_forward``: for a module whose normalizer the fused op takes, run upstream with
  ``self_attn_type`` set to ``scaled-dot-flash`` for the call, so upstream takes its SDPA branch
  (on CUDA; on CPU it keeps its eager branch), with the call remembered in a context variable.
  Not when upstream would use flash-attn (``flash2``: softmax kernels), a cached key-padding mask
  (the SDPA branch ignores it), or relative positions (the branch is not taken anyway). With
  gradients (training) a call over at most ``SHORT_ROW_KEYS`` keys returns the attention weights before
  dropout, as the eager branch does (upstream's SDPA branch returns None): the training reports count
  their nonzeros. Longer rows return none, as upstream's SDPA branch: weights are a Tq x Tk matrix a
  call, which would send it to the materialized path (O(T^2) memory) instead of the tiled kernels.
- ``make_sdpa``: the ``scaled_dot_product_attention`` name in ``onmt.modules.multi_headed_attn``
  calls ``AttentionNormalizer.attend`` for the remembered module and the stock function otherwise.
  ``attn_mask`` is SDPA's keep mask; upstream's ``is_causal`` comes with an explicit mask that
  already holds the future mask; upstream passes its ``dropout_p`` in evaluation too, applied here
  in training mode only, as the eager branch's ``nn.Dropout`` does.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Callable, Iterator, Optional

import torch

from onmt_entmax.modules import AttentionNormalizer
from onmt_entmax.ops.attention import KINDS, SHORT_ROW_KEYS


class _Call:
    """One sparse module's call: the module, its normalizer, and the weights its SDPA call computed
    (training)."""

    __slots__ = ("module", "norm", "weights")

    def __init__(self, module, norm: AttentionNormalizer):
        self.module, self.norm, self.weights = module, norm, None


_SPARSE_CALL: contextvars.ContextVar[Optional[_Call]] = contextvars.ContextVar("onmt_entmax_sparse_attention",
                                                                               default=None)


def fusable(module) -> Optional[AttentionNormalizer]:
    """The normalizer of an attention module whose call can go through the fused sparse path, else None."""
    # (a submodule, read from _modules: nn.Module's __getattr__ searches three dicts after a miss, at every call)
    norm = module._modules.get("softmax")
    ok = (isinstance(norm, AttentionNormalizer) and norm.transformation.name in KINDS
          and not getattr(module, "flash2", False)
          and getattr(module, "max_relative_positions", 0) in (0, -1)
          and module.layer_cache[1].get("key_pad_mask") is None)
    return norm if ok else None


@contextlib.contextmanager
def eager_branch() -> Iterator[None]:
    """Inside the block, sparse modules take upstream's eager branch (matmul, mask, normalizer,
    dropout, matmul), the path before the fused op: for checks and benchmarks against it. (It swaps
    this module's ``fusable``, which ``wrap_forward`` looks up at every call: no cost outside.)"""
    global fusable
    fused = fusable
    fusable = _never_fusable
    try:
        yield
    finally:
        fusable = fused


def _never_fusable(module) -> None:
    return None


def wrap_forward(upstream: Callable) -> Callable:
    def forward(self, *args, **kwargs):
        norm = fusable(self)
        if norm is None:
            return upstream(self, *args, **kwargs)
        call = _Call(self, norm)
        token = _SPARSE_CALL.set(call)
        # a plain string attribute: written to the instance dict directly (nn.Module.__setattr__
        # looks through parameters, buffers and submodules first, twice a call at every decoding step)
        attrs = self.__dict__
        saved = attrs["self_attn_type"]
        attrs["self_attn_type"] = "scaled-dot-flash"
        try:
            out, attn = upstream(self, *args, **kwargs)
        finally:
            attrs["self_attn_type"] = saved
            _SPARSE_CALL.reset(token)
        return out, attn if attn is not None else call.weights

    return forward


def make_sdpa(upstream: Callable) -> Callable:
    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        call = _SPARSE_CALL.get()
        if call is None:
            return upstream(query, key, value, attn_mask, dropout_p, is_causal=is_causal, **kwargs)
        if attn_mask is None and is_causal:
            tq, tk = query.shape[-2], key.shape[-2]
            attn_mask = torch.ones(tq, tk, dtype=torch.bool, device=query.device).tril(tk - tq)
        norm = call.norm
        drop = dropout_p if call.module.training else 0.0
        if not torch.is_grad_enabled() or key.shape[-2] > SHORT_ROW_KEYS:
            return norm.attend(query, key, value, attn_mask, drop)
        out, call.weights = norm.attend(query, key, value, attn_mask, drop, return_weights=True)
        return out

    return scaled_dot_product_attention
