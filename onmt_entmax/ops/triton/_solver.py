"""Sort-free threshold solver shared by the Triton kernels (row tiles of shape [BR, BC]).

Rows are first shifted and scaled, x = (alpha - 1) (z - max z), so that max x = 0 and the
threshold tau of p = [x - tau]_+^beta, beta = 1 / (alpha - 1), lies in [-1, 0).

Iteration (per row, from below): with d = x - tau on the support S = {d > 0},
A = sum_S d^beta, B = sum_S d^(beta - 1), the function g(tau) = A^(1/beta) - 1 is the
beta-norm of [x - tau]_+ minus one: convex and decreasing in tau, so the Newton step

    s = A (1 - A^(-1/beta)) / B

never passes the root (tau stays a lower bound and S a superset of the true support).
For beta = 1 (sparsemax) and beta = 2 (1.5-entmax) the root on S has a closed form:

    sparsemax:  s* = (A - 1) / k
    1.5-entmax: s* = B/k - sqrt((1 - (A - B^2/k)) / k)

and s* is the exact answer as soon as the support it implies is S itself, i.e.
min_S d >= s* >= 0 (the certificate: every element of S stays in, and none outside S, whose
d <= 0, enters). Other alpha: Newton until |A - 1| <= tol,
then p is divided by A so that it sums to one.

Start: tau = -1 is a lower bound, but on flat rows Newton from there needs up to ~11 passes
(sparsemax, 32768 entries of randn * 0.2: each step covers a quarter of the distance). For any
subset T of the row, F_T(tau) = sum_T [x - tau]_+^beta <= F(tau), so the threshold of T is a
lower bound of the row's. Long rows take T = the maxima of groups of 4-16 entries, which holds
most of the (small) support: solving on T costs 1/16-1/4 of a pass each step, and from there the
row needs 1-2 passes (4 for flat alpha = 1.33 rows, whose large support T misses).
"""
import os

import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

# MODE (a constexpr in every kernel): 0 sparsemax, 1 exact 1.5-entmax, 2 any alpha (Newton + tol).
_INTERP = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") == "1")
START_MARGIN = tl.constexpr(1e-6)  # tau_T - margin: a lower bound despite float32 rounding
FLT_MIN = tl.constexpr(1.1754943508222875e-38)


@triton.jit
def fast_log2(x):
    """log2 by the hardware approximation (lg2.approx, rel. error ~2^-22; tl.log2 compiles to
    libdevice's ~25-instruction log2f); tl.log2 under the CPU interpreter."""
    if _INTERP:
        return tl.log2(x)
    else:
        return libdevice.fast_log2f(x)


@triton.jit
def log2_pos(d):
    """log2 d for d > 0; finite garbage (log2 of the smallest normal float) where d <= 0, for the
    caller to mask. The clamp also keeps subnormal d off lg2.approx, which flushes them to 0."""
    return fast_log2(tl.maximum(d, FLT_MIN))


@triton.jit
def row_alpha(ALPHA, rows, rmask, BR: tl.constexpr, MODE: tl.constexpr):
    """alpha of each row [BR]: 2 (sparsemax), 1.5 (exact 1.5-entmax), else read from ALPHA."""
    if MODE == 0:
        al = tl.full([BR], 2.0, tl.float32)
    elif MODE == 1:
        al = tl.full([BR], 1.5, tl.float32)
    else:
        al = tl.load(ALPHA + rows, mask=rmask, other=2.0).to(tl.float32)
    return al


@triton.jit
def _pow_pos(d, e):
    """d^e for d > 0 (e a per-row [BR, 1] or scalar exponent); 0 where d <= 0."""
    return tl.where(d > 0, tl.exp2(e * log2_pos(d)), 0.0)


@triton.jit
def stats_elems(x, tau, beta, MODE: tl.constexpr):
    """Elementwise support terms at thresholds tau [BR]: ([d>0], d^beta, d^(beta-1), d on S
    (+inf off S)); row sums / min of these are the statistics. MODE 2 needs only A and B
    (no closed form, no certificate): its k and min slots repeat B and are not reduced."""
    return support_terms(x - tau[:, None], beta, MODE)


