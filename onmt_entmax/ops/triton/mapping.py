"""Triton sparsemax / 1.5-entmax / alpha-entmax mappings: kernels, launch wrappers, autograd.

Forward: p = [(alpha - 1)(z - max z) - tau]_+^(1/(alpha-1)), tau from the sort-free solver.
Backward (Peters et al. 2019, Prop. 1): u = p^(2 - alpha) on the support,
    dz = u * g - (sum u g / sum u) u.
alpha-gradient (Correia et al. 2019), p~ = u / sum u:
    dalpha = sum_i g_i [(p_i - p~_i)/(alpha-1)^2 - (p_i log p_i - p~_i sum_j p_j log p_j)/(alpha-1)].
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from . import _solver as S
from ._config import cdiv, launch_config
from ._launch import launch

MODES = {"sparsemax": 0, "entmax15": 1, "bisect": 2}


@triton.jit
def _softmax_rows(p, z, m, soft, msk):
    """p with the rows flagged soft (alpha == 1) replaced by softmax(z) (m: row max)."""
    e = tl.exp(z - m[:, None])
    p = tl.where(soft[:, None], e / tl.sum(e, 1)[:, None], p)
    return tl.where(msk, p, 0.0)


@triton.jit
def _stored(p, LOG: tl.constexpr):
    """What a forward kernel writes: p, or (LOG) log p with -inf exactly where p = 0 (NaN stays NaN)."""
    if LOG:
        return tl.where(p > 0, tl.log(p), tl.where(p == 0, float("-inf"), p))
    return p


@triton.jit
def _row_block(ALPHA, n_rows, BR: tl.constexpr, MODE: tl.constexpr):
    """(rows [BR], their mask, alpha - 1 of each) of this program's block of rows."""
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    rmask = rows < n_rows
    return rows, rmask, S.row_alpha(ALPHA, rows, rmask, BR, MODE) - 1.0


@triton.jit
def map_tile(z, a1, msk, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr, BR: tl.constexpr,
             BC: tl.constexpr, GROUPS: tl.constexpr, GROUP_ITER: tl.constexpr):
    """(p, solver passes) for a [BR, BC] tile of whole rows held in registers (-inf outside the
    rows; msk: the entries that exist), a1 = alpha - 1 per row (0: softmax)."""
    beta = 1.0 / a1
    solve = tl.full([BR], 1, tl.int1)
    if MODE == 2:
        soft = a1 <= 0  # alpha == 1 rows: softmax
        solve = soft == 0
    m, zg = S.tile_max(z, BR, BC, GROUPS)
    nan_row = m != m
    row_ok = m > float("-inf")
    m = tl.where(row_ok, m, 0.0)
    tau0 = S.start(zg, m, a1, beta, row_ok & solve, tol, MODE, GROUP_ITER, GROUPS)
    x = (z - m[:, None]) * a1[:, None]
    # short alpha-entmax rows keep the pow terms of their last pass (no pow pass after)
    tau, norm, it, kept = S.solve_tile(x, beta, row_ok & solve, tol, tau0, MODE, MAX_ITER,
                                       MODE == 2 and BR > 1)
    if MODE == 2 and BR > 1:
        p = kept
    else:
        p = S.probs(x, tau, norm, beta, MODE)
    if MODE == 2:  # alpha == 1 rows (learned alpha): softmax
        if BR == 1:  # (a branch here costs long rows registers)
            p = _softmax_rows(p, z, m, soft, msk)
        elif tl.max(soft.to(tl.int32), 0) > 0:  # short rows: only where a row needs it
            p = _softmax_rows(p, z, m, soft, msk)
    # renormalise: float32 rounding of tau alone moves sum p by up to ~2e-6
    tot = tl.sum(p, 1)
    tot = tl.where(nan_row, float("nan"), tl.where(tot > 0, tot, 1.0))  # NaN row -> p NaN
    return p * (1.0 / tot)[:, None], it  # (one division a row, not one an entry)


