"""alpha = clamp(1 + sigmoid(a), lo, hi) and its gradient, one launch each (`ops.bounded_alpha`)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from ._config import next_pow2
from ._launch import launch


@triton.jit
def bounded(a, lo, hi):
    """(alpha, d alpha / d a) = (clamp(1 + s, lo, hi), s (1 - s) [lo <= 1 + s <= hi]), s = sigmoid(a)."""
    s = tl.sigmoid(a.to(tl.float32))
    inside = (1.0 + s >= lo) & (1.0 + s <= hi)
    return tl.minimum(tl.maximum(1.0 + s, lo), hi), tl.where(inside, s * (1.0 - s), 0.0)


@triton.jit
def _alpha_kernel(A, G, OUT, n, lo, hi, BLOCK: tl.constexpr, GRAD: tl.constexpr):
    """OUT = alpha or (GRAD) G d alpha / d a, alpha = clamp(1 + sigmoid(a), lo, hi) (`bounded`)."""
    i = tl.arange(0, BLOCK)
    m = i < n
    alpha, chain = bounded(tl.load(A + i, mask=m, other=0.0), lo, hi)
    if GRAD:
        g = tl.load(G + i, mask=m, other=0.0).to(tl.float32)
        tl.store(OUT + i, (g * chain).to(OUT.dtype.element_ty), mask=m)
    else:
        tl.store(OUT + i, alpha, mask=m)


def _run(a: torch.Tensor, g, out: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    launch(_alpha_kernel, (1,), (a, g if g is not None else a, out, a.numel(), lo, hi),
           {"BLOCK": next_pow2(max(a.numel(), 16)), "GRAD": g is not None}, 1, True)
    return out


class BoundedAlpha(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = lo, hi
        return _run(a, None, torch.empty(a.shape, device=a.device, dtype=torch.float32), lo, hi)

    @staticmethod
    @once_differentiable
    def backward(ctx, g: torch.Tensor):
        (a,) = ctx.saved_tensors
        return _run(a, g.contiguous(), torch.empty_like(a), ctx.lo, ctx.hi), None, None


def bounded_alpha(a: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    if torch.is_grad_enabled() and a.requires_grad:
        return BoundedAlpha.apply(a, lo, hi)
    return _run(a, None, torch.empty(a.shape, device=a.device, dtype=torch.float32), lo, hi)


MAX_ELEMENTS = 4096  # one program holds them all (alphas: one per head)


def supports(a: torch.Tensor) -> bool:
    return a.is_contiguous() and 0 < a.numel() <= MAX_ELEMENTS
