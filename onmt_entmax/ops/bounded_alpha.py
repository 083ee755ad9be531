"""Learned alpha in a range: alpha = clamp(1 + sigmoid(a), lo, hi) as one autograd node.

The parametrisation of "Adaptively Sparse Transformers" (Correia et al. 2019): whatever the
optimizer does to a, alpha stays in [lo, hi] (1 < lo), so the result is marked as checked
(`alpha_in_range`). Gradient: d alpha / d a = s (1 - s) with s = sigmoid(a), where lo <= 1 + s <= hi
(torch's clamp passes the gradient at the bounds), else 0. On CUDA one Triton kernel each way:
a training step asks for it once per attention layer, and the three-op torch chain costs three
launches and three autograd nodes each way.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _dispatch
from ._common import alpha_in_range, check_input


def bounded_alpha_reference(a: Tensor, lo: float, hi: float) -> Tensor:
    """The torch reference of `bounded_alpha` (three autograd nodes), float32."""
    return (1.0 + torch.sigmoid(a.float())).clamp(lo, hi)


def bounded_alpha(a: Tensor, lo: float = 1.01, hi: float = 2.0) -> Tensor:
    """clamp(1 + sigmoid(a), lo, hi), float32, differentiable in a; requires 1 <= lo <= hi."""
    check_input(a, "a")
    if not 1.0 <= lo <= hi:
        raise ValueError(f"bounded_alpha needs 1 <= lo <= hi, got lo={lo!r}, hi={hi!r}")
    fast = _dispatch.kernel("bounded_alpha", a)
    return alpha_in_range(fast(a, float(lo), float(hi)) if fast is not None else bounded_alpha_reference(a, lo, hi))