@triton.jit(do_not_specialize=["n_rows"])  # n_rows only masks: one kernel for any count
def _fwd_kernel(Z, P, ALPHA, ITERS, n_rows, n_cols, stride, tol,
                MODE: tl.constexpr, MAX_ITER: tl.constexpr, BR: tl.constexpr,
                BC: tl.constexpr, SINGLE: tl.constexpr, GROUPS: tl.constexpr,
                GROUP_ITER: tl.constexpr, LOG: tl.constexpr):
    rows, rmask, a1 = _row_block(ALPHA, n_rows, BR, MODE)
    beta = 1.0 / a1
    roff = rows.to(tl.int64)[:, None] * stride
    if SINGLE:
        cols = tl.arange(0, BC)
        msk = rmask[:, None] & (cols[None, :] < n_cols)
        z = tl.load(Z + roff + cols[None, :], mask=msk, other=float("-inf")).to(tl.float32)
        p, it = map_tile(z, a1, msk, tol, MODE, MAX_ITER, BR, BC, GROUPS, GROUP_ITER)
        tl.store(P + roff + cols[None, :], _stored(p, LOG).to(P.dtype.element_ty), mask=msk)
    else:
        m, _s, _c, zg, z2 = S.row_max(Z, rows, rmask, n_cols, stride, BR, BC)
        nan_row = m != m
        row_ok = m > float("-inf")
        m = tl.where(row_ok, m, 0.0)
        tau0, norm0, certified = S.stream_start(zg, z2, m, a1, beta, row_ok, tol, MODE, GROUP_ITER, BR, BC)
        tau, norm, it = S.solve_stream(Z, rows, rmask, n_cols, stride, m, a1, beta, row_ok & (certified == 0),
                                       tol, tau0, MODE, MAX_ITER, BR, BC)
        norm = tl.where(certified, norm0, norm)
        tot2 = tl.zeros([BR, BC], tl.float32)
        for c0 in range(0, n_cols, BC):
            x = S.load_scaled(Z, rows, rmask, c0 + tl.arange(0, BC), n_cols, stride, m, a1)
            tot2 += S.probs(x, tau, norm, beta, MODE)
        tot = tl.sum(tot2, 1)
        norm = norm * tl.where(tot > 0, tot, 1.0)
        norm = tl.where(nan_row, float("nan"), norm)  # p = NaN on a row with a NaN
        for c0 in range(0, n_cols, BC):
            cols = c0 + tl.arange(0, BC)
            msk = rmask[:, None] & (cols[None, :] < n_cols)
            x = S.load_scaled(Z, rows, rmask, cols, n_cols, stride, m, a1)
            p = S.probs(x, tau, norm, beta, MODE)
            tl.store(P + roff + cols[None, :], _stored(p, LOG).to(P.dtype.element_ty), mask=msk)
    if ITERS is not None:
        tl.store(ITERS + tl.program_id(0), it)


# Short rows, BR a program, each on lanes of its own (S.lane_cols). n_cols and the strides are not
# specialised: as multiples of 16, Triton 3.6 vectorises the loads, which puts a row on lanes that
# are not adjacent (lane bits 0, 1, 3, 4 for 2 rows of 64), and its reduction over such a row
# shuffles across rows (xor 8, 4, 2, 1): wrong rows at 32, 48 and 64 columns (docs/kernels.md). These
# kernels are compute-bound; vector loads buy nothing here.
@triton.jit(do_not_specialize=["n_rows", "n_cols", "stride"])
def _fwd_lanes_kernel(Z, P, ALPHA, ITERS, n_rows, n_cols, stride, tol, MODE: tl.constexpr,
                      MAX_ITER: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                      LANES: tl.constexpr, LOG: tl.constexpr):
    rows, rmask, a1 = _row_block(ALPHA, n_rows, BR, MODE)
    r3, c3, msk3 = S.lane_cols(rows, rmask, n_cols, BR, BC, LANES)
    z = tl.load(Z + r3 * stride + c3, mask=msk3, other=float("-inf")).to(tl.float32)
    p, it = map_tile(tl.reshape(z, [BR, BC]), a1, tl.reshape(msk3, [BR, BC]), tol, MODE,
                     MAX_ITER, BR, BC, False, 1)
    tl.store(P + r3 * stride + c3, tl.reshape(_stored(p, LOG), msk3.shape).to(P.dtype.element_ty), mask=msk3)
    if ITERS is not None:
        tl.store(ITERS + tl.program_id(0), it)