@triton.jit
def support_terms(d, beta, MODE: tl.constexpr, HALLEY: tl.constexpr = False):
    """`stats_elems` from d = x - tau itself (a caller that forms it in one rounding, e.g. by an fma)."""
    pos = d > 0
    if MODE == 2:
        dp = tl.maximum(d, 0.0)  # (the powers are 0 off S, and d may be -inf there)
        if HALLEY:
            # d^(beta-2) first, one power an entry as without: d^(beta-1) = d^(beta-2) d (finite for
            # beta < 2 too, d >= the smallest normal: `log2_pos`)
            c = _pow_pos(d, beta[:, None] - 2.0)
            b = c * dp
            return c, b * dp, b, b
        b = _pow_pos(d, beta[:, None] - 1.0)
        a = b * dp
        return b, a, b, b
    dp = tl.where(pos, d, 0.0)
    kf = pos.to(tl.float32)
    mn = tl.where(pos, d, float("inf"))
    if MODE == 0:
        a = dp
        b = kf
    else:
        a = dp * dp
        b = dp
    return kf, a, b, mn


@triton.jit
def _sum2(a1, b1, a2, b2):
    return a1 + a2, b1 + b2


@triton.jit
def _sum3(a1, b1, c1, a2, b2, c2):
    return a1 + a2, b1 + b2, c1 + c2


@triton.jit
def _sum2_min(k1, a1, m1, k2, a2, m2):
    return k1 + k2, a1 + a2, tl.minimum(m1, m2)


@triton.jit
def _sum3_min(k1, a1, b1, m1, k2, a2, b2, m2):
    return k1 + k2, a1 + a2, b1 + b2, tl.minimum(m1, m2)


@triton.jit
def reduce_stats(kf, a, b, mn, MODE: tl.constexpr, HALLEY: tl.constexpr = False):
    """(k, A, B, min_S d) per row of [BR, BC] terms, in one multi-operand reduction (one
    shared-memory exchange across warps instead of one per statistic). The interpreter runs a
    multi-operand reduction element by element in Python: there, one reduction per statistic.
    MODE 2 with HALLEY: (C, A, B, B), C the sum of the k slot's d^(beta-2)."""
    if _INTERP:
        if MODE == 2:
            sb = tl.sum(b, 1)
            return tl.sum(kf, 1) if HALLEY else sb, tl.sum(a, 1), sb, sb
        k = tl.sum(kf, 1)
        return k, tl.sum(a, 1), tl.sum(b, 1) if MODE == 1 else k, tl.min(mn, 1)
    if MODE == 0:
        k, sa, smn = tl.reduce((kf, a, mn), 1, _sum2_min)
        return k, sa, k, smn
    if MODE == 2:
        if HALLEY:
            sc, sa, sb = tl.reduce((kf, a, b), 1, _sum3)
            return sc, sa, sb, sb
        sa, sb = tl.reduce((a, b), 1, _sum2)
        return sb, sa, sb, sb  # k and min_S d are not used by MODE 2
    return tl.reduce((kf, a, b, mn), 1, _sum3_min)


