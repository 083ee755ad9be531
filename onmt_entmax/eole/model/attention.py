"""Sparse attention in Eole's ``MultiHeadedAttention`` (every path) and RNN ``GlobalAttention``.

Eole's ``_compute_attention`` takes one of two branches, both by module-level names of
``eole.modules.multi_headed_attn``: the eager one normalizes the float32 scores with ``F.softmax``
(masked keys at ``finfo.min``), the fast one (CUDA, no attention weights asked, no relative / ALiBi
positions) calls ``_sdpa``, i.e. ``scaled_dot_product_attention``. While a module with our normalizer
(``<attention>.softmax``, an ``AttentionNormalizer``) runs ``_compute_attention``, both names resolve
to it: ``F.softmax`` to the normalizer over the same scores, ``_sdpa`` to ``AttentionNormalizer.attend``
(``ops.sparse_attention``: one fused kernel on CUDA, learned alphas included). Modules without one
(softmax attention) run upstream's code untouched. The third path, flash-attn's KV cache in decoder
self-attention, is switched off where that attention is sparse (``building.py``). RNN global
attention normalizes in ``_normalize_attention``, wrapped to use the module's normalizer.
"""
from __future__ import annotations

import contextvars
from typing import Callable

from onmt_entmax.registry import transformation_names

NORMALIZER = "softmax"  # the normalizer's attribute in a MultiHeadedAttention (as in OpenNMT-py)
RNN_NORMALIZER = "entmax_normalizer"  # in a GlobalAttention

_ACTIVE = contextvars.ContextVar("onmt_entmax_eole_attention", default=None)


def wrap_compute_attention(upstream: Callable) -> Callable:
    """``MultiHeadedAttention._compute_attention``: while it runs, its normalizer answers both branches."""

    def _compute_attention(self, key, value, query, attn_mask=None, return_attn=False):
        normalizer = self._modules.get(NORMALIZER)
        if normalizer is None:
            return upstream(self, key, value, query, attn_mask=attn_mask, return_attn=return_attn)
        token = _ACTIVE.set(normalizer)
        try:
            return upstream(self, key, value, query, attn_mask=attn_mask, return_attn=return_attn)
        finally:
            _ACTIVE.reset(token)

    return _compute_attention


def make_sdpa(upstream: Callable) -> Callable:
    """Eole's ``_sdpa(q, k, v, attn_mask, dropout_p, scale)``, (batch, length, heads, dim) layout and a
    boolean mask (True = attend): the running module's sparse normalizer in one call, else upstream."""

    def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, scale=None):
        normalizer = _ACTIVE.get()
        if normalizer is None:
            return upstream(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
        out = normalizer.attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), keep=attn_mask,
                                dropout_p=dropout_p, scale=scale)
        return out.transpose(1, 2)

    return _sdpa


class SparseFunctional:
    """``torch.nn.functional`` as ``eole.modules.multi_headed_attn`` sees it: ``softmax`` over the last
    dim is the running module's normalizer (float32, cast to the ``dtype`` asked for); every other name,
    and softmax outside a sparse module, is torch's."""

    def __init__(self, functional):
        self._functional = functional

    def __getattr__(self, name):
        return getattr(self._functional, name)

    def softmax(self, input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002 (torch's signature)
        normalizer = _ACTIVE.get()
        if normalizer is None or dim not in (-1, input.dim() - 1):
            return self._functional.softmax(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
        out = normalizer(input)
        return out if dtype is None else out.to(dtype)


def install_functional() -> None:
    """Point ``eole.modules.multi_headed_attn.F`` at ``SparseFunctional`` (idempotent)."""
    from eole.modules import multi_headed_attn

    if not isinstance(multi_headed_attn.F, SparseFunctional):
        multi_headed_attn.F = SparseFunctional(multi_headed_attn.F)


# --- RNN global attention ---------------------------------------------------------------------------
def wrap_validate_params(upstream: Callable) -> Callable:
    """``GlobalAttention._validate_params`` accepts every registered attention normalizer (upstream:
    softmax / sparsemax); ours is installed once the model is built."""

    def _validate_params(self, attn_type, attn_func):
        ours = attn_func in transformation_names(for_attention=True)
        return upstream(self, attn_type, "softmax" if ours else attn_func)

    return _validate_params


def wrap_normalize_attention(upstream: Callable) -> Callable:
    """``GlobalAttention._normalize_attention``: the module's normalizer over (batch * tgt, src) scores,
    masked with -inf, which get weight exactly 0."""

    def _normalize_attention(self, align, batch, target_l, src_l):
        normalizer = self._modules.get(RNN_NORMALIZER)
        if normalizer is None:
            return upstream(self, align, batch, target_l, src_l)
        return normalizer(align.view(batch * target_l, src_l)).view(batch, target_l, src_l)

    return _normalize_attention
