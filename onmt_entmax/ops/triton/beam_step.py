"""Beam-step statistics for the exactness certificate, one launch a step:

    n_r = |{j : s_rj > -inf}|,   b_r = max_{j not in kept_r} s_rj

over each row r of a (R, N) block of candidate scores (N = beam x vocabulary) and the K positions
its top-k kept. The torch reference (`ops.beam_stats`) is a comparison, a sum, a copy, a scatter
and a max: five launches at every beam step of a sparse model. A NaN score counts as not finite
and makes b_r NaN (as torch's max), unless kept.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._config import next_pow2
from ._launch import launch

_BLOCK = 1024


@triton.jit
def _max_nan(x):
    """max of a vector, NaN if any entry is NaN (the hardware max drops NaN)."""
    return tl.where(tl.sum((x != x).to(tl.int32), 0) > 0, float("nan"), tl.max(x, 0))


@triton.jit(do_not_specialize=["n_cols", "n_kept", "stride", "stride_k"])
def _stats_kernel(S, KEPT, COUNT, BEST, n_cols, n_kept, stride, stride_k, KP: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    ks = tl.arange(0, KP)
    kept = tl.load(KEPT + r * stride_k + ks, mask=ks < n_kept, other=-1)
    count = tl.zeros([BLOCK], tl.int32)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        inside = cols < n_cols
        s = tl.load(S + r * stride + cols, mask=inside, other=float("-inf")).to(tl.float32)
        count += (s > float("-inf")).to(tl.int32)
        is_kept = tl.max((cols[:, None] == kept[None, :]).to(tl.int32), 1) > 0
        best = tl.maximum(best, tl.where(is_kept, float("-inf"), s), propagate_nan=tl.PropagateNan.ALL)
    tl.store(COUNT + r, tl.sum(count, 0).to(tl.int64))
    tl.store(BEST + r, _max_nan(best))


def beam_stats(scores: torch.Tensor, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(n (R,) int64, b (R,) float32) of (R, N) scores and (R, K) kept positions (kernel path)."""
    R, N = scores.shape
    count = torch.empty(R, device=scores.device, dtype=torch.int64)
    best = torch.empty(R, device=scores.device, dtype=torch.float32)
    if R:
        s = scores if scores.stride(-1) == 1 else scores.contiguous()
        k = kept if kept.stride(-1) == 1 else kept.contiguous()
        launch(_stats_kernel, (R,), (s, k, count, best, N, k.shape[1], s.stride(0), k.stride(0)),
               {"KP": next_pow2(max(k.shape[1], 1)), "BLOCK": _BLOCK}, 4)
    return count, best
