"""Sparsemax: the Euclidean projection onto the probability simplex (alpha-entmax with alpha = 2).

    sparsemax(z) = argmin_{p in simplex} ||p - z||^2 = [z - tau]_+,   sum_i [z_i - tau]_+ = 1.

tau is found exactly (Michelot 1986; Martins & Astudillo 2016): with the candidates sorted
decreasingly, the support size is k = max{j : 1 + j z_(j) > sum_{i<=j} z_(i)} and
tau = (sum_{i<=k} z_(i) - 1) / k. Only the entries within 1 of the row max can be in the support,
so only those are sorted.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _dispatch
from ._common import Solved, check_input, on_last_dim, on_support_only, support_function, top_candidates


def sparsemax_tau_sorted(srt: Tensor) -> Tensor:
    """Exact threshold from the sorted candidates of each row (keepdim)."""
    k = torch.arange(1, srt.shape[-1] + 1, device=srt.device, dtype=srt.dtype)
    csum = srt.cumsum(dim=-1)
    support = (1 + k * srt > csum).sum(dim=-1, keepdim=True).clamp(min=1)
    return (csum.gather(-1, support - 1) - 1) / support.to(srt.dtype)


def sparsemax_threshold(x: Tensor) -> Tensor:
    """tau with sparsemax(x) = [x - tau]_+ along the last dim (keepdim); +inf for all -inf rows."""
    vals, m, dead = top_candidates(x, reach=1.0)
    return on_support_only(sparsemax_tau_sorted(vals - m) + m, dead)


def sparsemax_solve(x: Tensor) -> Solved:
    """Sparsemax of the rows of x with its candidate-restricted view (used by the loss).

    p is computed in the frame of the row max, [(x - max) - tau]_+: with x - tau_z instead, a
    large max (a -1e18 masked row, logits of 1e4) would swamp tau in float32.
    """
    vals, m, dead = top_candidates(x, reach=1.0)
    zc = vals - m
    tau = on_support_only(sparsemax_tau_sorted(zc), dead)
    return Solved((x - m).sub_(tau).clamp_(min=0), (zc - tau).clamp(min=0), zc, tau + m, m, dead)


def _sparsemax_last(x: Tensor) -> Tensor:
    return sparsemax_solve(x).p


def _on_support(p: Tensor) -> Tensor:
    return (p > 0).to(p.dtype)


SparsemaxFunction = support_function("SparsemaxFunction", _sparsemax_last, _on_support)


def sparsemax(z: Tensor, dim: int = -1) -> Tensor:
    """Sparsemax along `dim`: [z - tau]_+ with tau such that the result sums to 1.

    -inf entries get exactly 0; a row that is entirely -inf gives all zeros (zero gradient);
    a NaN makes its own row NaN. float16/bfloat16 are computed in float32.
    """
    check_input(z)
    fast = _dispatch.kernel("sparsemax", z, dim)
    if fast is not None:
        return fast(z, dim)
    return on_last_dim(SparsemaxFunction.apply, z, dim)