@triton.jit
def u_of_p(p, a1, MODE: tl.constexpr):
    """u = p^(2 - alpha) on the support, and log2 p there (MODE 2; 0 elsewhere)."""
    if MODE == 0:
        u = (p > 0).to(tl.float32)
        lg = u
    elif MODE == 1:
        u = tl.sqrt(p)
        lg = u
    else:
        pos = p > 0
        lg = tl.where(pos, S.log2_pos(p), 0.0)
        u = tl.where(pos, tl.exp2((1.0 - a1[:, None]) * lg), 0.0)
    return u, lg


@triton.jit
def _bwd_elems(p, g, a1, MODE: tl.constexpr):
    """Elementwise terms: u, u g, g p, p log p, g p log p (the last three for MODE 2 only)."""
    u, lg = u_of_p(p, a1, MODE)
    if MODE == 2:
        plogp = p * lg * 0.6931471805599453
        return u, u * g, g * p, plogp, g * plogp
    else:
        return u, u * g, u, u, u


@triton.jit
def bwd_sums(p, g, a1, MODE: tl.constexpr):
    u, ug, gp, plp, gplp = _bwd_elems(p, g, a1, MODE)
    return tl.sum(u, 1), tl.sum(ug, 1), tl.sum(gp, 1), tl.sum(plp, 1), tl.sum(gplp, 1)


@triton.jit
def weighted_mean(sug, su):
    """q = sum u g / sum u (0 on a row without support)."""
    return tl.where(su > 0, sug / tl.where(su > 0, su, 1.0), 0.0)


@triton.jit
def alpha_grad(a1, q, sgp, splp, sgplp):
    """dalpha = (sum g p - q) / (alpha-1)^2 - (sum g p log p - q sum p log p) / (alpha-1)."""
    a1c = tl.maximum(a1, 1e-6)
    return (sgp - q) / (a1c * a1c) - (sgplp - q * splp) / a1c


@triton.jit(do_not_specialize=["n_rows"])  # n_rows only masks: one kernel for any count
def _bwd_kernel(P, G, DZ, ALPHA, DALPHA, n_rows, n_cols, stride_p, stride_g,
                MODE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, SINGLE: tl.constexpr):
    rows, rmask, a1 = _row_block(ALPHA, n_rows, BR, MODE)
    r64 = rows.to(tl.int64)[:, None]
    if SINGLE:
        cols = tl.arange(0, BC)
        msk = rmask[:, None] & (cols[None, :] < n_cols)
        p = tl.load(P + r64 * stride_p + cols[None, :], mask=msk, other=0.0).to(tl.float32)
        g = tl.load(G + r64 * stride_g + cols[None, :], mask=msk, other=0.0).to(tl.float32)
        su, sug, sgp, splp, sgplp = bwd_sums(p, g, a1, MODE)
    else:
        su2 = tl.zeros([BR, BC], tl.float32)
        sug2 = tl.zeros([BR, BC], tl.float32)
        sgp2 = tl.zeros([BR, BC], tl.float32)
        splp2 = tl.zeros([BR, BC], tl.float32)
        sgplp2 = tl.zeros([BR, BC], tl.float32)
        for c0 in range(0, n_cols, BC):
            cols = c0 + tl.arange(0, BC)
            msk = rmask[:, None] & (cols[None, :] < n_cols)
            p = tl.load(P + r64 * stride_p + cols[None, :], mask=msk, other=0.0).to(tl.float32)
            g = tl.load(G + r64 * stride_g + cols[None, :], mask=msk, other=0.0).to(tl.float32)
            a, b, c, d, e = _bwd_elems(p, g, a1, MODE)
            su2 += a
            sug2 += b
            sgp2 += c
            splp2 += d
            sgplp2 += e
        su = tl.sum(su2, 1)
        sug = tl.sum(sug2, 1)
        sgp = tl.sum(sgp2, 1)
        splp = tl.sum(splp2, 1)
        sgplp = tl.sum(sgplp2, 1)
    q = weighted_mean(sug, su)
    if SINGLE:
        u, _lg = u_of_p(p, a1, MODE)
        tl.store(DZ + r64 * n_cols + cols[None, :], (u * (g - q[:, None])).to(DZ.dtype.element_ty),
                 mask=msk)
    else:
        for c0 in range(0, n_cols, BC):
            cols = c0 + tl.arange(0, BC)
            msk = rmask[:, None] & (cols[None, :] < n_cols)
            p = tl.load(P + r64 * stride_p + cols[None, :], mask=msk, other=0.0).to(tl.float32)
            g = tl.load(G + r64 * stride_g + cols[None, :], mask=msk, other=0.0).to(tl.float32)
            u, _lg = u_of_p(p, a1, MODE)
            tl.store(DZ + r64 * n_cols + cols[None, :],
                     (u * (g - q[:, None])).to(DZ.dtype.element_ty), mask=msk)
    if MODE == 2:
        tl.store(DALPHA + rows, alpha_grad(a1, q, sgp, splp, sgplp), mask=rmask)