@triton.jit
def newton_step(tau, done, out_tau, out_norm, lo, hi, k, a, b, mn, beta, tol, MODE: tl.constexpr,
                HALLEY: tl.constexpr = False):
    """One Newton-on-the-norm step; rows whose certificate holds are frozen (done).
    [lo, hi] brackets the root (sum p >= 1 at lo, < 1 at hi); for alpha > 2 (beta < 1) the norm
    is not convex: those rows bisect the bracket instead (and a Newton step that would leave the
    bracket is replaced by its midpoint). MODE 2 with HALLEY (k = C = sum d^(beta-2) on S): rows of
    beta >= 2 (alpha <= 1.5, where C stays finite as d -> 0) take Halley's step on h = A - 1 instead,
        tau += -2 h h' / (2 h'^2 - h h''),   h' = -beta B,  h'' = beta (beta - 1) C,
    cubic where Newton's is quadratic, wherever its denominator is positive (else Newton's)."""
    kk = tl.maximum(k, 1.0)
    bb = tl.maximum(b, 1e-30)
    if MODE == 0:
        s_n = (a - 1.0) / kk
        s_x = s_n
        exact = (k > 0) & (mn >= s_x) & (s_x >= 0)
    elif MODE == 1:
        s_n = (a - tl.sqrt(a)) / bb
        mean = b / kk
        disc = (1.0 - (a - b * mean)) / kk
        s_x = mean - tl.sqrt(tl.maximum(disc, 0.0))
        exact = (k > 0) & (disc >= 0) & (mn >= s_x) & (s_x >= 0)
    else:
        # A^(-1/beta) = A^(-(alpha-1)) = 2^(-log2(A) / beta)
        s_n = a * (1.0 - tl.exp2(-tl.log2(tl.maximum(a, 1e-30)) / beta)) / bb
        s_x = tl.zeros_like(s_n)
        if HALLEY:
            h = a - 1.0
            den = 2.0 * beta * b * b - h * (beta - 1.0) * k
            s_h = 2.0 * h * b / tl.where(den > 0, den, 1.0)
            s_n = tl.where((beta >= 2.0) & (den > 0), s_h, s_n)
        # stop at the tolerance, or when the step no longer moves tau in float32
        exact = (tl.abs(a - 1.0) <= tol) | (tl.abs(s_n) <= 1.2e-7 * tl.abs(tau))
    live = done == 0
    if MODE == 2:
        new_tau = tau
        new_norm = a
    else:
        new_tau = tl.where(exact, tau + s_x, tau)
        new_norm = tl.where(exact, 1.0, a)
    out_tau = tl.where(live, new_tau, out_tau)
    out_norm = tl.where(live, new_norm, out_norm)
    cand = tau + s_n
    if MODE == 2:
        above = a < 1.0
        lo = tl.where(live & (above == 0), tl.maximum(lo, tau), lo)
        hi = tl.where(live & above, tl.minimum(hi, tau), hi)
        # strictly inside: a Newton step that rounds onto a point already visited (the float32 neighbours
        # of a steep row's root, whose |A - 1| both exceed tol) would cycle there; the midpoint shrinks
        inside = (cand > lo) & (cand < hi) & (beta >= 1.0)  # False for NaN too
        cand = tl.where(inside, cand, 0.5 * (lo + hi))
        # bisection (alpha > 2) stops when the bracket no longer shrinks in float32
        exact = exact | ((hi - lo) <= 1.2e-7 * tl.abs(tau))
    else:
        # a step that no longer moves tau (2 ulps) is at the root, where the closed form's cancellation
        # (1.5-entmax: mean - sqrt(disc)) can come out a few ulps below 0 and fail the certificate on every
        # pass until MAX_ITER: the row stops at tau, normalised by its A (out_tau, out_norm as set above)
        exact = exact | (tl.abs(cand - tau) <= 2.4e-7 * tl.abs(tau))
    tau = tl.where(live & (exact == 0), cand, tau)
    done = tl.where(live & exact, 1, done)
    return tau, done, out_tau, out_norm, lo, hi


