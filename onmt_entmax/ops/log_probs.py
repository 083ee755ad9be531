"""Decoding scores of the normalized sparse mappings:

    log pi(z) along dim,  pi in {sparsemax, 1.5-entmax, alpha-entmax},  -inf exactly where pi(z) = 0.

Beam search adds these up at every step. The reference is the mapping followed by a log (and keeps
its gradient, d log p = dp / p on the support). Without gradient on CUDA the mapping kernel stores
log p itself: one launch a step instead of two, no intermediate p. Its zeros are those of p in
float32 (half-precision logits: a p that would round to 0 in float16 keeps its finite log).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import _dispatch
from ._common import Alpha, check_alpha, check_input
from .entmax import KINDS, mapping_of_kind


def log_probs(z: Tensor, kind: str, alpha: Alpha = 1.5, dim: int = -1, n_iter: Optional[int] = None) -> Tensor:
    """log pi(z) along ``dim`` for ``kind`` in sparsemax / entmax15 / entmax_bisect (``alpha``, a float
    or a tensor broadcastable to z with size 1 along dim, and ``n_iter`` for the last); -inf exactly
    where pi(z) = 0, NaN on a row holding a NaN; z's dtype."""
    if kind not in KINDS:
        raise ValueError(f"log_probs kind must be one of {', '.join(KINDS)}, got {kind!r}")
    check_input(z)
    if kind == "entmax_bisect":
        check_alpha(alpha, dtype=z.dtype)
    grad = torch.is_grad_enabled() and (z.requires_grad or (isinstance(alpha, Tensor) and alpha.requires_grad))
    if not grad:  # decoding, every step: the kernel looks at the call itself (None: one it does not take)
        out = _dispatch.try_kernel("log_probs", z, kind, alpha, dim)
        if out is not None:
            return out
    return torch.log(mapping_of_kind(z, kind, alpha, dim, n_iter))
