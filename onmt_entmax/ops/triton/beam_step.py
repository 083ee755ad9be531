"""Beam-step statistics for the exactness certificate, one or two launches a step:

    n_r = |{j : s_rj > -inf}|,   b_r = max_{j not in kept_r} s_rj

over each row r of a (R, N) block of candidate scores (N = beam x vocabulary) and the K positions
its top-k kept. The torch reference (`ops.beam_stats`) is a comparison, a sum, a copy, a scatter
and a max: five launches at every beam step of a sparse model; here one, or two for rows longer
than 4096 (chunks of a row in programs of their own, then the chunks' reduction). A NaN score
counts as not finite and makes b_r NaN (as torch's max), unless kept.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._config import cdiv, next_pow2
from ._launch import launch

_BLOCK = 1024
_MAX_CHUNKS = 256  # programs a row at most (a decoding step has few rows: 64 sentences x beam x vocabulary)


@triton.jit
def _max_nan(x):
    """max of a vector, NaN if any entry is NaN (the hardware max drops NaN)."""
    return tl.where(tl.sum((x != x).to(tl.int32), 0) > 0, float("nan"), tl.max(x, 0))


# A row is split into chunks, one program each: one program a row left most of the GPU idle (64
# programs over 72k scores each took ~0.1 ms a step on an H200, on the path to the step's sync).
@triton.jit(do_not_specialize=["n_cols", "n_kept", "stride", "stride_k", "chunk", "n_chunks"])
def _stats_kernel(S, KEPT, COUNT, BEST, n_cols, n_kept, stride, stride_k, chunk, n_chunks, KP: tl.constexpr,
                  BLOCK: tl.constexpr, FINAL: tl.constexpr):
    """(finite count, best not kept) of chunk c of row r; FINAL (one chunk a row): of the row, else
    into the (R, n_chunks) partials `_reduce_kernel` combines."""
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    ks = tl.arange(0, KP)
    kept = tl.load(KEPT + r * stride_k + ks, mask=ks < n_kept, other=-1)
    count = tl.zeros([BLOCK], tl.int32)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    start = c * chunk
    for c0 in range(start, tl.minimum(start + chunk, n_cols), BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        inside = cols < n_cols
        s = tl.load(S + r * stride + cols, mask=inside, other=float("-inf")).to(tl.float32)
        count += (s > float("-inf")).to(tl.int32)
        is_kept = tl.max((cols[:, None] == kept[None, :]).to(tl.int32), 1) > 0
        best = tl.maximum(best, tl.where(is_kept, float("-inf"), s), propagate_nan=tl.PropagateNan.ALL)
    if FINAL:
        tl.store(COUNT + r, tl.sum(count, 0).to(tl.int64))
        tl.store(BEST + r, _max_nan(best))
    else:
        tl.store(COUNT + r * n_chunks + c, tl.sum(count, 0))
        tl.store(BEST + r * n_chunks + c, _max_nan(best))


@triton.jit(do_not_specialize=["n_chunks"])
def _reduce_kernel(PART_COUNT, PART_BEST, COUNT, BEST, n_chunks, CP: tl.constexpr):
    """n_r = sum of the chunks' counts, b_r = max of their bests (NaN if one is NaN)."""
    r = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, CP)
    inside = i < n_chunks
    tl.store(COUNT + r, tl.sum(tl.load(PART_COUNT + r * n_chunks + i, mask=inside, other=0), 0).to(tl.int64))
    tl.store(BEST + r, _max_nan(tl.load(PART_BEST + r * n_chunks + i, mask=inside, other=float("-inf"))))


def beam_stats(scores: torch.Tensor, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(n (R,) int64, b (R,) float32) of (R, N) scores and (R, K) kept positions (kernel path): one
    launch where a row is one chunk, two for longer rows (chunk partials, then their reduction)."""
    R, N = scores.shape
    count = torch.empty(R, device=scores.device, dtype=torch.int64)
    best = torch.empty(R, device=scores.device, dtype=torch.float32)
    if not R:
        return count, best
    s = scores if scores.stride(-1) == 1 else scores.contiguous()
    k = kept if kept.stride(-1) == 1 else kept.contiguous()
    chunk = _BLOCK * max(4, cdiv(N, _BLOCK * _MAX_CHUNKS))
    n_chunks = max(1, cdiv(N, chunk))
    final = n_chunks == 1
    part_count = count if final else torch.empty((R, n_chunks), device=s.device, dtype=torch.int32)
    part_best = best if final else torch.empty((R, n_chunks), device=s.device, dtype=torch.float32)
    launch(_stats_kernel, (R, n_chunks),
           (s, k, part_count, part_best, N, k.shape[1], s.stride(0), k.stride(0), chunk, n_chunks),
           {"KP": next_pow2(max(k.shape[1], 1)), "BLOCK": _BLOCK, "FINAL": final}, 4)
    if not final:
        launch(_reduce_kernel, (R,), (part_count, part_best, count, best, n_chunks),
               {"CP": next_pow2(n_chunks)}, 1)
    return count, best
