"""Sparse attention at any length: tiled kernels that never hold a Tq x Tk matrix.

out = drop(pi(scale q k^T, masked)) v for pi in {sparsemax, 1.5-entmax, alpha-entmax}, masked keys
at -1e18 (OpenNMT-py's fill: weight exactly 0; a row with every key masked attends uniformly, as the
reference), keys after the query at -1e18 too with ``causal`` (top-left aligned, as
``scaled_dot_product_attention``'s is_causal).

Forward, one program per (batch, head, BM queries), streaming key tiles of BN keys (the raw scores
s = q k^T recomputed by `tl.dot` in each pass, on tensor cores: half inputs as they are, fp32 inputs as
three tf32 products, tf32x3, float32's accuracy; scale enters only x's row factor, one multiply an entry
less in every pass and the backward, and m, TMAX and the tile bounds are raw scores):

1. the row max m, the TOPK (4) largest entries at each key position mod BN (a subset of the row),
   and the tile maximum of the block, written to TMAX;
2. the threshold, with x = (alpha - 1) scale (s - m) (max x = 0, tau in [-1, 0)): a lower bound, the
   threshold of that subset (any subset's is one; `_start`), then Newton passes from below, each one
   sweep over the key tiles accumulating per row k, A = sum [x - tau]_+^beta,
   B = sum [x - tau]_+^(beta - 1) and min_S d (`_solver.stats_elems` / `newton_step`: the mappings'
   solver, certificate and closed forms, so sparsemax and 1.5-entmax get the exact support and
   threshold and alpha-entmax Newton to |A - 1| <= 1e-6, as the mapping kernels). The subset nearly
   always holds the whole support, and then its threshold is the row's: the first pass certifies it.
   Pass 1 alone proves it where each key position's smallest kept entry lies outside the support at
   the subset's threshold (an entry left out is at most that one; `_start`): such a row takes that
   threshold and no Newton pass (sparsemax and 1.5-entmax, where every row of the block is proved so).
   Sparsemax and 1.5-entmax passes also sum the tile products sum d^2 v, sum d v, sum v (d = x - tau
   on the pass's support S): a row certified in a pass keeps S, so its f = [d - step]^beta expands in
   them and out, W and sum f come from that pass (`_fused_rows`), with no sweep of their own;
3. for the rows not written so (every alpha-entmax row; a sparsemax / 1.5-entmax row proved by pass 1,
   whose expansion would round worse than the direct sums, or that ran out of passes), one more sweep:
   f = [x - tau]_+^beta (exp(x) on softmax rows, alpha = 1), out = sum f v / sum f, and
   W = sum u v / sum u with u = f^(2 - alpha) on the support (dropout: f and u times m / (1 - r), the
   Philox draw of `attention.dropout_keep` at the entry's offset in (B, H, Tq, Tk)).
A key tile none of whose entries can be in the block's supports is skipped in passes 2-3 and in the
backward (block sparsity): its maximum from pass 1 at or below the block's bound `_low`, the least
m + tau / ((alpha - 1) scale) of its rows less a rounding margin, one compare a tile. Skipping is exact (such
a tile adds only zeros), so a block that needs at least 3 in 4 of its tiles sweeps them all in a
loop without the test, which Triton software-pipelines (loads of the next tiles in flight during
the products; `_dense`); the others test each tile. Causal without a keep mask, no kernel visits a
tile after a block's last query. Only tiles past Tk's end or across the causal diagonal (or any
tile, with a keep mask) are masked. The kernels are specialised on the q, k, v and out strides: where
they are multiples of 16 elements, the tiles load 16 bytes a thread.

Kept per row for the backward (as flash attention keeps the log-sum-exp): m, tau and sum f
(ST, 3 float32), W (Dv float32, the analogue of rowsum(dO o O)); TMAX, one float a (query block,
key tile), and LOW, the bound of each query block at its final thresholds. p_j = f_j / sum f is
recomputed tile by tile from s, m, tau. The backward may take key tiles twice the forward's (half
inputs from 513 keys: the forward's solve is cheaper on 32-key tiles, the fused backward's atomic dq
adds fewer on 64-key ones): its TMAX is then the maximum of each pair, still a bound of the tile.

Backward, with G = dL/d out, g_j = G . v_j (times the dropout mask / (1 - r)), u = p^(2 - alpha):
    ds_j = scale u_j (g_j - c),   c = sum u g / sum u = G . W,
0 at masked keys (Peters et al. 2019), u from the unnormalised weights and a per-row factor, which
scale joins: ds_j = f_j^(2 - alpha) (kr g_j - kr c), kr = scale (sum f)^(alpha - 2), one product an entry
and a fused multiply-add (`_probs_grads`). Half
inputs without an alpha-gradient: one kernel per (batch, head, BN keys) makes all three over the query
blocks that reach its tile: dk = ds^T q, dv = (p m / (1 - r))^T G, and dq = ds k added atomically
(float32) into a (B H, Tq, D) buffer, FlashAttention-2's backward (5 tile products a tile pair), after
a small kernel writes c. Otherwise (an alpha-gradient, or float32 inputs) a kernel per (batch, head,
BM queries) writes c and dq and accumulates the alpha-gradient of each row (`mapping.alpha_grad` from
sum g p, sum p log p, sum g p log p, added atomically to its head's entry, through the
clamp(1 + sigmoid(a)) of a learned alpha: `attention.alpha_rows`), and the key-tile kernel makes dk
and dv (7 tile products).
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from .._common import KERNEL_ALPHA_MIN, KINDS
from . import _solver as S
from ._config import cdiv, next_pow2
from ._launch import launch
from .attention import alpha_flags, alpha_rows, broadcast4, dropout_keep, head_alpha, keep_at
from .attention_tiles import load_tile, store_tile
from .keep_tiles import KeepTiles, block_index, tile_class
from .mapping import MODES, alpha_grad

MAX_HEAD_DIM = 256
MAX_GRID_Y = 65535  # batch x heads: the second dim of the launch grids (CUDA's limit)
TILE: tuple[int, int, int] | None = None  # (BM, BN, warps) for every call (benchmark sweeps)
BWD_KEYS: int | None = None  # the backward's key tile, BN or 2 BN (None: by `_tiles`; TILE set: BN; sweeps)
SKIP = True  # skip key tiles without support (block sparsity); False: every tile (benchmark sweeps)
STAGES: int | None = None  # software-pipelining stages (None: Triton's default; benchmark sweeps)
BWD_STAGES: int | None = None  # the backward kernels' pipelining stages (None: by `_stages`; benchmark sweeps)
REGS: int | None = None  # the forward kernel's register cap a thread (None: Triton's; benchmark sweeps)
BWD_REGS: int | None = None  # the backward kernels' (None: Triton's; benchmark sweeps)
ITERS: torch.Tensor | None = None  # int32 (B H, query blocks): Newton passes of each block, written if set
# without an alpha-gradient, dq, dk, dv in one kernel, dq by atomic adds: True, False (two kernels), or None: one
# for half inputs, two for float32 (whose tf32x3 atomics-path ran slower than the two kernels: docs/kernels.md)
FUSED_BWD: bool | None = None
TOPK: int | None = None  # entries kept a key position for the threshold's start, 1, 2 or 4 (None: by `_topk`)
ALPHA_MARGIN = False  # alpha-entmax's Newton passes start at the subset's threshold less the margin too (sweeps)
HALLEY = True  # alpha-entmax's passes take Halley's step where alpha <= 1.5 (`_solver.newton_step`); False: Newton's
# sparsemax, 1.5-entmax: rows pass 1 does not prove solved by a second launch in compact blocks (`_fwd_rows_kernel`)
# rather than by their block's Newton passes (benchmark sweeps: faster on randn inputs, slower in training)
ROWWISE = False
ROWS_TILE: tuple[int, int, int] | None = None  # the listed-rows kernel's (BM, BN, warps) (None: the forward's; sweeps)

BWD_WARPS: int | None = None  # the backward kernels' warps (None: the forward's, from `_tiles`; benchmark sweeps)
# ints the kernels are not specialised on (a new length or batch compiles nothing). The head dims and the q, k, v,
# out strides are: Triton then knows a tile's rows 16-byte aligned where they are, and loads them 16 bytes at a time
# into the pipelined copies (unspecialised, every entry was its own 2-byte load)
_INTS = ["Tq", "H", "Tk", "sm_b", "sm_h", "sm_q", "sm_k", "kb_b", "kb_h", "cq", "n_kc", "sa_h", "n_qb", "n_kt",
         "seed"]


@triton.jit
def _scores(q, k, KEEP, kc, n_kc, b, h, t, keys, Tq, Tk, sm_b, sm_h, sm_q, sm_k, j0, q0,
            BN: tl.constexpr, HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr, PREC: tl.constexpr, R: tl.constexpr):
    """(s [BM, BN] = q k^T (raw: scale is in x's factor, `_head`), -1e18 at masked keys, -inf at keys past
    Tk; with a keep mask, which entries are attended keys (for ds), else 0). Rows past Tq are not masked
    (q is 0 there: s = 0; the kernels never store them and count them out of every test). Without a keep
    mask only a tile past Tk's end or crossing the causal diagonal is masked (a uniform branch): the others
    are s.
    HAS_KEEP 2: the mask's tile classes (`keep_tiles`, kc the block's, tiles of R forward tiles) say
    whether the tile is read entry by entry (MIXED), masked whole (EMPTY) or not at all (FULL); HAS_KEEP 1
    reads every tile's entries. Where a tile is not read, `allowed` is only the keys < Tk: ds needs the
    mask only in a row that keeps no key (the others have u = 0 at masked keys), whose block is all MIXED."""
    s = tl.dot(q, tl.trans(k), input_precision=PREC)
    if HAS_KEEP:
        if HAS_KEEP == 2:
            cls = tile_class(kc, j0 // BN, n_kc, R)
        else:
            cls = 2
        if cls == 2:
            inside = (t < Tq)[:, None] & (keys < Tk)[None, :]
            allowed = inside & keep_at(KEEP, b, h, t[:, None], keys[None, :], inside, sm_b, sm_h, sm_q, sm_k)
            if CAUSAL:
                allowed = allowed & (keys[None, :] <= t[:, None])
            s = tl.where(allowed, s, -1e18)
            s = tl.where((keys < Tk)[None, :], s, float("-inf"))
        else:
            allowed = (keys < Tk)[None, :] & (t >= 0)[:, None]
            if cls == 0:
                s = tl.where(allowed, -1e18, float("-inf"))
            else:
                s = _edges(s, t, keys, Tk, j0, q0, BN, CAUSAL)
    else:
        allowed = 0
        s = _edges(s, t, keys, Tk, j0, q0, BN, CAUSAL)
    return s, allowed


@triton.jit
def _edges(s, t, keys, Tk, j0, q0, BN: tl.constexpr, CAUSAL: tl.constexpr):
    """s with keys past Tk at -inf and (causal) keys after the query at -1e18, tested only in a tile past Tk's
    end or crossing the diagonal (a uniform branch)."""
    edge = j0 + BN > Tk
    if CAUSAL:
        edge = edge | (j0 + BN > q0 + 1)
    if edge:
        if CAUSAL:
            s = tl.where(keys[None, :] <= t[:, None], s, -1e18)
        s = tl.where((keys < Tk)[None, :], s, float("-inf"))
    return s


@triton.jit
def _key_end(Tk, q0, BM: tl.constexpr, CAUSAL: tl.constexpr, HAS_KEEP: tl.constexpr):
    """The end of the keys a block of queries from q0 visits: Tk, or, causal without a keep mask, its
    last query + 1 (each row then attends its first key; with a keep mask a row may have none, and a fully
    masked row attends every key uniformly, as the reference)."""
    end = Tk
    if CAUSAL:
        if not HAS_KEEP:
            end = tl.minimum(Tk, q0 + BM)
    return end


@triton.jit
def _reach(m, a1x, tau):
    """The least raw score a row's support can hold at threshold tau: m + tau / a1x (a1x = (alpha - 1)
    scale), less 4e-6 of |m| + |tau / a1x| (the float32 rounding of both sides, ~100 times over). An entry s
    at or below it has x = (s - m) a1x <= tau: f = 0."""
    reach = tau / a1x
    return m + reach - 4e-6 * (tl.abs(m) + tl.abs(reach))


@triton.jit
def _low(m, a1x, tau, live, soft):
    """The score a key tile's maximum TM must pass to hold support of a live row: min over the live rows
    of `_reach`; -inf with a live softmax row, +inf with none. A tile with TM at or below it has f = 0 at
    every entry of every live row: skipping it is exact."""
    bound = _reach(m, a1x, tau)
    return tl.min(tl.where(live, tl.where(soft, float("-inf"), bound), float("inf")), 0)


@triton.jit
def _dense(TM, stride, LOWS, low, lo, hi, SKIP: tl.constexpr):
    """Whether to sweep every tile i in lo..hi (of maxima TM[i stride]) in the pipelined loop rather than
    test each (a loop whose loads sit under a branch is not software-pipelined): without SKIP, or where at
    least 3 in 4 of them pass their bound, `low` or (LOWS) LOWS[i] (the tiles swept needlessly add exact
    zeros)."""
    if SKIP:
        n = 0
        for c in range(lo, hi, 128):
            i = c + tl.arange(0, 128)
            tm = tl.load(TM + i.to(tl.int64) * stride, mask=i < hi, other=float("-inf"))
            if LOWS is not None:
                n += tl.sum((tm > tl.load(LOWS + i, mask=i < hi, other=0.0)).to(tl.int32), 0)
            else:
                n += tl.sum((tm > low).to(tl.int32), 0)
        dense = 4 * n >= 3 * (hi - lo)
    else:
        dense = True
    return dense


@triton.jit
def _gap(s, m, a1x, tau):
    """d = x - tau, x = a1x (s - m), in one rounding (an fma: the kernels run without contraction,
    `_launch`); every sweep and the backward form d so, so they agree on the support."""
    return tl.fma(s - m[:, None], a1x[:, None], -tau[:, None])


@triton.jit
def _weights(s, m, a1x, tau, beta, soft, MODE: tl.constexpr):
    """(f = [x - tau]_+^beta, u = f^(2 - alpha) = [x - tau]_+^(beta - 1) on the support, log2 f (MODE 2;
    else u)), x = a1x (s - m) = (alpha - 1) scale (s - m) on raw scores s; exp(x) = exp(scale (s - m)) for f
    and u on softmax rows (MODE 2, alpha = 1, a1x = scale; computed only in a block that has one).
    Unnormalised: p = f / sum f."""
    d = tl.maximum(_gap(s, m, a1x, tau), 0.0)
    if MODE == 0:
        f = d
        u = (d > 0).to(tl.float32)
        lf = u
    elif MODE == 1:
        f = d * d
        u = d
        lf = u
    else:
        lg = S.log2_pos(d)
        u = tl.where(d > 0, tl.exp2((beta[:, None] - 1.0) * lg), 0.0)
        f = u * d
        lf = beta[:, None] * lg
        if tl.max(soft.to(tl.int32), 0) > 0:
            x = (s - m[:, None]) * a1x[:, None]
            e = tl.exp(x)
            f = tl.where(soft[:, None], e, f)
            u = tl.where(soft[:, None], e, u)
            lf = tl.where(soft[:, None], x * 1.4426950408889634, lf)
    return f, u, lf


@triton.jit
def _head(ALPHA, h, sa_h, t, tin, scale, BM: tl.constexpr, MODE: tl.constexpr, LOGIT: tl.constexpr,
          LO: tl.constexpr, HI: tl.constexpr):
    """(alpha - 1 [BM], d alpha / d ALPHA, softmax rows (alpha = 1), a1x = (alpha - 1) scale, the factor of
    x = a1x (r - m) on raw scores r = q k^T (scale alone on softmax rows), beta = 1 / (alpha - 1) (1 on
    softmax rows))."""
    a1, chain = alpha_rows(ALPHA, h * sa_h + 0 * t, tin, BM, MODE, LOGIT, LO, HI)
    if MODE == 2:
        soft = a1 <= 0
    else:
        soft = a1 != a1  # (all False)
    a1s = tl.where(soft, 1.0, a1)
    return a1, chain, soft, a1s * scale, 1.0 / a1s


@triton.jit
def _insert(m1, m2, m3, m4, s, TOPK: tl.constexpr):
    """The TOPK largest entries seen at each position (m1 >= m2 >= m3 >= m4) after s (one
    compare-exchange a level); m1 the running maximum, NaN-propagating."""
    n1 = S.max_nan(m1, s)
    if TOPK > 1:
        c = tl.minimum(m1, s)
        n2 = tl.maximum(m2, c)
        if TOPK > 2:
            c = tl.minimum(m2, c)
            n3 = tl.maximum(m3, c)
            c = tl.minimum(m3, c)
            n4 = tl.maximum(m4, c)
        else:
            n3, n4 = m3, m4
    else:
        n2, n3, n4 = m2, m3, m4
    return n1, n2, n3, n4


@triton.jit
def _start(m1, m2, m3, m4, m, a1x, beta, solve, tol, MODE: tl.constexpr, GROUP_ITER: tl.constexpr,
           TOPK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, START_MARGIN2: tl.constexpr):
    """(a lower bound of each row's threshold, t, the threshold of the subset T of its entries held in
    m1..m4 (the TOPK largest at each key position mod BN), and whether t is the row's own threshold).
    T's is solved from the bound of the position maxima m1 alone (`_solver.group_start`). Any subset's
    threshold is a lower bound (F_T <= F), and of a subset holding the whole support it is the row's.
    The Newton passes start at t less the solver's margin; alpha-entmax at t itself (less the margin too
    with START_MARGIN2, the sweep knob `ALPHA_MARGIN`): its Newton steps back from above, and where T holds
    the support its first pass meets the tolerance at t, which the margin would fail (A - 1 = beta B 1e-6
    there, and B >= A = 1 as every d <= 1). Certificate, from pass 1 alone: an entry left out of T at key
    position p is at most the smallest one kept there (m_TOPK[p]),
    so where each position's smallest kept entry is at or below the row's `_reach` at t (f = 0 there),
    nothing outside T is in the support and F = F_T at t: t is the row's threshold (T solved to the end:
    its solve stopped before GROUP_ITER passes). TOPK 1 never certifies (the row max is its own
    position's smallest kept), nor alpha-entmax: its rows of randn scores rarely fit the rule in a whole
    block, which the Newton passes need, and holding t and the flags through them spilled its forward
    (sm_90: 314 local loads against 215) and cost it 3-4%."""
    tau = S.group_start(m1, m, a1x, beta, solve, tol, MODE, GROUP_ITER)  # (alpha-entmax: without the margin)
    if MODE == 2 and START_MARGIN2 and TOPK == 1:  # (TOPK > 1: the margin is taken from T's threshold below)
        tau = tl.maximum(tau - S.START_MARGIN, -1.0)
    t2 = tau
    cert = solve & (tau != tau)  # (all False)
    if TOPK > 1:
        z = tl.reshape(tl.join(m1, m2), [BM, 2 * BN])
        if TOPK > 2:
            z = tl.reshape(tl.join(z, tl.reshape(tl.join(m3, m4), [BM, 2 * BN])), [BM, 4 * BN])
            last = m4
        else:
            last = m2
        x = (z - m[:, None]) * a1x[:, None]
        t2, _n, it, _p = S.solve_tile(x, beta, solve, tol, tau, MODE, GROUP_ITER)
        if MODE == 2 and not START_MARGIN2:
            tau = tl.maximum(t2, -1.0)
        else:
            tau = tl.maximum(t2 - S.START_MARGIN, -1.0)
            if MODE != 2:
                cert = solve & (tl.max(last, 1) <= _reach(m, a1x, t2)) & (it < GROUP_ITER)
    return tau, t2, cert


@triton.jit
def _fused_rows(tau_used, out_tau, newly, kk, aa, bb, acc0, acc1, acc2, MODE: tl.constexpr):
    """(which rows take their output from this pass's sums, out, W, sum f) for rows whose
    certificate held in this pass (newly). There the support stays the pass's S (min_S d >= step),
    so with the step s = tau - tau_used and d = x - tau_used on S:
        sparsemax:  f = d - s, u = 1:        sum f v = sum d v - s sum v,  sum f = A - s k
        1.5-entmax: f = (d - s)^2, u = d - s: sum f v = sum d^2 v - 2 s sum d v + s^2 sum v, ...
    from the tile products sum d^2 v (acc2), sum d v (acc1), sum v (acc0). Rows are taken where the
    expansion's terms are at most about twice the direct products' (their rounding at most twice
    theirs); the others go to the weighted-sum pass."""
    sh = out_tau - tau_used
    if MODE == 0:
        tot = aa - sh * kk
        su = kk
        ok = newly & (sh >= 0) & (3.0 * sh * kk <= aa)
        o = acc1 - sh[:, None] * acc0
        w = acc0
    else:
        tot = aa - 2.0 * sh * bb + sh * sh * kk
        su = bb - sh * kk
        ok = newly & (sh >= 0) & (6.0 * sh * bb <= aa) & (3.0 * sh * kk <= bb)
        o = acc2 - 2.0 * sh[:, None] * acc1 + (sh * sh)[:, None] * acc0
        w = acc1 - sh[:, None] * acc0
    ok = ok & (tot > 0) & (su > 0)
    tot = tl.where(ok, tot, 1.0)
    su = tl.where(ok, su, 1.0)
    return ok, o * (1.0 / tot)[:, None], w * (1.0 / su)[:, None], tot


@triton.jit
def _newton_tile(kk, aa, bb, mn, acc0, acc1, acc2, j, q, K, V, KEEP, kc, n_kc, b, h, bh, t, q0, dd, dv, m, a1x, tau,
                 beta, Tq, Tk, D, Dv, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, drop,
                 MODE: tl.constexpr, BN: tl.constexpr, HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr,
                 HAS_DROP: tl.constexpr, PREC: tl.constexpr, HALLEY: tl.constexpr):
    """A Newton pass over key tile j: the rows' k, A, B, min_S d added in, and (sparsemax, 1.5-entmax)
    the tile products sum d^2 v (acc2), sum d v (acc1), sum v (acc0) on the pass's support."""
    keys = j * BN + tl.arange(0, BN)
    k = load_tile(K, b, h, sk_b, sk_h, sk_t, keys, Tk, dd, D)
    s, _a = _scores(q, k, KEEP, kc, n_kc, b, h, t, keys, Tq, Tk, sm_b, sm_h, sm_q, sm_k, j * BN, q0, BN,
                    HAS_KEEP, CAUSAL, PREC, 1)
    kf, a, bt, mnt = S.support_terms(_gap(s, m, a1x, tau), beta, MODE, HALLEY)
    k_, a_, b_, mn_ = S.reduce_stats(kf, a, bt, mnt, MODE, HALLEY)
    kk += k_
    aa += a_
    bb += b_
    mn = tl.minimum(mn, mn_)
    if MODE != 2:
        v = load_tile(V, b, h, sv_b, sv_h, sv_t, keys, Tk, dv, Dv)
        if MODE == 0:
            w1 = a
        else:
            w1 = bt
        if HAS_DROP:
            kept = dropout_keep(seed, ((bh * Tq).to(tl.int64) + t[:, None]) * Tk + keys[None, :], drop)
            r = tl.where(kept, 1.0 / (1.0 - drop), 0.0)
            kf = kf * r
            w1 = w1 * r
            a = a * r
        acc0 += tl.dot(kf.to(v.dtype), v, input_precision=PREC)
        acc1 += tl.dot(w1.to(v.dtype), v, input_precision=PREC)
        if MODE == 1:
            acc2 += tl.dot(a.to(v.dtype), v, input_precision=PREC)
    return kk, aa, bb, mn, acc0, acc1, acc2


@triton.jit
def _sum_tile(acc, accw, tot_p, su, j, q, K, V, KEEP, kc, n_kc, b, h, bh, t, q0, dd, dv, m, a1x, tau, beta, soft, Tq,
              Tk, D, Dv, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, drop,
              MODE: tl.constexpr, BN: tl.constexpr, HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr,
              HAS_DROP: tl.constexpr, PREC: tl.constexpr):
    """The weighted-sum pass over key tile j: sum f v, sum u v, sum f, sum u added in."""
    keys = j * BN + tl.arange(0, BN)
    k = load_tile(K, b, h, sk_b, sk_h, sk_t, keys, Tk, dd, D)
    s, _a = _scores(q, k, KEEP, kc, n_kc, b, h, t, keys, Tq, Tk, sm_b, sm_h, sm_q, sm_k, j * BN, q0, BN,
                    HAS_KEEP, CAUSAL, PREC, 1)
    f, u, _lg = _weights(s, m, a1x, tau, beta, soft, MODE)
    tot_p += tl.sum(f, 1)
    su += tl.sum(u, 1)
    if HAS_DROP:
        kept = dropout_keep(seed, ((bh * Tq).to(tl.int64) + t[:, None]) * Tk + keys[None, :], drop)
        f = tl.where(kept, f * (1.0 / (1.0 - drop)), 0.0)
        u = tl.where(kept, u * (1.0 / (1.0 - drop)), 0.0)
    v = load_tile(V, b, h, sv_b, sv_h, sv_t, keys, Tk, dv, Dv)
    acc += tl.dot(f.to(v.dtype), v, input_precision=PREC)
    accw += tl.dot(u.to(v.dtype), v, input_precision=PREC)
    return acc, accw, tot_p, su


@triton.jit
def _query_block(Q, Tq, H, D, sq_b, sq_h, sq_t, BM: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr):
    """(qb, bh, b, h, q0, t, tin, dd, dv, q) of the program for (batch x head bh, query block qb): its rows t
    from q0, which of them lie in Tq, the head-dim ranges of q and v, and its q tile."""
    qb = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    q0 = qb * BM
    t = q0 + tl.arange(0, BM)
    dd = tl.arange(0, BD)
    return qb, bh, b, h, q0, t, t < Tq, dd, tl.arange(0, BDV), load_tile(Q, b, h, sq_b, sq_h, sq_t, t, Tq, dd, D)


@triton.jit
def _solve_rows(q, K, V, O, W, KEEP, kc, n_kc, tmax, b, h, bh, t, tin, q0, n_lo, f0, f1, n_hi, dd, dv, m, a1x, beta,
                soft, row_ok, tau, solve, later, Tq, Tk, D, Dv, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, so_b, so_h, so_t,
                sm_b, sm_h, sm_q, sm_k, seed, drop, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, BDV: tl.constexpr, HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr,
                HAS_DROP: tl.constexpr, PREC: tl.constexpr, SKIP: tl.constexpr, KEEP_RUN: tl.constexpr,
                HALLEY: tl.constexpr):
    """Steps 2-3 of the forward for a block of rows t (their q, m, and tau: the start where solve, the
    threshold elsewhere): Newton passes over key tiles n_lo..n_hi from tau for the rows that solve, out and W
    written for every row in Tq but those of `later` (another launch writes them); (tau, sum f, passes). Each
    sweep takes tiles f0..f1 in a loop that reads the mask as KEEP_RUN says (0: not at all, a run of FULL tiles),
    then (HAS_KEEP) the others of n_lo..n_hi by their tile classes (`_rest_tile`)."""
    FUSE: tl.constexpr = MODE != 2
    fused = tin == 0  # rows whose out and W are written (rows past Tq: nothing to write)
    tot = tl.full([BM], 1.0, tl.float32)
    lo = tl.full([BM], -1.0, tl.float32)
    hi = tl.zeros([BM], tl.float32)
    out_tau = tau
    out_norm = tl.full([BM], 1.0, tl.float32)
    done = tl.where(solve, 0, 1)
    it = 0
    go = tl.sum(1 - done, 0) > 0
    while go:
        kk = tl.zeros([BM], tl.float32)
        aa = tl.zeros([BM], tl.float32)
        bb = tl.zeros([BM], tl.float32)
        mn = tl.full([BM], float("inf"), tl.float32)
        acc0 = tl.zeros([BM, BDV], tl.float32)
        acc1 = tl.zeros([BM, BDV], tl.float32)
        acc2 = tl.zeros([BM, BDV], tl.float32)
        low = _low(m, a1x, tau, done == 0, soft == 1)
        if _dense(tmax, 1, None, low, f0, f1, SKIP):
            for j in range(f0, f1):
                kk, aa, bb, mn, acc0, acc1, acc2 = _newton_tile(kk, aa, bb, mn, acc0, acc1, acc2, j, q, K, V, KEEP, kc,
                                                                n_kc, b, h, bh, t, q0, dd, dv, m, a1x, tau, beta, Tq,
                                                                Tk, D, Dv, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, sm_b,
                                                                sm_h, sm_q, sm_k, seed, drop, MODE, BN, KEEP_RUN,
                                                                CAUSAL, HAS_DROP, PREC, HALLEY)
        else:
            for j in range(f0, f1):
                if tl.load(tmax + j) > low:
                    kk, aa, bb, mn, acc0, acc1, acc2 = _newton_tile(kk, aa, bb, mn, acc0, acc1, acc2, j, q, K, V, KEEP,
                                                                    kc, n_kc, b, h, bh, t, q0, dd, dv, m, a1x, tau,
                                                                    beta, Tq, Tk, D, Dv, sk_b, sk_h, sk_t, sv_b, sv_h,
                                                                    sv_t, sm_b, sm_h, sm_q, sm_k, seed, drop,
                                                                    MODE, BN, KEEP_RUN, CAUSAL, HAS_DROP, PREC, HALLEY)
        if HAS_KEEP:
            for i in range(0, f0 - n_lo + n_hi - f1):
                j = _rest_tile(i, n_lo, f0, f1)
                if tl.load(tmax + j) > low:
                    kk, aa, bb, mn, acc0, acc1, acc2 = _newton_tile(kk, aa, bb, mn, acc0, acc1, acc2, j, q, K, V, KEEP,
                                                                    kc, n_kc, b, h, bh, t, q0, dd, dv, m, a1x, tau,
                                                                    beta, Tq, Tk, D, Dv, sk_b, sk_h, sk_t, sv_b, sv_h,
                                                                    sv_t, sm_b, sm_h, sm_q, sm_k, seed, drop,
                                                                    MODE, BN, HAS_KEEP, CAUSAL, HAS_DROP, PREC, HALLEY)
        prev = tau
        live = done == 0
        tau, done, out_tau, out_norm, lo, hi = S.newton_step(tau, done, out_tau, out_norm, lo, hi, kk, aa, bb, mn,
                                                         beta, tol, MODE, HALLEY)
        if FUSE:
            ok, o, w, tot_n = _fused_rows(prev, out_tau, live & (done == 1), kk, aa, bb, acc0, acc1, acc2, MODE)
            rows = tl.where(ok, t, Tq)
            store_tile(O, o, b, h, so_b, so_h, so_t, rows, Tq, dv, Dv)
            store_tile(W, w, bh.to(tl.int64), 0, Tq * Dv, 0, Dv, rows, Tq, dv, Dv)
            tot = tl.where(ok, tot_n, tot)
            fused = fused | ok
        it += 1
        go = (tl.sum(1 - done, 0) > 0) & (it < MAX_ITER)
    tau = out_tau
    # 3. the rows not written yet (every row of alpha-entmax): out = sum f v / sum f, W = sum u v / sum u
    need = (fused == 0) & (later == 0)
    if tl.max(need.to(tl.int32), 0) > 0:
        acc = tl.zeros([BM, BDV], tl.float32)
        accw = tl.zeros([BM, BDV], tl.float32)
        tot_p = tl.zeros([BM], tl.float32)
        su = tl.zeros([BM], tl.float32)
        low = _low(m, a1x, tau, need & row_ok, soft)
        if _dense(tmax, 1, None, low, f0, f1, SKIP):
            for j in range(f0, f1):
                acc, accw, tot_p, su = _sum_tile(acc, accw, tot_p, su, j, q, K, V, KEEP, kc, n_kc, b, h, bh, t, q0, dd,
                                                 dv, m, a1x, tau, beta, soft, Tq, Tk, D, Dv, sk_b, sk_h, sk_t, sv_b,
                                                 sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, drop, MODE, BN,
                                                 KEEP_RUN, CAUSAL, HAS_DROP, PREC)
        else:
            for j in range(f0, f1):
                if tl.load(tmax + j) > low:
                    acc, accw, tot_p, su = _sum_tile(acc, accw, tot_p, su, j, q, K, V, KEEP, kc, n_kc, b, h, bh, t, q0,
                                                     dd, dv, m, a1x, tau, beta, soft, Tq, Tk, D, Dv, sk_b, sk_h, sk_t,
                                                     sv_b, sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, drop, MODE,
                                                     BN, KEEP_RUN, CAUSAL, HAS_DROP, PREC)
        if HAS_KEEP:
            for i in range(0, f0 - n_lo + n_hi - f1):
                j = _rest_tile(i, n_lo, f0, f1)
                if tl.load(tmax + j) > low:
                    acc, accw, tot_p, su = _sum_tile(acc, accw, tot_p, su, j, q, K, V, KEEP, kc, n_kc, b, h, bh, t, q0,
                                                     dd, dv, m, a1x, tau, beta, soft, Tq, Tk, D, Dv, sk_b, sk_h, sk_t,
                                                     sv_b, sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, drop, MODE,
                                                     BN, HAS_KEEP, CAUSAL, HAS_DROP, PREC)
        tot_p = tl.where(tot_p > 0, tot_p, 1.0)
        rows = tl.where(need, t, Tq)
        store_tile(O, acc * (1.0 / tot_p)[:, None], b, h, so_b, so_h, so_t, rows, Tq, dv, Dv)
        store_tile(W, accw * (1.0 / tl.where(su > 0, su, 1.0))[:, None], bh.to(tl.int64), 0, Tq * Dv, 0, Dv, rows,
                   Tq, dv, Dv)
        tot = tl.where(need, tot_p, tot)
    return tau, tot, it


@triton.jit
def _keep_range(KCLS, JR, b, h, qb, kb_b, kb_h, cq, n_kc, n_hi, R: tl.constexpr, HAS_KEEP: tl.constexpr):
    """(n_lo, f0, f1, n_hi, the base of the block's tile classes): the key tiles (of R forward tiles) a query block
    sweeps, n_lo..n_hi, and among them f0..f1, a run of FULL ones, swept without reading the mask; with the mask's
    classes (HAS_KEEP 2) those of `keep_tiles` (within 0..n_hi), else 0, 0, n_hi, n_hi (no mask: all "FULL")."""
    if HAS_KEEP == 2:
        blk = block_index(b, h, qb, kb_b, kb_h, cq)
        jr = JR + 4 * blk
        n_lo = tl.load(jr) // R
        f0 = tl.cdiv(tl.load(jr + 1), R)
        f1 = tl.maximum(tl.load(jr + 2) // R, f0)
        n_hi = tl.minimum(n_hi, tl.cdiv(tl.load(jr + 3), R))
        kc = KCLS + blk * n_kc
    else:
        n_lo = 0
        f0 = 0
        f1 = n_hi
        kc = KCLS
    return n_lo, f0, f1, n_hi, kc


@triton.jit
def _rest_tile(i, lo, f0, f1):
    """The i-th of the tiles lo..f0 and then f1..hi: those of a sweep outside its run of FULL tiles f0..f1."""
    return tl.where(i < f0 - lo, lo + i, f1 - f0 + lo + i)


@triton.jit
def _max_tile(m1, m2, m3, m4, tmax, j, q, K, KEEP, kc, n_kc, b, h, t, q0, dd, Tq, Tk, D, sk_b, sk_h, sk_t, sm_b, sm_h,
              sm_q, sm_k, BN: tl.constexpr, HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr, PREC: tl.constexpr,
              TOPK: tl.constexpr):
    """Pass 1 over key tile j: its entries into the TOPK largest at each key position, its maximum to TMAX."""
    keys = j * BN + tl.arange(0, BN)
    k = load_tile(K, b, h, sk_b, sk_h, sk_t, keys, Tk, dd, D)
    s, _a = _scores(q, k, KEEP, kc, n_kc, b, h, t, keys, Tq, Tk, sm_b, sm_h, sm_q, sm_k, j * BN, q0, BN,
                    HAS_KEEP, CAUSAL, PREC, 1)
    # the insert before the tile maximum: the other way round the old and new m1..m4 were live together, and the
    # sm_90 loop copied them (register moves a tile: docs/kernels.md, Registers and warps)
    m1, m2, m3, m4 = _insert(m1, m2, m3, m4, s, TOPK)
    tl.store(tmax + j, tl.max(tl.max(s, 1), 0))
    return m1, m2, m3, m4


@triton.jit(do_not_specialize=_INTS)
def _fwd_kernel(Q, K, V, O, W, ST, TMAX, LOWB, KEEP, KCLS, JR, QR, ALPHA, ITERS, CNT, LIST, Tq, H, Tk, D, Dv, sq_b,
                sq_h, sq_t, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, kb_b, kb_h,
                cq, n_kc, sa_h, n_qb, n_kt, seed, scale, drop, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr,
                GROUP_ITER: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
                HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr, HAS_DROP: tl.constexpr, PREC: tl.constexpr,
                LOGIT: tl.constexpr, LO: tl.constexpr, HI: tl.constexpr, SKIP: tl.constexpr, TOPK: tl.constexpr,
                START_MARGIN2: tl.constexpr, ROWWISE: tl.constexpr, R: tl.constexpr, HALLEY: tl.constexpr):
    qb, bh, b, h, q0, t, tin, dd, dv, q = _query_block(Q, Tq, H, D, sq_b, sq_h, sq_t, BM, BD, BDV)
    a1, _chain, soft, a1x, beta = _head(ALPHA, h, sa_h, t, tin, scale, BM, MODE, LOGIT, LO, HI)
    tmax = TMAX + (bh * n_qb + qb).to(tl.int64) * n_kt
    # 1. row max; the TOPK largest entries at each key position mod BN; the tiles' maxima (of the tiles any kernel
    # visits: `_key_end`)
    # (with the mask's tile classes, only the block's tiles that are not EMPTY, its run of FULL ones without reading
    # the mask: `keep_tiles`)
    n_hi = tl.cdiv(_key_end(Tk, q0, BM, CAUSAL, HAS_KEEP), BN)  # (causal: the key tiles up to the block's last query)
    n_lo, f0, f1, n_hi, kc = _keep_range(KCLS, JR, b, h, qb, kb_b, kb_h, cq, n_kc, n_hi, 1, HAS_KEEP)
    m1 = tl.full([BM, BN], float("-inf"), tl.float32)
    m2 = m1
    m3 = m1
    m4 = m1
    for j in range(f0, f1):
        m1, m2, m3, m4 = _max_tile(m1, m2, m3, m4, tmax, j, q, K, KEEP, kc, n_kc, b, h, t, q0, dd, Tq, Tk, D, sk_b,
                                   sk_h, sk_t, sm_b, sm_h, sm_q, sm_k, BN, 0, CAUSAL, PREC, TOPK)
    if HAS_KEEP:
        for i in range(0, f0 - n_lo + n_hi - f1):
            m1, m2, m3, m4 = _max_tile(m1, m2, m3, m4, tmax, _rest_tile(i, n_lo, f0, f1), q, K, KEEP, kc, n_kc, b, h,
                                       t, q0, dd, Tq, Tk, D, sk_b, sk_h, sk_t, sm_b, sm_h, sm_q, sm_k, BN,
                                       HAS_KEEP, CAUSAL, PREC, TOPK)
    m = tl.reduce(m1, 1, S.max_nan)
    row_ok = (m > float("-inf")) & tin
    m = tl.where(row_ok, m, 0.0)
    # 2. threshold: a subset's, where pass 1 certifies it as the row's (`_start`); else a lower bound from
    # it, then Newton from below, sparsemax and 1.5-entmax also summing the tile products that give out and
    # W where a pass certifies a row
    solve = row_ok & (soft == 0)
    tau, t_sub, cert = _start(m1, m2, m3, m4, m, a1x, beta, solve, tol, MODE, GROUP_ITER, TOPK, BM, BN, START_MARGIN2)
    tau = tl.where(solve, tau, -1.0)
    later = tin == 2  # (all False)
    if MODE != 2:
        if ROWWISE:
            # each proved row takes its subset's threshold; the others go on their (batch, head)'s list, whose
            # rows `_fwd_rows_kernel` solves in compact blocks (their start, a lower bound, kept in ST)
            later = solve & (cert == 0)
            n_later = tl.sum(later.to(tl.int32), 0)
            if n_later > 0:
                base = tl.atomic_add(CNT + bh, n_later)
                rank = tl.cumsum(later.to(tl.int32), 0) - 1
                tl.store(LIST + (bh * Tq).to(tl.int64) + base + rank, t, mask=later)
        else:
            # only where every row of the block has it: the Newton pass the others need writes every certified
            # row's output (`_fused_rows`), which the last sweep would then do again
            cert = cert & (tl.sum((solve & (cert == 0)).to(tl.int32), 0) == 0)
        tau = tl.where(cert, t_sub, tau)
        solve = solve & (cert == 0) & (later == 0)  # (certified rows: out and W from the last sweep)
    tau, tot, it = _solve_rows(q, K, V, O, W, KEEP, kc, n_kc, tmax, b, h, bh, t, tin, q0, n_lo, f0, f1, n_hi, dd, dv,
                               m, a1x, beta, soft, row_ok, tau, solve, later, Tq, Tk, D, Dv, sk_b, sk_h, sk_t, sv_b,
                               sv_h, sv_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, seed, drop, tol, MODE,
                               MAX_ITER, BM, BN, BDV, HAS_KEEP, CAUSAL, HAS_DROP, PREC, SKIP, 0, HALLEY)
    if ITERS is not None:
        tl.store(ITERS + bh * n_qb + qb, it)
    rows = ST + (bh * Tq).to(tl.int64) + t
    n_rows = (tl.num_programs(1) * Tq).to(tl.int64)
    tl.store(rows, m, mask=tin)
    tl.store(rows + n_rows, tau, mask=tin)
    tl.store(rows + 2 * n_rows, tot, mask=tin)
    tl.store(LOWB + bh * n_qb + qb, _low(m, a1x, tau, row_ok, soft))


@triton.jit(do_not_specialize=_INTS)
def _fwd_rows_kernel(Q, K, V, O, W, ST, KEEP, ALPHA, ITERS, CNT, LIST, Tq, H, Tk, D, Dv, sq_b, sq_h, sq_t, sk_b, sk_h,
                     sk_t, sv_b, sv_h, sv_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, kb_b, kb_h, cq, n_kc, sa_h, n_qb,
                     n_kt, seed, scale, drop, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr, BM: tl.constexpr,
                     BN: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, HAS_KEEP: tl.constexpr,
                     CAUSAL: tl.constexpr, HAS_DROP: tl.constexpr, PREC: tl.constexpr, LOGIT: tl.constexpr,
                     LO: tl.constexpr, HI: tl.constexpr, SKIP: tl.constexpr, QBM: tl.constexpr):
    """`_fwd_kernel`'s steps 2-3 for the rows it put on the lists (ROWWISE): one program per (batch, head, BM
    entries of its list), rows from any query block, each from the start ST holds; every key tile up to the
    last row's (the forward's tile maxima are its blocks'); tau and sum f written to ST. A row's sums do not
    depend on the rows beside it, so its result is the same whichever block it lands in. (Its rows come from
    several query blocks: a keep mask is read entry by entry, HAS_KEEP 1.)"""
    tl.static_assert(HAS_KEEP != 2)
    bh = tl.program_id(1)
    n = tl.load(CNT + bh)
    # the list's last entries first: blocks list their rows about in query order as they end, so causal, the
    # longest rows start first and the launch's tail is shorter
    sb = tl.cdiv(n, BM) - 1 - tl.program_id(0)
    if sb >= 0:
        b = (bh // H).to(tl.int64)
        h = (bh % H).to(tl.int64)
        slots = sb * BM + tl.arange(0, BM)
        t = tl.load(LIST + (bh * Tq).to(tl.int64) + slots, mask=slots < n, other=Tq)
        tin = t < Tq
        dd = tl.arange(0, BD)
        dv = tl.arange(0, BDV)
        q = load_tile(Q, b, h, sq_b, sq_h, sq_t, t, Tq, dd, D)
        _a1, _chain, soft, a1x, beta = _head(ALPHA, h, sa_h, t, tin, scale, BM, MODE, LOGIT, LO, HI)
        m, tau, _tot = _row_stats(ST, bh, t, tin, Tq, tl.num_programs(1))
        q0 = tl.min(tl.where(tin, t, Tq), 0)  # (the causal tiles to mask: from the first row's)
        hi_max = Tk
        if CAUSAL:
            if not HAS_KEEP:
                hi_max = tl.minimum(Tk, tl.max(tl.where(tin, t, 0), 0) + 1)
        n_hi = tl.cdiv(hi_max, BN)
        tau, tot, it = _solve_rows(q, K, V, O, W, KEEP, KEEP, 1, ST, b, h, bh, t, tin, q0, 0, 0, n_hi, n_hi, dd, dv, m,
                                   a1x, beta, soft, tin, tau, tin, tin == 2, Tq, Tk, D, Dv, sk_b, sk_h, sk_t, sv_b,
                                   sv_h, sv_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, seed, drop, tol, MODE,
                                   MAX_ITER, BM, BN, BDV, 0, CAUSAL, HAS_DROP, PREC, False, HAS_KEEP, False)
        rows = ST + (bh * Tq).to(tl.int64) + t
        n_rows = (tl.num_programs(1) * Tq).to(tl.int64)
        tl.store(rows + n_rows, tau, mask=tin)
        tl.store(rows + 2 * n_rows, tot, mask=tin)
        if ITERS is not None:  # (the passes of a row's own query block of QBM rows: the most of its rows')
            tl.atomic_max(ITERS + bh * n_qb + t // QBM, it + 0 * t, mask=tin)


@triton.jit
def _row_stats(ST, bh, t, tin, Tq, n_bh):
    rows = ST + (bh * Tq).to(tl.int64) + t
    n_rows = (n_bh * Tq).to(tl.int64)
    m = tl.load(rows, mask=tin, other=0.0)
    tau = tl.load(rows + n_rows, mask=tin, other=0.0)
    tot = tl.load(rows + 2 * n_rows, mask=tin, other=1.0)
    return m, tau, tot


@triton.jit
def _probs_grads(s, allowed, g, m, tau, tot, c, a1, a1x, beta, soft, scale, HAS_KEEP: tl.constexpr,
                 MODE: tl.constexpr):
    """(p, log2 p (MODE 2), ds = scale u (g - c)) from the recomputed raw scores, u = p^(2 - alpha) taken
    from the unnormalised weights and a per-row factor (u = f^(2 - alpha) sum f^(alpha - 2): no
    division, root or power an entry), folded with scale into one row constant kr: ds = u~ (kr g - kr c)
    with u~ = f^(2 - alpha); with a keep mask ds is 0 at masked keys (elsewhere masked entries already
    have u = 0: a row is fully masked only through keep)."""
    f, ur, lf = _weights(s, m, a1x, tau, beta, soft, MODE)
    rt = 1.0 / tot
    p = f * rt[:, None]
    if MODE == 0:
        kr = scale + 0.0 * rt
        lg = ur
    elif MODE == 1:
        kr = scale * tl.sqrt(rt)
        lg = ur
    else:
        lt = tl.log2(tot)
        kr = scale * tl.exp2((a1 - 1.0) * lt)
        lg = tl.where(p > 0, lf - lt[:, None], 0.0)
    ds = ur * tl.fma(g, kr[:, None], -(c * kr)[:, None])
    if HAS_KEEP:
        ds = tl.where(allowed, ds, 0.0)
    return p, lg, ds


@triton.jit
def _dq_tile(dq, sgp, splp, sgplp, j, q, go, K, V, KEEP, kc, n_kc, b, h, bh, t, q0, dd, dv, m, tau, tot, c, a1, a1x,
             beta, soft, Tq, Tk, D, Dv, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, scale, drop,
             MODE: tl.constexpr, BN: tl.constexpr, HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr, HAS_DROP: tl.constexpr,
             PREC: tl.constexpr, HAS_DALPHA: tl.constexpr, R: tl.constexpr):
    """dq += ds k over key tile j; with HAS_DALPHA the rows' sum g p, sum p log p, sum g p log p added in."""
    keys = j * BN + tl.arange(0, BN)
    k = load_tile(K, b, h, sk_b, sk_h, sk_t, keys, Tk, dd, D)
    s, allowed = _scores(q, k, KEEP, kc, n_kc, b, h, t, keys, Tq, Tk, sm_b, sm_h, sm_q, sm_k, j * BN, q0, BN,
                         HAS_KEEP, CAUSAL, PREC, R)
    v = load_tile(V, b, h, sv_b, sv_h, sv_t, keys, Tk, dv, Dv)
    g = tl.dot(go, tl.trans(v), input_precision=PREC)
    if HAS_DROP:
        kept = dropout_keep(seed, ((bh * Tq).to(tl.int64) + t[:, None]) * Tk + keys[None, :], drop)
        g = tl.where(kept, g * (1.0 / (1.0 - drop)), 0.0)
    p, lg, ds = _probs_grads(s, allowed, g, m, tau, tot, c, a1, a1x, beta, soft, scale, HAS_KEEP, MODE)
    dq += tl.dot(ds.to(k.dtype), k, input_precision=PREC)
    if HAS_DALPHA:
        plogp = p * lg * 0.6931471805599453
        sgp += tl.sum(g * p, 1)
        splp += tl.sum(plogp, 1)
        sgplp += tl.sum(g * plogp, 1)
    return dq, sgp, splp, sgplp


@triton.jit
def _dkv_tile(dk, dvv, qb, k, v, Q, GO, DQA, C, ST, KEEP, KCLS, b, h, bh, ar, keys, j, dd, dv, a1, a1x, beta, soft, Tq,
              Tk, D, Dv, sq_b, sq_h, sq_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, kb_b, kb_h, cq, n_kc, seed, scale,
              drop, n_bh, MODE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, HAS_KEEP: tl.constexpr,
              CAUSAL: tl.constexpr, HAS_DROP: tl.constexpr, PREC: tl.constexpr, FUSED_DQ: tl.constexpr,
              R: tl.constexpr):
    """dk += ds^T q and dv += (p m / (1 - r))^T G over query block qb; FUSED_DQ: dq = ds k added to DQA."""
    t = qb * BM + ar
    tin = t < Tq
    m, tau, tot = _row_stats(ST, bh, t, tin, Tq, n_bh)
    q = load_tile(Q, b, h, sq_b, sq_h, sq_t, t, Tq, dd, D)
    go = load_tile(GO, b, h, so_b, so_h, so_t, t, Tq, dv, Dv)
    c = tl.load(C + (bh * Tq).to(tl.int64) + t, mask=tin, other=0.0)
    kc = KCLS + block_index(b, h, qb, kb_b, kb_h, cq) * n_kc
    s, allowed = _scores(q, k, KEEP, kc, n_kc, b, h, t, keys, Tq, Tk, sm_b, sm_h, sm_q, sm_k, j * BN, qb * BM,
                         BN, HAS_KEEP, CAUSAL, PREC, R)
    g = tl.dot(go, tl.trans(v), input_precision=PREC)
    if HAS_DROP:
        kept = dropout_keep(seed, ((bh * Tq).to(tl.int64) + t[:, None]) * Tk + keys[None, :], drop)
        g = tl.where(kept, g * (1.0 / (1.0 - drop)), 0.0)
    p, _lg, ds = _probs_grads(s, allowed, g, m, tau, tot, c, a1, a1x, beta, soft, scale, HAS_KEEP, MODE)
    if HAS_DROP:
        p = tl.where(kept, p * (1.0 / (1.0 - drop)), 0.0)
    dvv += tl.dot(tl.trans(p).to(go.dtype), go, input_precision=PREC)
    dk += tl.dot(tl.trans(ds).to(q.dtype), q, input_precision=PREC)
    if FUSED_DQ:
        dqp = tl.dot(ds.to(k.dtype), k, input_precision=PREC)
        tl.atomic_add(DQA + ((bh * Tq).to(tl.int64) + t)[:, None] * D + dd[None, :], dqp,
                      mask=tin[:, None] & (dd < D)[None, :], sem="relaxed")
    return dk, dvv


@triton.jit(do_not_specialize=_INTS)
def _bwd_dq_kernel(Q, K, V, GO, DQ, W, C, ST, TMAX, LOWB, KEEP, KCLS, JR, QR, ALPHA, DALPHA, Tq, H, Tk, D, Dv, sq_b,
                   sq_h, sq_t, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, kb_b, kb_h,
                   cq, n_kc, sa_h, n_qb, n_kt, seed, scale, drop, MODE: tl.constexpr, BM: tl.constexpr,
                   BN: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr,
                   HAS_DROP: tl.constexpr, PREC: tl.constexpr, LOGIT: tl.constexpr, LO: tl.constexpr, HI: tl.constexpr,
                   SKIP: tl.constexpr, HAS_DALPHA: tl.constexpr, R: tl.constexpr):
    """One program per (batch, head, BM queries): c = G . W written for the dk, dv kernel; dq; the
    alpha-gradient of the rows added to their head's entry. (so_*: strides of G and dq's are q's.)"""
    qb, bh, b, h, q0, t, tin, dd, dv, q = _query_block(Q, Tq, H, D, sq_b, sq_h, sq_t, BM, BD, BDV)
    go = load_tile(GO, b, h, so_b, so_h, so_t, t, Tq, dv, Dv)
    w = load_tile(W, bh.to(tl.int64), 0, Tq * Dv, 0, Dv, t, Tq, dv, Dv)
    c = tl.sum(go.to(tl.float32) * w, 1)
    tl.store(C + (bh * Tq).to(tl.int64) + t, c, mask=tin)
    a1, chain, soft, a1x, beta = _head(ALPHA, h, sa_h, t, tin, scale, BM, MODE, LOGIT, LO, HI)
    m, tau, tot = _row_stats(ST, bh, t, tin, Tq, tl.num_programs(1))
    tmax = TMAX + (bh * n_qb + qb).to(tl.int64) * n_kt
    dq = tl.zeros([BM, BD], tl.float32)
    sgp = tl.zeros([BM], tl.float32)
    splp = tl.zeros([BM], tl.float32)
    sgplp = tl.zeros([BM], tl.float32)
    n_lo, f0, f1, n_end, kc = _keep_range(KCLS, JR, b, h, qb, kb_b, kb_h, cq, n_kc,
                                          tl.cdiv(_key_end(Tk, q0, BM, CAUSAL, HAS_KEEP), BN), R, HAS_KEEP)
    low = tl.load(LOWB + bh * n_qb + qb)
    if _dense(tmax, 1, None, low, f0, f1, SKIP):
        for j in range(f0, f1):
            dq, sgp, splp, sgplp = _dq_tile(dq, sgp, splp, sgplp, j, q, go, K, V, KEEP, kc, n_kc, b, h, bh, t, q0, dd,
                                            dv, m, tau, tot, c, a1, a1x, beta, soft, Tq, Tk, D, Dv, sk_b, sk_h, sk_t,
                                            sv_b, sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, scale, drop, MODE, BN,
                                            0, CAUSAL, HAS_DROP, PREC, HAS_DALPHA, R)
    else:
        for j in range(f0, f1):
            if tl.load(tmax + j) > low:
                dq, sgp, splp, sgplp = _dq_tile(dq, sgp, splp, sgplp, j, q, go, K, V, KEEP, kc, n_kc, b, h, bh, t, q0,
                                                dd, dv, m, tau, tot, c, a1, a1x, beta, soft, Tq, Tk, D, Dv, sk_b, sk_h,
                                                sk_t, sv_b, sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, scale, drop, MODE,
                                                BN, 0, CAUSAL, HAS_DROP, PREC, HAS_DALPHA, R)
    if HAS_KEEP:
        for i in range(0, f0 - n_lo + n_end - f1):
            j = _rest_tile(i, n_lo, f0, f1)
            if tl.load(tmax + j) > low:
                dq, sgp, splp, sgplp = _dq_tile(dq, sgp, splp, sgplp, j, q, go, K, V, KEEP, kc, n_kc, b, h, bh, t, q0,
                                                dd, dv, m, tau, tot, c, a1, a1x, beta, soft, Tq, Tk, D, Dv, sk_b, sk_h,
                                                sk_t, sv_b, sv_h, sv_t, sm_b, sm_h, sm_q, sm_k, seed, scale, drop, MODE,
                                                BN, HAS_KEEP, CAUSAL, HAS_DROP, PREC, HAS_DALPHA, R)
    store_tile(DQ, dq, b, h, sq_b, sq_h, sq_t, t, Tq, dd, D)
    if HAS_DALPHA:
        da = tl.where(tin, alpha_grad(a1, c, sgp, splp, sgplp) * chain, 0.0)
        tl.atomic_add(DALPHA + h * sa_h, tl.sum(da, 0))


@triton.jit(do_not_specialize=_INTS)
def _bwd_dkv_kernel(Q, K, V, GO, DK, DV, DQA, C, ST, TMAX, LOWB, KEEP, KCLS, JR, QR, ALPHA, Tq, H, Tk, D, Dv, sq_b,
                    sq_h, sq_t, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, kb_b,
                    kb_h, cq, n_kc, sa_h, n_qb, n_kt, seed, scale, drop, MODE: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, HAS_KEEP: tl.constexpr, CAUSAL: tl.constexpr,
                    HAS_DROP: tl.constexpr, PREC: tl.constexpr, LOGIT: tl.constexpr, LO: tl.constexpr, HI: tl.constexpr,
                    SKIP: tl.constexpr, FUSED_DQ: tl.constexpr, R: tl.constexpr):
    """One program per (batch, head, BN keys), k and v held: dk and dv over the query blocks that
    reach the tile (with a keep mask's tile classes, those from the first that does not leave it EMPTY to the
    last); FUSED_DQ: also dq = ds k, added atomically (float32, (B H, Tq, D) contiguous) into DQA, as
    FlashAttention-2's backward (5 tile products a (query block, key tile) in all, against 7 for the dq kernel
    and this one apart). (dk, dv have k's and v's strides.)"""
    j = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    keys = j * BN + tl.arange(0, BN)
    dd = tl.arange(0, BD)
    dv = tl.arange(0, BDV)
    k = load_tile(K, b, h, sk_b, sk_h, sk_t, keys, Tk, dd, D)
    v = load_tile(V, b, h, sv_b, sv_h, sv_t, keys, Tk, dv, Dv)
    ar = tl.arange(0, BM)
    a1, _chain, soft, a1x, beta = _head(ALPHA, h, sa_h, ar, ar < BM, scale, BM, MODE, LOGIT, LO, HI)
    dk = tl.zeros([BN, BD], tl.float32)
    dvv = tl.zeros([BN, BDV], tl.float32)
    tmax = TMAX + (bh * n_qb).to(tl.int64) * n_kt + j
    # (causal without a keep mask: the query blocks from the one holding the tile's first key, qb0; the earlier
    # ones attend none of its keys)
    qlo = ((j * BN) // BM) if CAUSAL and not HAS_KEEP else 0
    g0 = qlo
    g1 = n_qb
    qhi = n_qb
    if HAS_KEEP == 2:  # (the query blocks not EMPTY at the tile, those FULL among them: `keep_tiles`)
        qr = QR + 4 * ((b * kb_b + h * kb_h) * n_kt + j)
        qlo, g0, g1, qhi = tl.load(qr), tl.load(qr + 1), tl.load(qr + 2), tl.load(qr + 3)
    lows = LOWB + bh * n_qb
    n_bh = tl.num_programs(1)
    if _dense(tmax, n_kt, lows, 0.0, g0, g1, SKIP):
        for qb in range(g0, g1):
            dk, dvv = _dkv_tile(dk, dvv, qb, k, v, Q, GO, DQA, C, ST, KEEP, KCLS, b, h, bh, ar, keys, j, dd, dv, a1,
                                a1x, beta, soft, Tq, Tk, D, Dv, sq_b, sq_h, sq_t, so_b, so_h, so_t, sm_b, sm_h, sm_q,
                                sm_k, kb_b, kb_h, cq, n_kc, seed, scale, drop, n_bh, MODE, BM, BN, 0, CAUSAL,
                                HAS_DROP, PREC, FUSED_DQ, R)
    else:
        for qb in range(g0, g1):
            if tl.load(tmax + qb * n_kt) > tl.load(lows + qb):
                dk, dvv = _dkv_tile(dk, dvv, qb, k, v, Q, GO, DQA, C, ST, KEEP, KCLS, b, h, bh, ar, keys, j, dd, dv, a1,
                                    a1x, beta, soft, Tq, Tk, D, Dv, sq_b, sq_h, sq_t, so_b, so_h, so_t, sm_b, sm_h,
                                    sm_q, sm_k, kb_b, kb_h, cq, n_kc, seed, scale, drop, n_bh, MODE, BM, BN, 0,
                                    CAUSAL, HAS_DROP, PREC, FUSED_DQ, R)
    if HAS_KEEP:
        for i in range(0, g0 - qlo + qhi - g1):
            qb = _rest_tile(i, qlo, g0, g1)
            if tl.load(tmax + qb * n_kt) > tl.load(lows + qb):
                dk, dvv = _dkv_tile(dk, dvv, qb, k, v, Q, GO, DQA, C, ST, KEEP, KCLS, b, h, bh, ar, keys, j, dd, dv, a1,
                                    a1x, beta, soft, Tq, Tk, D, Dv, sq_b, sq_h, sq_t, so_b, so_h, so_t, sm_b, sm_h,
                                    sm_q, sm_k, kb_b, kb_h, cq, n_kc, seed, scale, drop, n_bh, MODE, BM, BN, HAS_KEEP,
                                    CAUSAL, HAS_DROP, PREC, FUSED_DQ, R)
    store_tile(DK, dk, b, h, sk_b, sk_h, sk_t, keys, Tk, dd, D)
    store_tile(DV, dvv, b, h, sv_b, sv_h, sv_t, keys, Tk, dv, Dv)


@triton.jit(do_not_specialize=["Tq", "H"])
def _c_kernel(GO, W, C, Tq, H, Dv, so_b, so_h, so_t, BM: tl.constexpr, BDV: tl.constexpr):
    """c = G . W a row (the backward's sum u g / sum u), one program per (batch, head, BM queries)."""
    bh = tl.program_id(1)
    t = tl.program_id(0) * BM + tl.arange(0, BM)
    dv = tl.arange(0, BDV)
    go = load_tile(GO, (bh // H).to(tl.int64), (bh % H).to(tl.int64), so_b, so_h, so_t, t, Tq, dv, Dv)
    w = load_tile(W, bh.to(tl.int64), 0, Tq * Dv, 0, Dv, t, Tq, dv, Dv)
    tl.store(C + (bh * Tq).to(tl.int64) + t, tl.sum(go.to(tl.float32) * w, 1), mask=t < Tq)


def _launch(fn, grid, args, consts: dict, warps: int, stages: int | None = None, regs: int | None = None) -> None:
    """`launch` with the pipelining stages given (STAGES where set; None: Triton's default) and the register
    cap `regs` (None: Triton's)."""
    launch(fn, grid, args, consts, warps, num_stages=STAGES if STAGES is not None else stages, max_registers=regs)


SHORT_KEYS = 512  # rows of at most this many keys take key tiles of 32 and start from the position maxima alone
LONG_KEYS = 4096  # half rows of up to this many keys (sparsemax, 1.5-entmax): forward key tiles of 32 (`_tiles`)
FP32_MAX_HEAD_DIM = 128  # float32 tiles of wider heads exceed the shared memory of a block (227 KiB on sm_90)


def _topk(Tk: int) -> int:
    """TOPK if set; 4, or 1 for rows of at most SHORT_KEYS keys, where 4 entries a key position hold
    much of the row and the start's solve on them costs more than the passes it saves (2 in the
    interpreter, whose tests have a few hundred keys: 4 a position of 32 would hold most of their
    rows, and the Newton passes after the start would go untested)."""
    if TOPK is not None:
        return TOPK
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        return 2
    return 1 if Tk <= SHORT_KEYS else 4


def _tiles(D: int, Dv: int, Tk: int, dtype: torch.dtype, mode: int) -> tuple[int, int, int, int]:
    """(BM, BN, backward BN, warps): TILE if set (BWD_KEYS, where set, the backward BN), else by head dim
    (registers: the q tile and up to three [BM, Dv] sums), dtype (float32's tf32x3 products hold each operand
    twice: key tiles of 32 spill less) and, for half inputs at head dims up to 64, row length and kind. Rows
    of at most SHORT_KEYS keys take key tiles of 32; up to LONG_KEYS, sparsemax and 1.5-entmax still take 32
    in the forward, whose start then solves on a [BM, TOPK 32] subset (cheaper than the passes it costs, to
    that length), and 64 in the backward (the fused backward adds dq atomically once a key tile). Four warps
    hold a block of 64 rows in one warpgroup, so a row's sums stay within a warp (8 warps split the columns
    and reduce through shared memory)."""
    bm, bn, bn_b, warps = _launch_tiles(D, Dv, Tk, dtype, mode)
    return bm, bn, BWD_KEYS or bn_b, warps


def _launch_tiles(D: int, Dv: int, Tk: int, dtype: torch.dtype, mode: int) -> tuple[int, int, int, int]:
    """`_tiles` before BWD_KEYS."""
    if TILE is not None:
        bm, bn, warps = TILE
        return bm, bn, bn, warps
    if os.environ.get("TRITON_INTERPRET", "0") == "1":  # (the CPU tests: a few tiles of a few hundred keys)
        return 32, 32, 32, 4
    width = max(D, Dv)
    if dtype == torch.float32:
        return (64, 32, 32, 4) if width <= 64 else (64, 32, 32, 8)
    if width <= 64:
        if Tk <= SHORT_KEYS:
            return 64, 32, 32, 4
        return 64, 32 if Tk <= LONG_KEYS and mode != MODES["bisect"] else 64, 64, 4
    if width <= 128:
        return 64, 64, 64, 8
    return 64, 32, 32, 8


def _stages(D: int, Dv: int, dtype: torch.dtype, keep: bool = False) -> tuple[int | None, int]:
    """(forward, backward) pipelining stages (BWD_STAGES where set; STAGES, where set, overrides both at
    launch): Triton's default and 3 for half inputs (2 for heads wider than 128 with a keep mask: on three stages
    the fused backward at head dim 256 reading the mask by tiles needs 232,960 bytes of shared memory, past
    sm_90's 232,448, `sass_long_attention.py --head-dim 256 --keep`); float32's backward one (its tf32x3 tiles
    spill into the stages' buffers), and at head dims above 64 its forward one too (more would exceed a block's
    shared memory)."""
    if dtype != torch.float32:
        fwd, bwd = None, 2 if keep and max(D, Dv) > 128 else 3
    else:
        fwd, bwd = 1 if max(D, Dv) > 64 else None, 1
    return fwd, BWD_STAGES if BWD_STAGES is not None else bwd


class _Call:
    """Shapes, strides and flags of one call, shared by its three kernels."""

    def __init__(self, q, k, v, keep, alpha, bounds, mode: int, scale: float, drop: float, seed: int,
                 causal: bool):
        B, H, Tq, D = q.shape
        Tk, Dv = k.shape[2], v.shape[3]
        self.shape = (B, H, Tq, Tk, D, Dv)
        self.mode, self.scale, self.drop, self.seed = mode, scale, drop, seed
        self.alpha, sa_h = head_alpha(alpha, mode, q)
        self.keep = keep if keep is not None else q
        sm = broadcast4(keep)[1] if keep is not None else (0, 0, 0, 0)
        self.bm, self.bn, bn_b, self.warps = _tiles(D, Dv, Tk, q.dtype, mode)
        self.bwd_warps = BWD_WARPS or self.warps
        self.stages, self.bwd_stages = _stages(D, Dv, q.dtype, keep is not None)
        self.n_qb, self.n_kt = cdiv(Tq, self.bm), cdiv(Tk, self.bn)
        self.sizes = (Tq, H, Tk, D, Dv)
        self.qkv = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3])
        # the backward's key tiles: BN, or pairs of the forward's (`pair_maxima` coarsens TMAX for them)
        self.pairs = bn_b == 2 * self.bn
        assert bn_b in (self.bn, 2 * self.bn), (self.bn, bn_b)
        r = bn_b // self.bn
        # a keep mask's tile classes (`keep_tiles`): the kernels read the entries of MIXED tiles only
        if keep is not None:
            tiles = KeepTiles(keep, Tq, Tk, self.bm, self.bn, r, causal)
            self.tile_ptrs, ints = tiles.tensors, (*sm, *tiles.ints)
        else:
            self.tile_ptrs, ints = (q, q, q), (*sm, 0, 0, 0, 1)
        self.tail = (*ints, sa_h, self.n_qb, self.n_kt, seed)
        self.consts = {"BM": self.bm, "BN": self.bn, "BD": next_pow2(max(D, 16)), "BDV": next_pow2(max(Dv, 16)),
                       "HAS_KEEP": 2 if keep is not None else 0, "CAUSAL": bool(causal), "HAS_DROP": drop > 0,
                       "PREC": "tf32x3" if q.dtype == torch.float32 else "tf32", **alpha_flags(bounds), "SKIP": SKIP,
                       "R": 1}
        self.grid_q = (self.n_qb, B * H)
        n_kt_b = cdiv(Tk, bn_b)
        self.bwd_tail = (*ints, sa_h, self.n_qb, n_kt_b, seed)
        self.bwd_consts = {**self.consts, "BN": bn_b, "R": r}
        self.grid_k = (n_kt_b, B * H)


def _halley(alpha) -> bool:
    """Whether the alpha-entmax passes sum C for Halley's step (`HALLEY`): not for one float alpha above 1.5,
    whose rows (beta < 2) never take it; alphas in a tensor are not known on the host."""
    return HALLEY and (alpha is None or torch.is_tensor(alpha) or float(alpha) <= 1.5)


def pair_maxima(tmax: torch.Tensor) -> torch.Tensor:
    """(B H, query blocks, key tiles) tile maxima -> those of tiles of two (an odd last tile alone): a
    tile's maximum bounds each entry, so the backward's skip test stays exact on the coarser tiles. The
    forward filled the tiles it did not visit with -inf (they never raise a pair's maximum)."""
    if tmax.shape[-1] % 2:
        tmax = torch.nn.functional.pad(tmax, (0, 1), value=float("-inf"))
    return tmax.unflatten(-1, (-1, 2)).amax(-1)


def forward(q, k, v, keep, alpha, bounds, mode: int, scale: float, drop: float, seed: int, causal: bool):
    """(out (B, H, Tq, Dv) in v's dtype, a view of (B, Tq, H, Dv) memory; what the backward keeps:
    W (B H, Tq, Dv), ST (3, B H, Tq) float32, TMAX (B H, query blocks, key tiles) float32, LOW (B H, query
    blocks) float32, the block's `_low` at its final thresholds; the call)."""
    call = _Call(q, k, v, keep, alpha, bounds, mode, scale, drop, seed, causal)
    B, H, Tq, Tk, D, Dv = call.shape
    out = torch.empty((B, Tq, H, Dv), device=q.device, dtype=v.dtype).transpose(1, 2)
    w = torch.empty((B * H, Tq, Dv), device=q.device, dtype=torch.float32)
    st = torch.empty((3, B * H, Tq), device=q.device, dtype=torch.float32)
    shape = (B * H, call.n_qb, call.n_kt)  # (a causal block leaves the tiles it does not visit unwritten: -inf
    # where the backward reads their pairs)
    # (a key tile outside a block's range of a keep mask's tiles is not visited either)
    tmax = torch.full(shape, float("-inf"), device=q.device, dtype=torch.float32) if call.pairs or keep is not None \
        else torch.empty(shape, device=q.device, dtype=torch.float32)
    low = torch.empty((B * H, call.n_qb), device=q.device, dtype=torch.float32)
    if out.numel() == 0:
        return out, w, st, tmax, low, call
    rowwise = ROWWISE and mode != MODES["bisect"] and _topk(Tk) > 1
    lists = (torch.zeros(B * H, device=q.device, dtype=torch.int32),
             torch.empty(B * H * Tq, device=q.device, dtype=torch.int32)) if rowwise else (st, st)
    tail = (*call.sizes, *call.qkv, *out.stride()[:3], *call.tail, scale, drop, 1e-6)
    max_iter = 64 if mode == 2 else 32
    _launch(_fwd_kernel, call.grid_q,
            (q, k, v, out, w, st, tmax, low, call.keep, *call.tile_ptrs, call.alpha, ITERS, *lists, *tail),
            dict(MODE=mode, MAX_ITER=max_iter, GROUP_ITER=32, **call.consts, TOPK=_topk(Tk),
                 START_MARGIN2=ALPHA_MARGIN, ROWWISE=rowwise, HALLEY=_halley(alpha)), call.warps, call.stages, REGS)
    if rowwise:
        bm, bn, warps = ROWS_TILE or (call.bm, call.bn, call.warps)
        _launch(_fwd_rows_kernel, (cdiv(Tq, bm), B * H),
                (q, k, v, out, w, st, call.keep, call.alpha, ITERS, *lists, *tail),
                {**{c: x for c, x in call.consts.items() if c != "R"}, "MODE": mode, "MAX_ITER": max_iter, "BM": bm,
                 "BN": bn, "QBM": call.bm, "HAS_KEEP": int(keep is not None)}, warps,
                call.stages, REGS)
    return out, w, st, tmax, low, call


def backward(call: _Call, q, k, v, w, st, tmax, low, grad, dalpha):
    """(dq, dk, dv) in the layouts of q, k, v; the alpha tensor's gradient (alphas or logits) added to
    ``dalpha`` (float32 zeros of its size) unless that is None. Half inputs without an alpha-gradient:
    one kernel over the key tiles makes all three (dq added atomically, `FUSED_BWD`); else a dq kernel
    over the query blocks (which sums each row's alpha-gradient terms) and a dk, dv kernel."""
    B, H, Tq, Tk, D, Dv = call.shape
    if grad.stride(-1) != 1:
        grad = grad.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if q.numel() == 0 or k.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    c = torch.empty((B * H, Tq), device=q.device, dtype=torch.float32)
    ints = (*call.sizes, *call.qkv, *grad.stride()[:3], *call.bwd_tail)
    if call.pairs:
        tmax = pair_maxima(tmax)
    fused = FUSED_BWD if FUSED_BWD is not None else q.dtype != torch.float32
    if dalpha is None and fused:
        _launch(_c_kernel, call.grid_q, (grad, w, c, Tq, H, Dv, *grad.stride()[:3]),
                dict(BM=call.bm, BDV=call.consts["BDV"]), 4)
        dqa = torch.zeros((B * H, Tq, D), device=q.device, dtype=torch.float32)
        _launch(_bwd_dkv_kernel, call.grid_k,
               (q, k, v, grad, dk, dv, dqa, c, st, tmax, low, call.keep, *call.tile_ptrs, call.alpha, *ints, call.scale,
                call.drop),
               dict(MODE=call.mode, **call.bwd_consts, FUSED_DQ=True), call.bwd_warps, call.bwd_stages, BWD_REGS)
        return dq.copy_(dqa.view(B, H, Tq, D)), dk, dv
    _launch(_bwd_dq_kernel, call.grid_q,
           (q, k, v, grad, dq, w, c, st, tmax, low, call.keep, *call.tile_ptrs, call.alpha,
            dalpha if dalpha is not None else c,
            *ints, call.scale, call.drop), dict(MODE=call.mode, **call.bwd_consts, HAS_DALPHA=dalpha is not None),
            call.bwd_warps, call.bwd_stages, BWD_REGS)
    # (dq, dk, dv are written through q's, k's and v's strides, which empty_like kept)
    _launch(_bwd_dkv_kernel, call.grid_k,
           (q, k, v, grad, dk, dv, c, c, st, tmax, low, call.keep, *call.tile_ptrs, call.alpha, *ints, call.scale,
            call.drop),
           dict(MODE=call.mode, **call.bwd_consts, FUSED_DQ=False), call.bwd_warps, call.bwd_stages, BWD_REGS)
    return dq, dk, dv


class LongAttention(torch.autograd.Function):
    """out = drop(pi(scale q k^T, masked)) v with gradients w.r.t. q, k, v and a per-head alpha (or the
    logits of a learned one), O(T) memory (see the module docstring for what is kept)."""

    @staticmethod
    def forward(ctx, q, k, v, keep, alpha, bounds, mode: int, scale: float, drop: float, causal: bool):
        if torch.is_autocast_enabled("cuda"):  # tiles in the autocast dtype, as upstream's matmuls would run
            dt = torch.get_autocast_dtype("cuda")
            q, k, v = q.to(dt), k.to(dt), v.to(dt)
        seed = int(torch.randint(0, 2**31 - 1, ())) if drop > 0 else 0  # (CPU generator: no sync)
        out, w, st, tmax, low, ctx.call = forward(q, k, v, keep, alpha, bounds, mode, scale, drop, seed, causal)
        ctx.save_for_backward(q, k, v, w, st, tmax, low, alpha if torch.is_tensor(alpha) else None)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        q, k, v, w, st, tmax, low, alpha = ctx.saved_tensors
        grad = grad.to(v.dtype)
        dalpha = torch.zeros(alpha.numel(), device=q.device, dtype=torch.float32) if ctx.needs_input_grad[4] else None
        dq, dk, dv = backward(ctx.call, q, k, v, w, st, tmax, low, grad, dalpha)
        if dalpha is not None:
            dalpha = dalpha.view(alpha.shape).to(alpha.dtype)
        return dq, dk, dv, None, dalpha, None, None, None, None, None


def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha=None,
                     scale: float = 1.0, dropout_p: float = 0.0, alpha_bounds: tuple[float, float] | None = None,
                     causal: bool = False) -> torch.Tensor:
    """(B, H, Tq, Dv) = drop(pi(scale q k^T, keys where keep is False (or after the query, causal) at
    -1e18)) v, differentiable, for a call `supports` took; the arguments as `attention.sparse_attention`'s
    (alpha: a float or H or 1 values; with alpha_bounds (lo, hi), H or 1 logits a of
    alpha = clamp(1 + sigmoid(a), lo, hi), differentiated through)."""
    mode = MODES["bisect" if kind == "entmax_bisect" else kind]
    return LongAttention.apply(q, k, v, keep, alpha, alpha_bounds, mode, float(scale), float(dropout_p), causal)


def supports(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha, dropout_p: float) -> bool:
    """q (B, H, Tq, D), k (B, H, Tk >= 1, D), v (B, H, Tk, Dv) of one float dtype and device, unit stride
    on the last dim, D and Dv <= MAX_HEAD_DIM (FP32_MAX_HEAD_DIM for float32), B H <= MAX_GRID_Y; keep None or a
    bool tensor broadcastable to (B, H, Tq, Tk) (read through its strides); entmax_bisect's alpha a float >=
    KERNEL_ALPHA_MIN or a float32 tensor of H or 1 values (alphas or logits) on q's device; dropout in [0, 1)."""
    if kind not in KINDS or q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or not 0.0 <= dropout_p < 1.0:
        return False
    B, H, Tq, D = q.shape
    if k.shape[:2] != (B, H) or v.shape[:3] != k.shape[:3] or k.shape[3] != D or max(D, v.shape[3]) > MAX_HEAD_DIM:
        return False
    if k.shape[2] == 0 or B * H > MAX_GRID_Y:  # (no key: the reference's answer; the grid's second dim)
        return False
    if q.dtype == torch.float32 and max(D, v.shape[3]) > FP32_MAX_HEAD_DIM:
        return False
    if k.dtype != q.dtype or v.dtype != q.dtype or k.device != q.device or v.device != q.device \
            or q.stride(3) != 1 or k.stride(3) != 1 or v.stride(3) != 1:
        return False
    if keep is not None:
        if not torch.is_tensor(keep) or keep.dtype != torch.bool or keep.ndim > 4 or keep.device != q.device:
            return False
        shape = broadcast4(keep)[0]
        if any(n not in (1, full) for n, full in zip(shape, (B, H, Tq, k.shape[2]))):
            return False
    if kind == "entmax_bisect":
        if torch.is_tensor(alpha):
            return alpha.numel() in (1, H) and alpha.dtype == torch.float32 and alpha.is_contiguous() \
                and alpha.device == q.device
        return alpha is not None and float(alpha) >= KERNEL_ALPHA_MIN
    return True
