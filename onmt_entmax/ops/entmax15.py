"""Exact 1.5-entmax (Peters, Niculae & Martins 2019, Algorithm 2).

    entmax15(z) = [z/2 - tau]_+^2,   sum_i [z_i/2 - tau]_+^2 = 1.

With x = z/2 sorted decreasingly and the running moments over the first k entries,
mean_k = S1/k and ss_k = S2/k - mean_k^2, the candidate threshold is
tau_k = mean_k - sqrt((1 - k ss_k) / k); the support size is the largest k with
tau_k <= x_(k), and tau = tau_k there. Only the entries with z within 2 of the row max can be
in the support, so only those are sorted.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _dispatch
from ._common import Solved, check_input, on_last_dim, on_support_only, support_function, top_candidates


def entmax15_tau_sorted(srt: Tensor) -> Tensor:
    """Exact threshold from the sorted candidates x = z/2 of each row (keepdim)."""
    k = torch.arange(1, srt.shape[-1] + 1, device=srt.device, dtype=srt.dtype)
    mean = srt.cumsum(dim=-1) / k
    mean_sq = (srt * srt).cumsum(dim=-1) / k
    delta = (1 - k * (mean_sq - mean * mean)) / k
    tau = mean - delta.clamp(min=0).sqrt()
    support = (tau <= srt).sum(dim=-1, keepdim=True).clamp(min=1)
    return tau.gather(-1, support - 1)


def entmax15_threshold(x: Tensor) -> Tensor:
    """tau with entmax15(x) = [x/2 - tau]_+^2 along the last dim (keepdim); +inf for all -inf rows."""
    vals, m, dead = top_candidates(x, reach=2.0)
    return on_support_only(entmax15_tau_sorted((vals - m) / 2) + m / 2, dead)


def entmax15_solve(x: Tensor) -> Solved:
    """1.5-entmax of the rows of x with its candidate-restricted view (used by the loss).

    p = ((x - max)/2 - tau)^2 is computed in the frame of the row max (see sparsemax_solve).
    """
    vals, m, dead = top_candidates(x, reach=2.0)
    zc = vals - m
    tau = on_support_only(entmax15_tau_sorted(zc / 2), dead)
    p = (x - m).sub_(2 * tau).clamp_(min=0).square_().mul_(0.25)
    return Solved(p, (zc / 2 - tau).clamp(min=0).square(), zc, tau + m / 2, m, dead)


def _entmax15_last(x: Tensor) -> Tensor:
    return entmax15_solve(x).p


Entmax15Function = support_function("Entmax15Function", _entmax15_last, torch.sqrt)


def entmax15(z: Tensor, dim: int = -1) -> Tensor:
    """Exact 1.5-entmax along `dim`: [z/2 - tau]_+^2 with tau such that the result sums to 1.

    -inf entries get exactly 0; a row that is entirely -inf gives all zeros (zero gradient);
    a NaN makes its own row NaN. float16/bfloat16 are computed in float32.
    """
    check_input(z)
    fast = _dispatch.kernel("entmax15", z, dim)
    if fast is not None:
        return fast(z, dim)
    return on_last_dim(Entmax15Function.apply, z, dim)
