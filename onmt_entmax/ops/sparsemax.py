"""Sparsemax: the Euclidean projection onto the probability simplex (alpha-entmax with alpha = 2).

    sparsemax(z) = argmin_{p in simplex} ||p - z||^2 = [z - tau]_+,   sum_i [z_i - tau]_+ = 1.

tau is found exactly (Michelot 1986; Martins & Astudillo 2016): with the candidates sorted
decreasingly, the support size is k = max{j : 1 + j z_(j) > sum_{i<=j} z_(i)} and
tau = (sum_{i<=k} z_(i) - 1) / k.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function

from . import _dispatch
from ._common import on_last_dim, shift_by_max, sorted_candidates, support_backward


def _sparsemax_tau(xs: Tensor) -> Tensor:
    """Exact threshold of rows already shifted so that max = 0 (keepdim)."""
    srt = sorted_candidates(xs)
    k = torch.arange(1, srt.shape[-1] + 1, device=xs.device, dtype=xs.dtype)
    csum = srt.cumsum(dim=-1)
    support = (1 + k * srt > csum).sum(dim=-1, keepdim=True).clamp(min=1)
    return (csum.gather(-1, support - 1) - 1) / support.to(xs.dtype)


def sparsemax_threshold(x: Tensor) -> Tensor:
    """tau with sparsemax(x) = [x - tau]_+ along the last dim (keepdim); -inf for dead rows."""
    xs, m, dead = shift_by_max(x)
    tau = _sparsemax_tau(xs) + m
    return torch.where(dead, torch.full_like(tau, float("-inf")), tau)


def _sparsemax_last(x: Tensor) -> Tensor:
    xs, _, dead = shift_by_max(x)
    p = (xs - _sparsemax_tau(xs)).clamp(min=0)
    return torch.where(dead, torch.zeros_like(p), p)


class SparsemaxFunction(Function):
    """Sparsemax over the last dim; backward: dz = s*g - (s.g / |S|) s with s = 1[p > 0]."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        p = _sparsemax_last(x)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors
        return support_backward(p, g, (p > 0).to(g.dtype))


def sparsemax(z: Tensor, dim: int = -1) -> Tensor:
    """Sparsemax along `dim`: [z - tau]_+ with tau such that the result sums to 1.

    -inf entries get exactly 0; a row that is entirely -inf gives all zeros (zero gradient);
    a NaN makes its own row NaN. float16/bfloat16 are computed in float32.
    """
    fast = _dispatch.kernel("sparsemax", z, dim)
    if fast is not None:
        return fast(z, dim)
    return on_last_dim(SparsemaxFunction.apply, z, dim)