# (not specialised on lengths and strides: see _fwd_lanes_kernel)
@triton.jit(do_not_specialize=["n_rows", "n_cols", "stride_p", "stride_g"])
def _bwd_lanes_kernel(P, G, DZ, ALPHA, DALPHA, n_rows, n_cols, stride_p, stride_g,
                      MODE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                      LANES: tl.constexpr):
    rows, rmask, a1 = _row_block(ALPHA, n_rows, BR, MODE)
    r3, c3, msk3 = S.lane_cols(rows, rmask, n_cols, BR, BC, LANES)
    p = tl.reshape(tl.load(P + r3 * stride_p + c3, mask=msk3, other=0.0), [BR, BC]).to(tl.float32)
    g = tl.reshape(tl.load(G + r3 * stride_g + c3, mask=msk3, other=0.0), [BR, BC]).to(tl.float32)
    su, sug, sgp, splp, sgplp = bwd_sums(p, g, a1, MODE)
    q = weighted_mean(sug, su)
    u, _lg = u_of_p(p, a1, MODE)
    tl.store(DZ + r3 * n_cols + c3, tl.reshape(u * (g - q[:, None]), msk3.shape)
             .to(DZ.dtype.element_ty), mask=msk3)
    if MODE == 2:
        tl.store(DALPHA + rows, alpha_grad(a1, q, sgp, splp, sgplp), mask=rmask)


def _as_rows(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, tuple]:
    """Move `dim` last and flatten the rest: (n_rows, n_cols), plus what undoes it."""
    if dim == x.dim() - 1 and x.is_contiguous():  # the common case: views only (or none: a view
        return (x if x.dim() == 2 else x.view(-1, x.shape[-1])), x.shape  # costs host time at every call)
    xt = x.movedim(dim, -1)
    shape = xt.shape
    return xt.reshape(-1, shape[-1]).contiguous(), shape


