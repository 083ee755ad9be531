"""What the exactness certificate reads from each beam step (Peters et al. 2019, Sec. 4.1):

    n_r = |{j : s_rj > -inf}|                 candidates of nonzero probability of sentence r,
    b_r = max_{j not in kept_r} s_rj          the best candidate the search did not keep,

for the (R, N) candidate scores of the alive sentences (N = beam x vocabulary, -inf where the
probability is 0) and the (R, K) positions the search kept. One kernel on CUDA (a step of a sparse
model's beam search would otherwise launch five); the torch code below is the reference.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _dispatch
from ._common import check_input


def beam_stats(scores: Tensor, kept: Tensor) -> tuple[Tensor, Tensor]:
    """(n (R,) int64, b (R,) float32): the finite candidates of each row of ``scores`` (R, N), and
    its best score outside the positions ``kept`` (R, K) (-inf if none; NaN if a score left out is
    NaN). No gradient."""
    check_input(scores, "scores")
    if not isinstance(kept, Tensor):
        raise TypeError(f"beam_stats: kept must be a torch.Tensor of positions, got {type(kept).__name__}")
    if scores.dim() != 2 or kept.dim() != 2 or kept.shape[0] != scores.shape[0]:
        raise ValueError(f"beam_stats: scores (R, N) and kept (R, K), got {tuple(scores.shape)} and "
                         f"{tuple(kept.shape)}")
    if kept.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"beam_stats: kept must hold integer positions, got dtype {kept.dtype}")
    scores = scores.detach()
    out = _dispatch.try_kernel("beam_stats", scores, kept)  # (every beam step)
    if out is not None:
        return out
    n = (scores > float("-inf")).sum(-1)  # (one comparison; isfinite is four operations)
    best = scores.scatter(-1, kept.long(), float("-inf")).amax(-1)
    return n, best.float()


def beam_topk(scores: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """A beam step's pick and its certificate statistics at once, for (R, N) candidate scores:

        values, positions = the k best scores of each row, best first (torch.topk(scores, k)),
        stats[:, 0] = n_r,  stats[:, 1] = b_r  (beam_stats with kept = positions), float64.

    On CUDA two launches, where torch.topk alone makes ~20 at N = 72k (beam 5 x 14k tokens), on the
    path to the step's sync (their GPU time: docs/kernels.md, `benchmarks/bench_kernels.py
    --beam-step`). Equal scores: the kernel keeps the lowest position first (torch.topk's order
    among ties is not specified); NaN ranks above +inf, as in torch.topk. No gradient."""
    check_input(scores, "scores")
    if scores.dim() != 2 or not isinstance(k, int) or not 0 < k <= scores.shape[-1]:
        raise ValueError(f"beam_topk: scores (R, N) and 0 < k <= N, got {tuple(scores.shape)} and k={k!r}")
    scores = scores.detach()
    out = _dispatch.try_kernel("beam_topk", scores, k)  # (every beam step)
    if out is not None:
        return out
    values, kept = torch.topk(scores, k, dim=-1)
    return values, kept, stats_rows(*beam_stats(scores, kept))


def stats_rows(n: Tensor, best: Tensor) -> Tensor:
    """(R, 2) float64 rows (n_r, b_r): the layout of `beam_topk`'s statistics, which the certificate
    tracker keeps per step."""
    return torch.stack([n.to(torch.float64), best.to(torch.float64)], -1)
