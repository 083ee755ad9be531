"""Beam-step statistics for the exactness certificate, one or two launches a step:

    n_r = |{j : s_rj > -inf}|,   b_r = max_{j not in kept_r} s_rj

over each row r of a (R, N) block of candidate scores (N = beam x vocabulary) and the K positions
its top-k kept. The torch reference (`ops.beam_stats`) is a comparison, a sum, a copy, a scatter
and a max: five launches at every beam step of a sparse model; here one, or two for rows longer
than 4096 (chunks of a row in programs of their own, then the chunks' reduction). A NaN score
counts as not finite and makes b_r NaN (as torch's max), unless kept.

`beam_topk` makes the step's top-k itself and the same two statistics with it (b_r is then the
(k+1)-th best score), in two launches where torch.topk alone makes ~20 at decoding shapes.
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


# A row is split into chunks, one program each: one program a row left most of the GPU idle, on the
# path to the step's sync (docs/kernels.md).
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


# --- top-k with the certificate's statistics ---------------------------------------------------
# A candidate is ranked by one int64: its score's float bits made monotone (NaN above +inf, as
# torch.topk ranks it) in the high half, and 2^32 - 1 - its column in the low half, so one max
# picks the best score and, among equal scores, the lowest column. Picking k + 1 candidates of each
# chunk by k + 1 such maxima keeps everything the row's top k + 1 can come from.
_TOPK_CHUNK = 4096
_TOPK_MAX_PARTS = 8192  # chunks x KP candidates the merge holds in registers
_LOW = tl.constexpr(4294967295)  # 2^32 - 1
_NONE = tl.constexpr(-9223372036854775808)  # below every rank: taken, or not loaded


@triton.jit
def _rank(s, cols):
    """The int64 rank of scores s (float32) at columns cols: order of s, then of -cols."""
    bits = s.to(tl.int32, bitcast=True)
    key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    key = tl.where(s != s, 0x7FFFFFFF, key)
    return (key.to(tl.int64) << 32) | (_LOW - cols.to(tl.int64))


@triton.jit
def _score_of(rank):
    """The float32 score a rank holds (NaN for a NaN)."""
    key = (rank >> 32).to(tl.int32)
    return tl.where(key < 0, key ^ 0x7FFFFFFF, key).to(tl.float32, bitcast=True)


@triton.jit(do_not_specialize=["n_cols", "stride", "n_chunks", "k1"])
def _topk_chunk_kernel(S, PART, n_cols, stride, n_chunks, k1, KP: tl.constexpr, CHUNK: tl.constexpr):
    """Chunk c of row r: its finite count and the ranks of its k1 best candidates, into
    PART[r, c] = (rank_0 .. rank_{k1-1}, unused .., count) of KP + 1 int64."""
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    s = tl.load(S + r * stride + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
    out = PART + (r * n_chunks + c) * (KP + 1)
    tl.store(out + KP, tl.sum((s > float("-inf")).to(tl.int32), 0).to(tl.int64))
    rank = _rank(s, cols)
    for i in range(0, k1):
        best = tl.max(rank, 0)
        tl.store(out + i, best)
        rank = tl.where(rank == best, _NONE, rank)


@triton.jit(do_not_specialize=["n_cols", "n_chunks", "k"])
def _topk_merge_kernel(PART, VALUES, INDICES, STATS, n_cols, n_chunks, k, KP: tl.constexpr, CP: tl.constexpr):
    """Row r: the k best of its chunks' candidates in descending order (values, columns), and
    STATS[r] = (finite count, the (k+1)-th best score: the best one not kept), float64."""
    r = tl.program_id(0).to(tl.int64)
    ci = tl.arange(0, CP)
    ki = tl.arange(0, KP)
    base = PART + r * n_chunks * (KP + 1)
    count = tl.sum(tl.load(base + ci * (KP + 1) + KP, mask=ci < n_chunks, other=0), 0)
    msk = (ci[:, None] < n_chunks) & (ki[None, :] <= k)
    rank = tl.load(base + ci[:, None] * (KP + 1) + ki[None, :], mask=msk, other=_NONE)
    rank = tl.reshape(rank, [CP * KP])
    for i in range(0, k):
        best = tl.max(rank, 0)
        tl.store(VALUES + r * k + i, _score_of(best).to(VALUES.dtype.element_ty))
        tl.store(INDICES + r * k + i, (best & _LOW) ^ _LOW)  # = _LOW - low half (Triton's interpreter: tensor first)
        rank = tl.where(rank == best, _NONE, rank)
    best = tl.max(rank, 0)
    left = tl.where(k < n_cols, _score_of(best), float("-inf"))
    tl.store(STATS + r * 2, count.to(tl.float64))
    tl.store(STATS + r * 2 + 1, left.to(tl.float64))


def beam_topk(scores: torch.Tensor, k: int):
    """(values (R, k) in scores' dtype, positions (R, k) int64, stats (R, 2) float64) of (R, N) scores:
    the k best of each row, best first (among equal scores the lowest position; NaN ranks above
    +inf, as in torch.topk), and (finite count, best score not kept); two launches (the chunks'
    k + 1 best and counts, then their merge). None where the merge would not fit (k > 31, or rows
    of more than ~2M scores at small k)."""
    R, N = scores.shape
    kp = next_pow2(k + 1)
    chunk = _TOPK_CHUNK
    while cdiv(N, chunk) * kp > _TOPK_MAX_PARTS and chunk < 65536:
        chunk *= 2
    n_chunks = cdiv(N, chunk)
    if kp > 32 or n_chunks * kp > _TOPK_MAX_PARTS or not 0 < k <= N:
        return None
    s = scores if scores.stride(-1) == 1 else scores.contiguous()
    values = torch.empty((R, k), device=s.device, dtype=s.dtype)
    indices = torch.empty((R, k), device=s.device, dtype=torch.int64)
    stats = torch.empty((R, 2), device=s.device, dtype=torch.float64)
    if R:
        part = torch.empty((R, n_chunks, kp + 1), device=s.device, dtype=torch.int64)
        launch(_topk_chunk_kernel, (R, n_chunks), (s, part, N, s.stride(0), n_chunks, k + 1),
               {"KP": kp, "CHUNK": chunk}, max(4, min(16, chunk // 1024)))
        cp = next_pow2(n_chunks)
        launch(_topk_merge_kernel, (R,), (part, values, indices, stats, N, n_chunks, k),
               {"KP": kp, "CP": cp}, 4 if cp * kp <= 2048 else 8)
    return values, indices, stats
