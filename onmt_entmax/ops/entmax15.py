"""Exact 1.5-entmax (Peters, Niculae & Martins 2019, Algorithm 2).

    entmax15(z) = [z/2 - tau]_+^2,   sum_i [z_i/2 - tau]_+^2 = 1.

With x = z/2 sorted decreasingly and the running moments over the first k entries,
mean_k = S1/k and ss_k = S2/k - mean_k^2, the candidate threshold is
tau_k = mean_k - sqrt((1 - k ss_k) / k); the support size is the largest k with
tau_k <= x_(k), and tau = tau_k there.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function

from . import _dispatch
from ._common import on_last_dim, shift_by_max, sorted_candidates, support_backward


def _entmax15_tau(xs: Tensor) -> Tensor:
    """Exact threshold of rows x/2 already shifted so that max = 0 (keepdim)."""
    srt = sorted_candidates(xs)
    k = torch.arange(1, srt.shape[-1] + 1, device=xs.device, dtype=xs.dtype)
    mean = srt.cumsum(dim=-1) / k
    mean_sq = (srt * srt).cumsum(dim=-1) / k
    delta = (1 - k * (mean_sq - mean * mean)) / k
    tau = mean - delta.clamp(min=0).sqrt()
    support = (tau <= srt).sum(dim=-1, keepdim=True).clamp(min=1)
    return tau.gather(-1, support - 1)


def entmax15_threshold(x: Tensor) -> Tensor:
    """tau with entmax15(x) = [x/2 - tau]_+^2 along the last dim (keepdim); -inf for dead rows."""
    xs, m, dead = shift_by_max(x / 2)
    tau = _entmax15_tau(xs) + m
    return torch.where(dead, torch.full_like(tau, float("-inf")), tau)


def _entmax15_last(x: Tensor) -> Tensor:
    xs, _, dead = shift_by_max(x / 2)
    p = (xs - _entmax15_tau(xs)).clamp(min=0) ** 2
    return torch.where(dead, torch.zeros_like(p), p)


class Entmax15Function(Function):
    """1.5-entmax over the last dim; backward by Proposition 1 with u = sqrt(p)."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        p = _entmax15_last(x)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors
        return support_backward(p, g, p.sqrt())


def entmax15(z: Tensor, dim: int = -1) -> Tensor:
    """Exact 1.5-entmax along `dim`: [z/2 - tau]_+^2 with tau such that the result sums to 1.

    -inf entries get exactly 0; a row that is entirely -inf gives all zeros (zero gradient);
    a NaN makes its own row NaN. float16/bfloat16 are computed in float32.
    """
    fast = _dispatch.kernel("entmax15", z, dim)
    if fast is not None:
        return fast(z, dim)
    return on_last_dim(Entmax15Function.apply, z, dim)
