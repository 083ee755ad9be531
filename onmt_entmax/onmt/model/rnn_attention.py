"""RNN global attention with any registered normalizer.

Upstream ``GlobalAttention.forward`` calls ``F.softmax`` when ``attn_func == "softmax"`` and the
module-level ``sparsemax`` otherwise. We set ``attn_func`` to our function's name, and while a
module with an ``entmax_normalizer`` runs, that module-level name resolves to its normalizer.
Masked source positions arrive as -inf and get weight exactly 0.
"""
from __future__ import annotations

import contextvars
from typing import Callable

_ACTIVE = contextvars.ContextVar("onmt_entmax_global_attention", default=None)


def make_dispatch(upstream_sparsemax: Callable) -> Callable:
    """Replacement for ``onmt.modules.global_attention.sparsemax``."""

    def sparsemax(input, dim=-1):  # noqa: A002 (upstream signature)
        normalizer = _ACTIVE.get()
        if normalizer is None:
            return upstream_sparsemax(input, dim)
        return normalizer(input.movedim(dim, -1)).movedim(-1, dim)

    return sparsemax


def wrap_forward(upstream: Callable) -> Callable:
    def forward(self, *args, **kwargs):
        normalizer = getattr(self, "entmax_normalizer", None)
        if normalizer is None:
            return upstream(self, *args, **kwargs)
        token = _ACTIVE.set(normalizer)
        try:
            return upstream(self, *args, **kwargs)
        finally:
            _ACTIVE.reset(token)

    return forward