@triton.jit
def solve_tile(x, beta, row_ok, tol, tau0, MODE: tl.constexpr, MAX_ITER: tl.constexpr,
               KEEP_P: tl.constexpr = False):
    """Thresholds for a tile held in registers. x: [BR, BC] shifted-scaled scores
    (max 0 on valid rows, -inf for padding), tau0 [BR] the start (-1, or a lower bound from
    `group_start`); returns (tau, norm, iterations, p~). KEEP_P (MODE 2): p~ is the tile
    [x - tau]_+^beta of each row's last pass (the A terms of its statistics), so the caller
    needs no pow pass of its own (p = p~ / sum p~); else p~ is 0."""
    tau = tau0
    lo = tl.full(beta.shape, -1.0, tl.float32)
    hi = tl.zeros(beta.shape, tl.float32)
    out_tau = tau
    out_norm = tl.full(beta.shape, 1.0, tl.float32)
    done = tl.where(row_ok, 0, 1)
    if KEEP_P:
        kept = tl.zeros(x.shape, tl.float32)
    else:
        kept = 0.0
    it = 0
    go = tl.sum(1 - done, 0) > 0
    while go:
        kf, a, b, mn = stats_elems(x, tau, beta, MODE)
        if KEEP_P:
            kept = tl.where((done == 0)[:, None], a, kept)
        k, a, b, mn = reduce_stats(kf, a, b, mn, MODE)
        tau, done, out_tau, out_norm, lo, hi = newton_step(tau, done, out_tau, out_norm, lo, hi,
                                                       k, a, b, mn, beta, tol, MODE)
        it += 1
        go = (tl.sum(1 - done, 0) > 0) & (it < MAX_ITER)
    return out_tau, out_norm, it, kept


@triton.jit
def max_nan(a, b):
    """max that returns NaN if either is NaN (the hardware max drops NaN): a row with a NaN logit
    has a NaN maximum, and the kernels return NaN for it, as the torch reference does."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def group_max(z, BR: tl.constexpr, BC: tl.constexpr, SIZE: tl.constexpr):
    """Maxima [BR, BC // SIZE] of a partition of each row into groups of SIZE entries, group j
    holding entries j, j + BC // SIZE, j + 2 BC // SIZE, ... (any partition serves the start).
    Strided because a thread holds entries one layout span apart (16-byte vectors x 32 lanes x
    warps): where BC // SIZE is a multiple of the span (`_config.group_size`), each group lies in
    one thread's registers. The reshape keeps the order (can_reorder, which let Triton choose
    the groups, is deprecated in 3.9 and gone in 3.10); groups spread over threads go through
    shared memory (sm_90 PTX at 32768 columns: 140 shared loads against 12)."""
    return tl.reduce(tl.reshape(z, [BR, SIZE, BC // SIZE]), 1, max_nan)


@triton.jit
def tile_max(z, BR: tl.constexpr, BC: tl.constexpr, GROUPS: tl.constexpr):
    """(row maxima [BR], NaN where the row has a NaN; zg): zg the maxima of the tile's groups of
    GROUPS entries (for `start`), or z where GROUPS is 0."""
    if GROUPS:
        zg = group_max(z, BR, BC, GROUPS)
    else:
        zg = z
    return tl.reduce(zg, 1, max_nan), zg


@triton.jit
def start(zg, m, a1, beta, row_ok, tol, MODE: tl.constexpr, GROUP_ITER: tl.constexpr,
          GROUPS: tl.constexpr):
    """The solver's first tau [BR]: `group_start` where GROUPS is not 0, else -1."""
    if GROUPS:
        tau0 = group_start(zg, m, a1, beta, row_ok, tol, MODE, GROUP_ITER)
    else:
        tau0 = tl.full(beta.shape, -1.0, tl.float32)
    return tau0


@triton.jit
def group_start(zg, m, a1, beta, row_ok, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr):
    """A lower bound of each row's threshold from its group maxima zg [BR, G] (m: row max):
    the threshold of the subset T of group maxima (F_T <= F), less START_MARGIN. Every Newton
    iterate on T is a lower bound too, so MAX_ITER may stop the solve on T early.
    MODE 2 starts at T's threshold itself: its rows stop at |A - 1| <= tol, which the margin fails
    where T holds the support (A - 1 = beta B margin there, B >= A = 1 as every d <= 1), costing a
    pass; a start a few ulps above the root is harmless (the bracketed step goes back from above)."""
    t, _n, _it, _xg = _group_threshold(zg, m, a1, beta, row_ok, tol, MODE, MAX_ITER)
    return _below(t, MODE)