def _alpha_rows(alpha, z: torch.Tensor, dim: int) -> torch.Tensor:
    """Per-row alpha (float32, n_rows) from a float or a tensor broadcastable to z (size 1 on dim)."""
    if not torch.is_tensor(alpha):
        return torch.full((z.numel() // max(z.shape[dim], 1),), float(alpha), device=z.device,
                          dtype=torch.float32)
    shape = list(z.shape)
    shape[dim] = 1
    a = alpha.to(device=z.device, dtype=torch.float32).expand(shape)
    return a.movedim(dim, -1).reshape(-1).contiguous()


def forward_rows(z2: torch.Tensor, mode: str, alpha_rows: torch.Tensor | None = None,
                 n_iter: int | None = None, tol: float = 1e-6, out_dtype=None,
                 config: dict | None = None, iters: torch.Tensor | None = None,
                 out: torch.Tensor | None = None, soft_rows: bool = True, log: bool = False) -> torch.Tensor:
    """p for a contiguous (n_rows, n_cols) CUDA tensor (written into `out` if given); log: log p
    instead, -inf exactly where p = 0 (computed in float32 before the cast to the output dtype).
    soft_rows=False promises alpha_rows > 1 everywhere (a float alpha): long rows may stream."""
    n_rows, n_cols = z2.shape
    p = out if out is not None else torch.empty_like(z2, dtype=out_dtype or z2.dtype,
                                                     memory_format=torch.contiguous_format)
    if z2.numel() == 0:
        return p
    m = MODES[mode]
    cfg = launch_config(n_cols, z2.element_size(), config, mode=m, soft_rows=soft_rows)
    max_iter = n_iter if n_iter is not None else (64 if m == 2 else 32)
    grid = (cdiv(n_rows, cfg["BR"]),)
    args = (z2, p, alpha_rows if alpha_rows is not None else z2, iters, n_rows, n_cols,
            z2.stride(0), tol)
    shape = {"MODE": m, "MAX_ITER": max_iter, "BR": cfg["BR"], "BC": cfg["BC"], "LOG": log}
    if cfg["LANES"]:
        launch(_fwd_lanes_kernel, grid, args, dict(shape, LANES=cfg["LANES"]), cfg["num_warps"],
               cfg["FP_FUSION"])
    else:
        launch(_fwd_kernel, grid, args, dict(shape, SINGLE=cfg["SINGLE"], GROUPS=cfg["GROUPS"],
                                             GROUP_ITER=cfg["GROUP_ITER"]),
               cfg["num_warps"], cfg["FP_FUSION"])
    return p


def backward_rows(p2: torch.Tensor, g2: torch.Tensor, mode: str,
                  alpha_rows: torch.Tensor | None = None, config: dict | None = None):
    """(dz, dalpha_rows or None) for contiguous (n_rows, n_cols) p and g."""
    n_rows, n_cols = p2.shape
    dz = torch.empty(p2.shape, device=p2.device, dtype=g2.dtype)
    m = MODES[mode]
    dalpha = torch.empty(n_rows, device=p2.device, dtype=torch.float32) if m == 2 else None
    if p2.numel() == 0:
        return dz, dalpha
    cfg = launch_config(n_cols, max(p2.element_size(), g2.element_size()), config, mode=m,
                        backward=True)
    grid = (cdiv(n_rows, cfg["BR"]),)
    args = (p2, g2, dz, alpha_rows if alpha_rows is not None else p2,
            dalpha if dalpha is not None else p2, n_rows, n_cols, p2.stride(0), g2.stride(0))
    if cfg["LANES"]:
        launch(_bwd_lanes_kernel, grid, args,
               {"MODE": m, "BR": cfg["BR"], "BC": cfg["BC"], "LANES": cfg["LANES"]},
               cfg["num_warps"], cfg["FP_FUSION"])
    else:
        launch(_bwd_kernel, grid, args,
               {"MODE": m, "BR": cfg["BR"], "BC": cfg["BC"], "SINGLE": cfg["SINGLE"]},
               cfg["num_warps"], cfg["FP_FUSION"])
    return dz, dalpha


def _forward(z, alpha, mode: str, dim: int, n_iter, log: bool = False):
    """(p, p as rows, alpha rows, row shape) for dim in [0, z.dim()); log: log p instead."""
    z2, shape = _as_rows(z, dim)
    a_rows = _alpha_rows(alpha, z, dim) if mode == "bisect" else None
    p2 = forward_rows(z2, mode, a_rows, n_iter, soft_rows=torch.is_tensor(alpha), log=log)
    p = p2 if len(shape) == 2 else p2.view(shape)  # (2-D: p2 has the shape already)
    return (p if dim == z.dim() - 1 else p.movedim(-1, dim)), p2, a_rows, shape


def _map(z, alpha, mode: str, dim: int, n_iter):
    """Autograd only where a gradient is wanted: decoding (no_grad, one call per attention layer
    and step) skips the Function's bookkeeping."""
    wants_grad = z.requires_grad or (torch.is_tensor(alpha) and alpha.requires_grad)
    if wants_grad and torch.is_grad_enabled():
        return _SparseMap.apply(z, alpha, mode, dim, n_iter)
    return _forward(z, alpha, mode, dim % z.dim(), n_iter)[0]


class _SparseMap(torch.autograd.Function):
    """p = mapping(z) along dim; first-order gradients w.r.t. z and a tensor alpha."""

    @staticmethod
    def forward(ctx, z, alpha, mode, dim, n_iter):
        dim = dim % z.dim()
        p, p2, a_rows, shape = _forward(z, alpha, mode, dim, n_iter)
        ctx.save_for_backward(p2, a_rows if a_rows is not None else p2.new_empty(0))
        ctx.mode, ctx.dim, ctx.shape, ctx.zshape = mode, dim, shape, z.shape
        ctx.alpha_is_tensor = torch.is_tensor(alpha)
        ctx.alpha_shape = alpha.shape if torch.is_tensor(alpha) else None
        ctx.alpha_dtype = alpha.dtype if torch.is_tensor(alpha) else None
        return p

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        p2, a_rows = ctx.saved_tensors
        g2, _ = _as_rows(g, ctx.dim)
        dz2, da_rows = backward_rows(p2, g2, ctx.mode, a_rows if ctx.mode == "bisect" else None)
        dz = dz2.view(ctx.shape)
        dz = dz if ctx.dim == len(ctx.zshape) - 1 else dz.movedim(-1, ctx.dim)
        dalpha = None
        if ctx.alpha_is_tensor and ctx.needs_input_grad[1]:
            shape = list(ctx.zshape)
            shape[ctx.dim] = 1
            moved = shape[:ctx.dim] + shape[ctx.dim + 1:] + [1]
            da = da_rows.reshape(moved).movedim(-1, ctx.dim)
            dalpha = da.sum_to_size(ctx.alpha_shape).to(ctx.alpha_dtype)
        return dz, dalpha, None, None, None


def sparsemax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """sparsemax(z) = [z - tau]_+ along dim (CUDA, Triton)."""
    return _map(z, 2.0, "sparsemax", dim, None)


def entmax15(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """1.5-entmax(z) = [z/2 - tau]_+^2 along dim, exact (CUDA, Triton)."""
    return _map(z, 1.5, "entmax15", dim, None)


def entmax_bisect(z: torch.Tensor, alpha=1.5, dim: int = -1, n_iter: int | None = None
                  ) -> torch.Tensor:
    """alpha-entmax(z) = [(alpha-1) z - tau]_+^(1/(alpha-1)) along dim, tau by Newton to
    |sum p - 1| <= 1e-6 then renormalised; alpha a float or a tensor broadcastable to z with
    size 1 along dim (differentiable)."""
    return _map(z, alpha, "bisect", dim, n_iter)


def log_probs(z: torch.Tensor, kind: str, alpha=None, dim: int = -1) -> torch.Tensor:
    """log pi(z) along dim, -inf exactly where pi(z) = 0, in one launch (no gradient): the mapping
    kernel stores log p instead of p. kind: sparsemax, entmax15 or entmax_bisect (alpha a float or
    a tensor broadcastable to z with size 1 along dim)."""
    mode = "bisect" if kind == "entmax_bisect" else kind
    alpha = {"sparsemax": 2.0, "entmax15": 1.5}.get(mode, alpha)
    return _forward(z, alpha, mode, dim % z.dim(), None, log=True)[0]
