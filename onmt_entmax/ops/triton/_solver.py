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
"""
import triton
import triton.language as tl

# MODE (a constexpr in every kernel): 0 sparsemax, 1 exact 1.5-entmax, 2 any alpha (Newton + tol).


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
    pos = d > 0
    return tl.where(pos, tl.exp2(e * tl.log2(tl.where(pos, d, 1.0))), 0.0)


@triton.jit
def _stats_elems(x, tau, beta, MODE: tl.constexpr):
    """Elementwise support terms at thresholds tau [BR]: ([d>0], d^beta, d^(beta-1), d on S
    (+inf off S)); row sums / min of these are the statistics."""
    d = x - tau[:, None]
    pos = d > 0
    dp = tl.where(pos, d, 0.0)
    kf = pos.to(tl.float32)
    mn = tl.where(pos, d, float("inf"))
    if MODE == 0:
        a = dp
        b = kf
    elif MODE == 1:
        a = dp * dp
        b = dp
    else:
        b = _pow_pos(dp, beta[:, None] - 1.0)
        a = b * dp
    return kf, a, b, mn


@triton.jit
def _stats(x, tau, beta, MODE: tl.constexpr):
    """Support statistics of one tile at thresholds tau [BR]: (k, A, B, min_S d)."""
    kf, a, b, mn = _stats_elems(x, tau, beta, MODE)
    if MODE == 0:
        k = tl.sum(kf, 1)
        return k, tl.sum(a, 1), k, tl.min(mn, 1)
    return tl.sum(kf, 1), tl.sum(a, 1), tl.sum(b, 1), tl.min(mn, 1)


@triton.jit
def _update(tau, done, out_tau, out_norm, lo, hi, k, a, b, mn, beta, tol, MODE: tl.constexpr):
    """One Newton-on-the-norm step; rows whose certificate holds are frozen (done).
    [lo, hi] brackets the root (sum p >= 1 at lo, < 1 at hi); for alpha > 2 (beta < 1) the norm
    is not convex: those rows bisect the bracket instead (and a Newton step that would leave the
    bracket is replaced by its midpoint)."""
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
        inside = (cand >= lo) & (cand <= hi) & (beta >= 1.0)  # False for NaN too
        cand = tl.where(inside, cand, 0.5 * (lo + hi))
        # bisection (alpha > 2) stops when the bracket no longer shrinks in float32
        exact = exact | ((hi - lo) <= 1.2e-7 * tl.abs(tau))
    tau = tl.where(live & (exact == 0), cand, tau)
    done = tl.where(live & exact, 1, done)
    return tau, done, out_tau, out_norm, lo, hi


@triton.jit
def solve_tile(x, beta, row_ok, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr):
    """Thresholds for a tile held in registers. x: [BR, BC] shifted-scaled scores
    (max 0 on valid rows, -inf for padding); returns (tau, norm, iterations)."""
    tau = tl.full(beta.shape, -1.0, tl.float32)
    lo = tau
    hi = tl.zeros(beta.shape, tl.float32)
    out_tau = tau
    out_norm = tl.full(beta.shape, 1.0, tl.float32)
    done = tl.where(row_ok, 0, 1)
    it = 0
    go = tl.sum(1 - done, 0) > 0
    while go:
        k, a, b, mn = _stats(x, tau, beta, MODE)
        tau, done, out_tau, out_norm, lo, hi = _update(tau, done, out_tau, out_norm, lo, hi,
                                                       k, a, b, mn, beta, tol, MODE)
        it += 1
        go = (tl.sum(1 - done, 0) > 0) & (it < MAX_ITER)
    return out_tau, out_norm, it


@triton.jit
def load_scaled(Z, rows, row_ok_mask, cols, n_cols, stride, m, a1):
    """x = (alpha - 1) (z - m) for one [BR, BC] chunk, -inf outside the row."""
    msk = row_ok_mask[:, None] & (cols[None, :] < n_cols)
    z = tl.load(Z + rows.to(tl.int64)[:, None] * stride + cols[None, :], mask=msk,
                other=float("-inf")).to(tl.float32)
    return (z - m[:, None]) * a1[:, None]


@triton.jit
def row_max(Z, rows, rmask, n_cols, stride, BR: tl.constexpr, BC: tl.constexpr):
    """Row maxima (and sum / count of finite entries) streamed over column chunks.
    Accumulates [BR, BC] tiles and reduces once after the loop (no reduction in the loop)."""
    m2 = tl.full([BR, BC], float("-inf"), tl.float32)
    s2 = tl.zeros([BR, BC], tl.float32)
    c2 = tl.zeros([BR, BC], tl.float32)
    for c0 in range(0, n_cols, BC):
        cols = c0 + tl.arange(0, BC)
        msk = rmask[:, None] & (cols[None, :] < n_cols)
        z = tl.load(Z + rows.to(tl.int64)[:, None] * stride + cols[None, :], mask=msk,
                    other=float("-inf")).to(tl.float32)
        m2 = tl.maximum(m2, z)
        fin = z > float("-inf")
        s2 += tl.where(fin, z, 0.0)
        c2 += fin.to(tl.float32)
    return tl.max(m2, 1), tl.sum(s2, 1), tl.sum(c2, 1)


@triton.jit
def solve_stream(Z, rows, rmask, n_cols, stride, m, a1, beta, row_ok, tol,
                 MODE: tl.constexpr, MAX_ITER: tl.constexpr, BR: tl.constexpr,
                 BC: tl.constexpr):
    """Same iteration as solve_tile, each pass streaming the row in chunks of BC
    (re-reads hit L2: the rows in flight are a few MB)."""
    tau = tl.full([BR], -1.0, tl.float32)
    lo = tau
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
            k_c, a_c, b_c, mn_c = _stats_elems(x, tau, beta, MODE)
            k2 += k_c
            a2 += a_c
            if MODE != 0:
                b2 += b_c
            mn2 = tl.minimum(mn2, mn_c)
        k = tl.sum(k2, 1)
        a = tl.sum(a2, 1)
        if MODE == 0:
            b = k
        else:
            b = tl.sum(b2, 1)
        mn = tl.min(mn2, 1)
        tau, done, out_tau, out_norm, lo, hi = _update(tau, done, out_tau, out_norm, lo, hi,
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
