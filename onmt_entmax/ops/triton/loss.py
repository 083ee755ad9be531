"""Fused Fenchel-Young losses (sparsemax, 1.5-entmax, alpha-entmax, alpha-ReLU) in Triton.

Forward, one program per row tile: threshold tau (sort-free solver, see _solver.py), then

    L(z, y) = sum_{p>0} p (z - m) - (z_y - m) + (1 - sum p^alpha) / (alpha (alpha - 1)),

m = max z (alpha-ReLU: p = [(alpha-1) z - tau]_+^(1/(alpha-1)) with its fixed tau, and
L = sum p^alpha / alpha - z_y + (1 + alpha tau) / (alpha (alpha - 1))). FY label smoothing
adds eps (z_y - mean_u z) - H_alpha(q), q = (1-eps) e_y + eps u, u uniform over finite logits.
Per-row scalars are kept (m, tau, norm, n_finite, dL/dalpha, support size |{p > 0}|); the support
size is what training reports count (`fy_loss(..., return_support=True)`): no second mapping pass.

Gradient in the forward (where `writes_grad` says so; Liger-Kernel's fused cross-entropy does the same
for softmax): dL/dz = (p - q) times the incoming gradient, which the forward does not know, but for the
"mean" that a caller differentiates as it is, it is 1. So the pass that sums the loss terms also writes
dz = (p - q) w into a buffer of the logits' dtype (w: the weight of a kept row in the reduced loss, so
w is computed first), and the backward kernel leaves every row whose incoming gradient is exactly 1 as
it is (a device-side test, no host synchronisation): the logits are read once and the gradient written
once. The buffer becomes the logits' gradient (no copy, the peak memory of a backward that allocates
it); rows with another incoming gradient, and a second backward through a retained graph, recompute
p from the saved row scalars and logits.

Backward otherwise, an elementwise kernel: recompute p from the row scalars in one pass and write
dz = (p - q) g_row (zero on ignore_index rows): the logits are read by the forward and again by the
backward.

Around them, single-program kernels check the targets (each in [0, V) or ignore_index; a row with
another target is treated as ignored and fails an asynchronous device assertion, as F.cross_entropy's
does), keep the weight w of a kept row (1, or 1 / the kept rows) and, for "sum" / "mean", reduce the
row losses in a fixed order; the backward reads g_row = g w inside its kernel. A loss call is two or
three kernels and one assertion forward and one kernel backward: checks and reductions written as
torch calls would be ~20 launches, whose host cost would exceed the kernels' time.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from .._common import device_check
from . import _solver as S
from ._config import cdiv, launch_config, next_pow2
from ._launch import launch

_KINDS = {"sparsemax": 0, "entmax15": 1, "entmax_bisect": 2, "alpha_relu": 3}
_REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}
_NSTAT = 6  # m, tau, norm, n_finite, dL/dalpha, support size
NSTAT = tl.constexpr(_NSTAT)
# 16-bit sparsemax / 1.5-entmax rows longer than GRAD_SINGLE_MAX stream in chunks of GRAD_CHUNK (re-read from
# L2) when the forward writes the gradient too: held in registers, the solver's and the gradient's terms spill;
# chunks of 2048 on 8 warps ran faster than of 4096 (docs/kernels.md)
GRAD_SINGLE_MAX = 16384
GRAD_CHUNK = 2048


@triton.jit
def _loss_elems(x, tau, norm, beta, al, MODE: tl.constexpr):
    """Elementwise terms: p (z - m), p^alpha, p^alpha log p (zero off the support; alpha-ReLU:
    p^alpha is NaN at a NaN logit), [p > 0], and p itself.
    alpha-entmax / alpha-ReLU: with d = [x - tau]_+ and p = d^beta / norm, alpha beta = beta + 1
    gives p^alpha = p d norm^(1 - alpha) and log2 p = beta log2 d - log2 norm: one log2 and one
    exp2 per entry."""
    zm = x * beta[:, None]  # z - m  (alpha-ReLU: z)
    if MODE == 0:
        p = S.probs(x, tau, norm, beta, MODE)
        pa = p * p
        palp = pa  # unused (dL/dalpha is for MODE 2)
    elif MODE == 1:
        p = S.probs(x, tau, norm, beta, MODE)
        pa = p * tl.sqrt(p)
        palp = pa
    else:
        d = x - tau[:, None]
        pos = d > 0
        lg = S.log2_pos(d)
        lnorm = tl.log2(norm)[:, None]
        p = tl.where(pos, tl.exp2(beta[:, None] * lg - lnorm), 0.0)
        pa = p * tl.where(pos, d, 0.0) * tl.exp2((1.0 - al[:, None]) * lnorm)
        palp = pa * (beta[:, None] * lg - lnorm) * 0.6931471805599453
        if MODE == 3:  # a NaN logit makes the loss NaN (alpha-ReLU is elementwise: its gradient
            pa = tl.where(x != x, x, pa)  # is NaN at that entry only, in _fy_bwd_kernel)
    pos = p > 0
    return tl.where(pos, p * zm, 0.0), pa, palp, pos.to(tl.float32), p


@triton.jit
def _grad_elems(x, p, cols, y, w, eps, nq, SMOOTH: tl.constexpr, MODE: tl.constexpr):
    """dz = (p - q) w [BR, BC], q = (1 - eps) e_y (+ eps / nq on the finite logits: x > -inf); w is 0 on
    the rows not kept, whose x the kernels load as -inf (p = q = 0 there: dz = 0 without a select).
    alpha-ReLU: NaN where the logit is NaN (the hardware max dropped it from p)."""
    if MODE == 3:
        p = tl.where(x != x, x, p)
    q = tl.where(cols[None, :] == y[:, None], 1.0 - eps, 0.0)
    if SMOOTH:
        q += tl.where(x > float("-inf"), eps / nq[:, None], 0.0)
    return (p - q) * w[:, None]


@triton.jit
def _smooth_entropy(n, eps, al):
    """H_alpha(q) and dH_alpha(q)/dalpha for q = (1-eps) e_y + eps/n over n classes."""
    big = (1.0 - eps) + eps / n
    small = eps / n
    lb = tl.log(big)
    ls = tl.log(tl.maximum(small, 1e-38))
    ba = tl.exp(al * lb)
    sa = tl.where(small > 0, tl.exp(al * ls), 0.0)
    s_a = ba + (n - 1.0) * sa
    s_alog = ba * lb + (n - 1.0) * sa * ls
    h = al * (al - 1.0)
    return (1.0 - s_a) / h, -s_alog / h - (1.0 - s_a) * (2.0 * al - 1.0) / (h * h)


@triton.jit(do_not_specialize=["n_rows"])  # n_rows only masks: one kernel for any count
def _fy_fwd_kernel(Z, Y, LOSS, STATS, ALPHA, DZ, W, n_rows, n_cols, stride, ignore_index, eps, relu_tau,
                   tol, MODE: tl.constexpr, SMOOTH: tl.constexpr, MAX_ITER: tl.constexpr,
                   BR: tl.constexpr, BC: tl.constexpr, SINGLE: tl.constexpr,
                   GROUPS: tl.constexpr, GROUP_ITER: tl.constexpr, GRAD: tl.constexpr):
    """Row losses and statistics; GRAD: also dz = (p - q) w into DZ (contiguous), w = W[0] the weight of
    a kept row in the reduced loss (the backward then has nothing left to do where its g is 1)."""
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    rmask = rows < n_rows
    y = tl.load(Y + rows, mask=rmask, other=ignore_index)
    # a target outside [0, V) reads nothing (the reduce kernel's check reports it)
    keep = rmask & (y != ignore_index) & (y >= 0) & (y < n_cols)
    al = S.row_alpha(ALPHA, rows, rmask, BR, MODE)
    a1 = al - 1.0
    beta = 1.0 / a1
    r64 = rows.to(tl.int64)
    if SINGLE:
        cols = tl.arange(0, BC)
        msk = keep[:, None] & (cols[None, :] < n_cols)
        z = tl.load(Z + r64[:, None] * stride + cols[None, :], mask=msk,
                    other=float("-inf")).to(tl.float32)
        if SMOOTH:  # mean of the finite logits, for the uniform part of q
            fin = z > float("-inf")
            zsum = tl.sum(tl.where(fin, z, 0.0), 1)
            nfin = tl.sum(fin.to(tl.float32), 1)
        else:
            zsum = tl.zeros([BR], tl.float32)
            nfin = tl.full([BR], 1.0, tl.float32)
        m, zg = S.tile_max(z, BR, BC, GROUPS)
    else:
        m, zsum, nfin, zg, z2 = S.row_max(Z, rows, keep, n_cols, stride, BR, BC)
        if not SMOOTH:  # (unused: the compiler drops their accumulation from the max pass)
            zsum = tl.zeros([BR], tl.float32)
            nfin = tl.full([BR], 1.0, tl.float32)
    # a NaN logit: NaN loss and a NaN gradient row, as the torch reference (alpha-ReLU, which
    # does not use m: through its sum of p^alpha, see _loss_elems)
    nan_row = (m != m) & (MODE != 3)
    row_ok = m > float("-inf")
    if MODE == 3:
        m = tl.zeros([BR], tl.float32)
        tau = tl.zeros([BR], tl.float32) + relu_tau
        norm = tl.full([BR], 1.0, tl.float32)
    else:
        m = tl.where(row_ok, m, 0.0)
    if MODE != 3:
        if SINGLE:
            tau0 = S.start(zg, m, a1, beta, row_ok & keep, tol, MODE, GROUP_ITER, GROUPS)
        else:  # (rows whose group maxima hold the support take no solver pass over the row)
            tau0, norm0, certified = S.stream_start(zg, z2, m, a1, beta, row_ok & keep, tol, MODE,
                                                      GROUP_ITER, BR, BC)
    nq = tl.maximum(nfin, 1.0)
    if GRAD:  # NaN rows: a NaN gradient row (the backward's p / norm with norm NaN); 0 on rows not kept
        w = tl.where(keep, tl.where(nan_row, float("nan"), tl.zeros([BR], tl.float32) + tl.load(W)), 0.0)
    else:
        w = beta
    if SINGLE:
        x = (z - m[:, None]) * a1[:, None]
        if MODE != 3:
            tau, norm, _it, _p = S.solve_tile(x, beta, row_ok & keep, tol, tau0, MODE, MAX_ITER)
        e1, e2, e3, e4, p = _loss_elems(x, tau, norm, beta, al, MODE)
        if GRAD:
            dz = _grad_elems(x, p, cols, y, w, eps, nq, SMOOTH, MODE)
            tl.store(DZ + r64[:, None] * n_cols + cols[None, :], dz.to(DZ.dtype.element_ty),
                     mask=rmask[:, None] & (cols[None, :] < n_cols), eviction_policy="evict_first")
        pz = tl.sum(e1, 1)
        spa = tl.sum(e2, 1)
        spalp = tl.sum(e3, 1)
        nnz = tl.sum(e4, 1)
    else:
        if MODE != 3:
            tau, norm, _it = S.solve_stream(Z, rows, keep, n_cols, stride, m, a1, beta,
                                            row_ok & keep & (certified == 0), tol, tau0, MODE, MAX_ITER, BR, BC)
            norm = tl.where(certified, norm0, norm)
        pz2 = tl.zeros([BR, BC], tl.float32)
        spa2 = tl.zeros([BR, BC], tl.float32)
        spalp2 = tl.zeros([BR, BC], tl.float32)
        nnz2 = tl.zeros([BR, BC], tl.float32)
        for c0 in range(0, n_cols, BC):
            cols = c0 + tl.arange(0, BC)
            x = S.load_scaled(Z, rows, keep, cols, n_cols, stride, m, a1)
            e1, e2, e3, e4, p = _loss_elems(x, tau, norm, beta, al, MODE)
            if GRAD:
                dz = _grad_elems(x, p, cols, y, w, eps, nq, SMOOTH, MODE)
                tl.store(DZ + r64[:, None] * n_cols + cols[None, :], dz.to(DZ.dtype.element_ty),
                         mask=rmask[:, None] & (cols[None, :] < n_cols), eviction_policy="evict_first")
            pz2 += e1
            spa2 += e2
            spalp2 += e3
            nnz2 += e4
        pz = tl.sum(pz2, 1)
        spa = tl.sum(spa2, 1)
        spalp = tl.sum(spalp2, 1)
        nnz = tl.sum(nnz2, 1)
    ysafe = tl.where(keep, y, 0)
    zy = tl.load(Z + r64 * stride + ysafe, mask=keep, other=0.0).to(tl.float32) - m
    h = al * a1
    if MODE == 3:
        loss = spa / al - zy + (1.0 + al * relu_tau) / h
    else:
        loss = pz - zy + (1.0 - spa) / h
        loss = tl.where(row_ok, loss, float("inf"))
    dal = -spalp / h - (1.0 - spa) * (2.0 * al - 1.0) / (h * h)
    if SMOOTH:
        mean_z = zsum / nq - m
        hq, dhq = _smooth_entropy(nq, eps, al)
        loss = loss + eps * (zy - mean_z) - hq
        dal = dal - dhq
    loss = tl.where(nan_row, float("nan"), loss)
    norm = tl.where(nan_row, float("nan"), norm)
    tl.store(LOSS + rows, tl.where(keep, loss, 0.0), mask=rmask)
    sp = STATS + r64 * NSTAT
    tl.store(sp + 0, m, mask=rmask)
    tl.store(sp + 1, tau, mask=rmask)
    tl.store(sp + 2, norm, mask=rmask)
    tl.store(sp + 3, nq, mask=rmask)
    tl.store(sp + 4, dal, mask=rmask)
    tl.store(sp + 5, tl.where(keep, nnz, 0.0), mask=rmask)


@triton.jit
def _bwd_tile(Z, DZ, rows, todo, keep, y, g, m, tau, norm, nq, a1, beta, cols, n_cols, stride, eps,
              MODE: tl.constexpr, SMOOTH: tl.constexpr):
    """dz = (p - q) g of the [BR, BC] tile at `cols` of the rows `todo`, recomputing
    p = [(alpha-1)(z - m) - tau]_+^beta / norm from the row statistics."""
    r64 = rows.to(tl.int64)
    cmask = cols[None, :] < n_cols
    z = tl.load(Z + r64[:, None] * stride + cols[None, :], mask=(keep & todo)[:, None] & cmask,
                other=float("-inf")).to(tl.float32)
    x = (z - m[:, None]) * a1[:, None]
    p = S.probs(x, tau, norm, beta, MODE)
    dz = _grad_elems(x, p, cols, y, g, eps, nq, SMOOTH, MODE)  # (g: 0 on the rows not kept)
    tl.store(DZ + r64[:, None] * n_cols + cols[None, :], dz.to(DZ.dtype.element_ty),
             mask=todo[:, None] & cmask)


@triton.jit(do_not_specialize=["n_rows"])  # n_rows only masks: one kernel for any count
def _fy_bwd_kernel(Z, Y, G, W, STATS, ALPHA, DZ, n_rows, n_cols, stride, ignore_index, eps,
                   MODE: tl.constexpr, SMOOTH: tl.constexpr, G_ONE: tl.constexpr, BR: tl.constexpr,
                   BC: tl.constexpr, SKIP_ONE: tl.constexpr):
    """dz = (p - q) g_row, recomputing p = [(alpha-1)(z - m) - tau]_+^beta / norm from the saved row
    statistics; g_row = G[row], or with G_ONE (a reduced loss) g_row = G[0] W[0] (W: the reduce
    kernel's weight of a kept row). Grid (row tiles, column tiles); SKIP_ONE: grid (row tiles,), each
    program walking its rows' columns, and rows whose incoming G is exactly 1 left as they are (DZ holds
    the forward's (p - q) w there)."""
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    rmask = rows < n_rows
    y = tl.load(Y + rows, mask=rmask, other=ignore_index)
    keep = rmask & (y != ignore_index) & (y >= 0) & (y < n_cols)
    r64 = rows.to(tl.int64)
    if G_ONE:
        g_in = tl.zeros([BR], tl.float32) + tl.load(G).to(tl.float32)
        g = g_in * tl.load(W)
    else:
        g_in = tl.load(G + rows, mask=rmask, other=0.0).to(tl.float32)
        g = g_in
    g = tl.where(keep, g, 0.0)
    todo = rmask
    if SKIP_ONE:
        todo = rmask & (g_in != 1.0)
    sp = STATS + r64 * NSTAT
    m = tl.load(sp + 0, mask=todo, other=0.0)
    tau = tl.load(sp + 1, mask=todo, other=0.0)
    norm = tl.load(sp + 2, mask=todo, other=1.0)
    nq = tl.load(sp + 3, mask=todo, other=1.0)
    al = S.row_alpha(ALPHA, rows, todo, BR, MODE)
    a1 = al - 1.0
    beta = 1.0 / a1
    if SKIP_ONE:
        if tl.sum(todo.to(tl.int32), 0) > 0:
            for c0 in range(0, n_cols, BC):
                _bwd_tile(Z, DZ, rows, todo, keep, y, g, m, tau, norm, nq, a1, beta, c0 + tl.arange(0, BC),
                          n_cols, stride, eps, MODE, SMOOTH)
    else:
        _bwd_tile(Z, DZ, rows, todo, keep, y, g, m, tau, norm, nq, a1, beta,
                  tl.program_id(1) * BC + tl.arange(0, BC), n_cols, stride, eps, MODE, SMOOTH)


@triton.jit(do_not_specialize=["n_rows", "n_cols", "ignore_index"])
def _fy_reduce_kernel(LOSS, Y, OUT, AUX, n_rows, n_cols, ignore_index, REDUCE: tl.constexpr,
                      BLOCK: tl.constexpr, PART: tl.constexpr):
    """One program, the rows in a fixed order. AUX[1] = 1 if every target is ignore_index or in
    [0, n_cols), else 0. REDUCE 1 / 2 ("sum" / "mean"): OUT[0] = w sum_kept LOSS (in OUT's dtype),
    AUX[0] = w = 1 / max(1, kept rows) for the mean (a mean over no rows is 0), else 1.
    PART 0: all of it; 1: only AUX (before a forward that writes the gradient, which needs w);
    2: only OUT, with AUX[0]'s w (after that forward)."""
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    bad = tl.zeros([BLOCK], tl.int32)
    for start in range(0, n_rows, BLOCK):
        rows = start + offs
        rmask = rows < n_rows
        y = tl.load(Y + rows, mask=rmask, other=ignore_index)
        kept = rmask & (y != ignore_index)
        if PART != 2:
            bad += (kept & ((y < 0) | (y >= n_cols))).to(tl.int32)
            count += kept.to(tl.float32)
        if REDUCE > 0 and PART != 1:
            total += tl.load(LOSS + rows, mask=kept, other=0.0)
    if PART != 2:
        tl.store(AUX + 1, (tl.sum(bad, 0) == 0).to(tl.float32))  # (the assertion reads it as is: no compare)
        w = tl.sum(count, 0) * 0.0 + 1.0
        if REDUCE == 2:
            w = 1.0 / tl.maximum(tl.sum(count, 0), 1.0)
        tl.store(AUX, w)
    else:
        w = tl.load(AUX)
    if REDUCE > 0 and PART != 1:
        tl.store(OUT, (tl.sum(total, 0) * w).to(OUT.dtype.element_ty))


def reduce_rows(loss: torch.Tensor, target: torch.Tensor, n_cols: int, ignore_index: int, reduction: str,
                dtype: torch.dtype, check: bool = True, part: int = 0,
                aux: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Check the targets (an asynchronous device assertion on CUDA; `check=False`: only the flag) and
    reduce the row losses: (the loss: per row as given for "none", else 0-d in `dtype`; AUX (2,)
    float32: the weight of a kept row in the reduced loss (1 for "none"), and the flag, 1 if every
    target is fine). part 1: only AUX (`loss` unread; the loss returned is None); part 2: only the
    loss, from the `aux` of part 1."""
    mode = _REDUCTIONS[reduction]
    if aux is None:
        aux = torch.empty(2, device=target.device, dtype=torch.float32)
    if part == 1:
        out = None
    else:
        out = loss if mode == 0 else torch.empty((), device=loss.device, dtype=dtype)
    if part == 2 and mode == 0:
        return out, aux
    launch(_fy_reduce_kernel, (1,), (loss if loss is not None else aux, target, out if out is not None else aux, aux,
                                     target.shape[0], n_cols, ignore_index),
           {"REDUCE": mode, "BLOCK": 1024, "PART": part}, 4)
    if check and part != 2:
        device_check(aux[1], f"target contains a class index outside [0, {n_cols}) "
                             f"(and it is not ignore_index={ignore_index})")
    return out, aux


def _alpha_rows(alpha, n_rows: int, device) -> torch.Tensor:
    """float32 alpha per row from a float, a 0-d / 1-element tensor or one per row."""
    if torch.is_tensor(alpha):
        a = alpha.detach().to(device=device, dtype=torch.float32).reshape(-1)
        return a.expand(n_rows).contiguous() if a.numel() == 1 else a.contiguous()
    return torch.full((n_rows,), float(alpha), device=device, dtype=torch.float32)


def fy_loss_rows(z: torch.Tensor, target: torch.Tensor, kind: str, alpha=1.5, tau: float = 0.0,
                 ignore_index: int = -100, eps: float = 0.0, config: dict | None = None,
                 max_iter: int = 64, tol: float = 1e-6, dz: torch.Tensor | None = None,
                 weight: torch.Tensor | None = None):
    """Forward kernel only: (per-row loss float32 (N,), row stats (N, _NSTAT), alpha rows). With `dz`
    (contiguous (N, V)) and `weight` (the AUX of `reduce_rows(..., part=1)`), the same pass also writes
    the gradient of the reduced loss for an incoming gradient of 1, (p - q) weight[0], into dz."""
    n_rows, n_cols = z.shape
    mode = _KINDS[kind]
    loss = torch.empty(n_rows, device=z.device, dtype=torch.float32)
    stats = torch.empty(n_rows, _NSTAT, device=z.device, dtype=torch.float32)
    a_rows = _alpha_rows(alpha, n_rows, z.device) if mode >= 2 else None
    if n_rows == 0:
        return loss, stats, a_rows
    grad = dz is not None
    if grad and config is None and mode in (0, 1) and z.element_size() <= 2 and n_cols > GRAD_SINGLE_MAX:
        config = {"SINGLE_MAX": GRAD_SINGLE_MAX, "CHUNK": GRAD_CHUNK}
    cfg = launch_config(n_cols, z.element_size(), config, mode=mode, lanes=False)
    grid = (cdiv(n_rows, cfg["BR"]),)
    launch(_fy_fwd_kernel, grid, (z, target, loss, stats, a_rows if a_rows is not None else z,
                                  dz if grad else z, weight if grad else stats,
                                  n_rows, n_cols, z.stride(0), ignore_index, float(eps),
                                  float(tau), tol),
           {"MODE": mode, "SMOOTH": eps > 0, "MAX_ITER": max_iter if mode != 1 else 32,
            "BR": cfg["BR"], "BC": cfg["BC"], "SINGLE": cfg["SINGLE"],
            "GROUPS": 0 if mode == 3 else cfg["GROUPS"], "GROUP_ITER": cfg["GROUP_ITER"], "GRAD": grad},
           cfg["num_warps"], cfg["FP_FUSION"])
    return loss, stats, a_rows


def fy_grad_rows(z, target, g_rows, stats, a_rows, kind: str, ignore_index: int, eps: float,
                 bwd_block: int = 1024, out: torch.Tensor | None = None,
                 weight: torch.Tensor | None = None, skip_one: bool = False) -> torch.Tensor:
    """Backward kernel only: dz (N, V) in z's dtype (written into `out` if given). `g_rows`: the
    gradient of each row's loss (N,), or with `weight` (the reduce kernel's AUX) that of the reduced
    loss (one element), each kept row's being g_rows weight[0]. skip_one: `out` holds the forward's
    gradient for an incoming gradient of 1 (`fy_loss_rows(..., dz=out)`); rows whose incoming gradient
    is exactly 1 are not read or written (a device-side test: no host synchronisation)."""
    n_rows, n_cols = z.shape
    dz = out if out is not None else torch.empty((n_rows, n_cols), device=z.device, dtype=z.dtype)
    if dz.numel() == 0:
        return dz
    bc = min(next_pow2(n_cols), bwd_block)
    br = max(1, bwd_block // bc)
    # skip_one: a program walks its rows' columns, so where every g is 1 the launch is ~N / br empty programs
    grid = (cdiv(n_rows, br),) if skip_one else (cdiv(n_rows, br), cdiv(n_cols, bc))
    launch(_fy_bwd_kernel, grid, (z, target, g_rows, weight if weight is not None else g_rows, stats,
                                  a_rows if a_rows is not None else z, dz, n_rows, n_cols, z.stride(0),
                                  ignore_index, float(eps)),
           {"MODE": _KINDS[kind], "SMOOTH": eps > 0, "G_ONE": weight is not None, "BR": br, "BC": bc,
            "SKIP_ONE": skip_one}, 4,
           fp_fusion=True)  # elementwise: no reduction across lanes
    return dz


class _FYLoss(torch.autograd.Function):
    """grad_in_forward: the forward also writes the logits' gradient for an incoming gradient of 1
    (Liger-Kernel's fused cross-entropy does the same): the backward then only recomputes the rows whose
    incoming gradient is not 1. The buffer is handed to autograd by the first backward (no copy: it
    becomes the logits' .grad); a second backward through a retained graph recomputes from the saved
    logits and row statistics."""

    @staticmethod
    def forward(ctx, z, alpha, target, kind, tau, ignore_index, eps, reduction, grad_in_forward):
        z = z.contiguous()
        dz = aux = None
        if grad_in_forward:  # the weight of a kept row first: the forward's gradient needs it
            _, aux = reduce_rows(None, target, z.shape[1], ignore_index, reduction, z.dtype, part=1)
            dz = torch.empty_like(z)
        rows, stats, a_rows = fy_loss_rows(z, target, kind, alpha, tau, ignore_index, eps, dz=dz, weight=aux)
        loss, aux = reduce_rows(rows, target, z.shape[1], ignore_index, reduction, z.dtype,
                                part=2 if grad_in_forward else 0, aux=aux)
        ctx.dz = dz
        ctx.save_for_backward(z, target, stats, a_rows if a_rows is not None else stats[:0], aux)
        ctx.kind, ctx.ignore_index, ctx.eps, ctx.reduced = kind, ignore_index, eps, reduction != "none"
        ctx.alpha_shape = alpha.shape if torch.is_tensor(alpha) else None
        support = stats[:, 5]
        ctx.mark_non_differentiable(support)
        ctx.set_materialize_grads(False)  # no zeros launched for the support's (unused) gradient
        return loss, support

    @staticmethod
    @once_differentiable
    def backward(ctx, g, _g_support):
        if g is None:
            return None, None, None, None, None, None, None, None, None
        z, target, stats, a_rows, aux = ctx.saved_tensors
        out, ctx.dz = ctx.dz, None  # (no reference left here: autograd may take it as .grad)
        a_rows = a_rows if ctx.kind in ("entmax_bisect", "alpha_relu") else None
        g = g.contiguous() if ctx.reduced else g.contiguous().to(torch.float32)
        dz = None
        if ctx.needs_input_grad[0]:
            dz = fy_grad_rows(z, target, g, stats, a_rows, ctx.kind, ctx.ignore_index, ctx.eps, out=out,
                              weight=aux if ctx.reduced else None, skip_one=out is not None)
        dalpha = None
        if ctx.needs_input_grad[1] and ctx.kind == "entmax_bisect":
            g_rows = g.float() * aux[0] if ctx.reduced else g
            keep = (target != ctx.ignore_index).to(torch.float32)
            da_rows = stats[:, 4] * g_rows * keep
            dalpha = (da_rows.sum().reshape(ctx.alpha_shape) if _numel(ctx.alpha_shape) == 1
                      else da_rows.reshape(ctx.alpha_shape))
        return dz, dalpha, None, None, None, None, None, None, None


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def writes_grad(logits: torch.Tensor, kind: str, reduction: str) -> bool:
    """Whether the forward writes the logits' gradient (where it will be needed): for the "mean", the
    loss a caller differentiates as it is (`loss.backward()`: an incoming gradient of 1, so the backward
    has nothing left to do). "sum" and "none" are what callers scale or weight further (both toolkits
    divide the summed loss by their normalization): there a gradient written in the forward would be
    written again by the backward, which costs more than the backward's recompute alone. Float32
    alpha-entmax keeps the recompute too: its long rows stream through the forward's solver passes
    from L2, and float32 writes alongside them slow that forward by about what a backward costs."""
    return reduction == "mean" and (logits.element_size() <= 2 or kind != "entmax_bisect")


def fy_loss(logits: torch.Tensor, target: torch.Tensor, kind: str, alpha=1.5, tau: float = 0.0,
            ignore_index: int = -100, label_smoothing: float = 0.0, return_support: bool = False,
            reduction: str = "none"):
    """Fenchel-Young loss of (N, V) logits with int64 targets; autograd to logits and alpha.
    reduction "none": per row (N,) float32; "sum" / "mean" (over the rows whose target is not
    ignore_index): 0-d in the logits' dtype. A target neither in [0, V) nor ignore_index fails a
    device assertion (asynchronous on CUDA). ``return_support``: also the number of nonzero
    probabilities of each row (N,) float32 (0 on ignore_index rows), as (loss, that).
    Where the logits' gradient will be needed (grad mode on, logits requiring grad) and `writes_grad`
    says so, the forward writes it for an incoming gradient of 1 (one (N, V) buffer in the logits'
    dtype, which becomes their gradient: peak memory as without it, the backward allocating that
    tensor anyway)."""
    grad_in_forward = torch.is_grad_enabled() and logits.requires_grad and writes_grad(logits, kind, reduction)
    loss, support = _FYLoss.apply(logits, alpha, target.contiguous(), kind, float(tau), int(ignore_index),
                                  float(label_smoothing), reduction, grad_in_forward)
    return (loss, support) if return_support else loss


def sparsemax_loss(logits, target, ignore_index: int = -100, label_smoothing: float = 0.0):
    """Per-row sparsemax loss (N,)."""
    return fy_loss(logits, target, "sparsemax", 2.0, 0.0, ignore_index, label_smoothing)


def entmax15_loss(logits, target, ignore_index: int = -100, label_smoothing: float = 0.0):
    """Per-row 1.5-entmax loss (N,)."""
    return fy_loss(logits, target, "entmax15", 1.5, 0.0, ignore_index, label_smoothing)


def entmax_bisect_loss(logits, target, alpha=1.5, ignore_index: int = -100,
                       label_smoothing: float = 0.0):
    """Per-row alpha-entmax loss (N,)."""
    return fy_loss(logits, target, "entmax_bisect", alpha, 0.0, ignore_index, label_smoothing)