@triton.jit
def _group_threshold(zg, m, a1, beta, row_ok, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr):
    """(threshold, norm, solver passes, x) of the subset T of group maxima zg [BR, G], from -1."""
    xg = (zg - m[:, None]) * a1[:, None]
    t, n, it, _p = solve_tile(xg, beta, row_ok, tol, tl.full(beta.shape, -1.0, tl.float32), MODE, MAX_ITER)
    return t, n, it, xg


@triton.jit
def _below(t, MODE: tl.constexpr):
    """The start from a subset's threshold t: t less START_MARGIN (MODE 2: t itself), at least -1."""
    if MODE == 2:
        return tl.maximum(t, -1.0)
    return tl.maximum(t - START_MARGIN, -1.0)


@triton.jit
def lane_cols(rows, rmask, n_cols, BR: tl.constexpr, BC: tl.constexpr, LANES: tl.constexpr):
    """(rows [BR, 1, 1] as int64, columns [1, BC // J, J], mask [BR, BC // J, J]) of a tile of
    BR short rows, J = LANES // BR lanes a row: entry (r, l, j) is column l J + j of row r, so
    the tile reshaped to [BR, BC] holds each row in order. Built this way, the compiler gives
    each row its own J lanes, each holding BC // J of its entries; from a [BR, BC] tile of rows
    shorter than a warp it spreads every row over all the lanes, each lane holding entries of
    every row and repeating the per-row work (the solver's update, one shuffle level more; the
    instruction counts: docs/kernels.md, "Short rows")."""
    J: tl.constexpr = LANES // BR
    cols = tl.arange(0, BC // J)[None, :, None] * J + tl.arange(0, J)[None, None, :]
    return rows.to(tl.int64)[:, None, None], cols, rmask[:, None, None] & (cols < n_cols)


@triton.jit
def load_scaled(Z, rows, row_ok_mask, cols, n_cols, stride, m, a1):
    """x = (alpha - 1) (z - m) for one [BR, BC] chunk, -inf outside the row."""
    msk = row_ok_mask[:, None] & (cols[None, :] < n_cols)
    z = tl.load(Z + rows.to(tl.int64)[:, None] * stride + cols[None, :], mask=msk,
                other=float("-inf")).to(tl.float32)
    return (z - m[:, None]) * a1[:, None]


@triton.jit
def row_max(Z, rows, rmask, n_cols, stride, BR: tl.constexpr, BC: tl.constexpr):
    """Row maxima (NaN where the row has a NaN; and sum / count of finite entries) streamed over
    column chunks, and two [BR, BC] tiles over the columns that share a position mod BC (a
    partition of the row for `stream_start`): their maxima and their second largest entries.
    Accumulates tiles and reduces once after the loop (no reduction in the loop)."""
    m2 = tl.full([BR, BC], float("-inf"), tl.float32)
    n2 = tl.full([BR, BC], float("-inf"), tl.float32)
    s2 = tl.zeros([BR, BC], tl.float32)
    c2 = tl.zeros([BR, BC], tl.float32)
    for c0 in range(0, n_cols, BC):
        cols = c0 + tl.arange(0, BC)
        msk = rmask[:, None] & (cols[None, :] < n_cols)
        z = tl.load(Z + rows.to(tl.int64)[:, None] * stride + cols[None, :], mask=msk,
                    other=float("-inf")).to(tl.float32)
        n2 = tl.maximum(n2, tl.minimum(m2, z))  # (a NaN row is NaN through m2)
        m2 = max_nan(m2, z)
        fin = z > float("-inf")
        s2 += tl.where(fin, z, 0.0)
        c2 += fin.to(tl.float32)
    return tl.reduce(m2, 1, max_nan), tl.sum(s2, 1), tl.sum(c2, 1), m2, n2


@triton.jit
def stream_start(zg, z2, m, a1, beta, row_ok, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr,
                 BR: tl.constexpr, G: tl.constexpr):
    """(tau0, norm0, certified) [BR] for streamed rows, from the maxima zg and the second largest
    entries z2 [BR, G] of a partition into G groups (`row_max`). With t the threshold of the subset
    T of group maxima: where T holds the whole support, tau0 is t itself, norm0 T's norm, and the
    row is certified (no solver pass over the row is needed). T holds it where every group's second
    largest entry has x <= t: it bounds every entry T leaves out of its group, and
    x = (alpha - 1)(z - m) is monotone in z in float32 as computed here and by the passes, so f = 0
    outside T and F = F_T at t (T solved to the end: its solve stopped before MAX_ITER passes).
    Elsewhere tau0 is, for sparsemax and 1.5-entmax, the threshold of the larger subset T2 = T and the
    second largest entries less the solver's margin (`_below`): a lower bound (F_T <= F_T2 <= F) nearer
    the root on flat rows, whose support T misses (solved from t's, in registers); alpha-entmax starts
    from t (docs/kernels.md)."""
    t, n, it, xg = _group_threshold(zg, m, a1, beta, row_ok, tol, MODE, MAX_ITER)
    x2 = (z2 - m[:, None]) * a1[:, None]
    certified = row_ok & (tl.max(x2, 1) <= t) & (it < MAX_ITER)
    t2 = t
    if MODE != 2:  # (alpha-entmax: a solve on T2 costs a power an entry a step, more than the passes it saves)
        x12 = tl.reshape(tl.join(xg, x2), [BR, 2 * G])
        t2, _n, _it, _p = solve_tile(x12, beta, row_ok & (certified == 0), tol, _below(t, MODE), MODE, MAX_ITER)
    return tl.where(certified, t, _below(tl.maximum(t2, t), MODE)), n, certified


@triton.jit
def solve_stream(Z, rows, rmask, n_cols, stride, m, a1, beta, row_ok, tol, tau0,
                 MODE: tl.constexpr, MAX_ITER: tl.constexpr, BR: tl.constexpr,
                 BC: tl.constexpr):
    """Same iteration as solve_tile from tau0, each pass streaming the row in chunks of BC
    (re-reads hit L2: the rows in flight are a few MB)."""
    tau = tau0
    lo = tl.full([BR], -1.0, tl.float32)
    hi = tl.zeros([BR], tl.float32)
    out_tau = tau
    out_norm = tl.full([BR], 1.0, tl.float32)
    done = tl.where(row_ok, 0, 1)
    it = 0
    go = tl.sum(1 - done, 0) > 0
    while go:
        k2 = tl.zeros([BR, BC], tl.float32)
        a2 = tl.zeros([BR, BC], tl.float32)
        b2 = tl.zeros([BR, BC], tl.float32)
        mn2 = tl.full([BR, BC], float("inf"), tl.float32)
        for c0 in range(0, n_cols, BC):
            cols = c0 + tl.arange(0, BC)
            x = load_scaled(Z, rows, rmask, cols, n_cols, stride, m, a1)
            k_c, a_c, b_c, mn_c = stats_elems(x, tau, beta, MODE)
            k2 += k_c
            a2 += a_c
            if MODE != 0:
                b2 += b_c
            mn2 = tl.minimum(mn2, mn_c)
        k, a, b, mn = reduce_stats(k2, a2, b2, mn2, MODE)
        tau, done, out_tau, out_norm, lo, hi = newton_step(tau, done, out_tau, out_norm, lo, hi,
                                                       k, a, b, mn, beta, tol, MODE)
        it += 1
        go = (tl.sum(1 - done, 0) > 0) & (it < MAX_ITER)
    return out_tau, out_norm, it


@triton.jit
def probs(x, tau, norm, beta, MODE: tl.constexpr):
    """p = [x - tau]_+^beta / norm (MODE 0: beta = 1, 1: beta = 2, else the given beta)."""
    d = tl.maximum(x - tau[:, None], 0.0)
    if MODE == 0:
        p = d
    elif MODE == 1:
        p = d * d
    else:
        p = _pow_pos(d, beta[:, None])
    return p / norm[:, None]
