"""Fused Fenchel-Young losses (sparsemax, 1.5-entmax, alpha-entmax, alpha-ReLU) in Triton.

Forward, one program per row tile: threshold tau (sort-free solver, see _solver.py), then

    L(z, y) = sum_{p>0} p (z - m) - (z_y - m) + (1 - sum p^alpha) / (alpha (alpha - 1)),

m = max z (alpha-ReLU: p = [(alpha-1) z - tau]_+^(1/(alpha-1)) with its fixed tau, and
L = sum p^alpha / alpha - z_y + (1 + alpha tau) / (alpha (alpha - 1))). FY label smoothing
adds eps (z_y - mean_u z) - H_alpha(q), q = (1-eps) e_y + eps u, u uniform over finite logits.
Only per-row scalars (m, tau, norm, n_finite, dL/dalpha, support size |{p > 0}|) are kept: no
(N, V) buffer lives between forward and backward besides the logits themselves. The support size
is what training reports count (`fy_loss(..., return_support=True)`): no second mapping pass.

Backward, an elementwise kernel: recompute p from the saved row scalars in one pass and write
dz = (p - q) g_row (zero on ignore_index rows). Total traffic: read z (forward; solver
re-reads stream from L2), read z + write dz (backward).

Around them, one single-program kernel checks the targets (each in [0, V) or ignore_index; a row
with another target is treated as ignored and fails an asynchronous device assertion, as
F.cross_entropy's does) and, for "sum" / "mean", reduces the row losses in a fixed order and keeps
the weight w of a kept row (1, or 1 / the kept rows), so that the backward's g_row = g w is read
inside the backward kernel. A loss call is then two kernels and one assertion forward and one
kernel backward, where the torch checks and reduction around the kernels were ~20 launches: the
host cost that made the public bf16 loss measure 1.0-1.6x cross_entropy on the H100 while its
kernels alone took 0.68x.
"""
from __future__ import annotations

import torch
import triton
from torch.autograd.function import once_differentiable
import triton.language as tl

from .._common import device_check
from . import _solver as S
from ._config import cdiv, launch_config, next_pow2
from ._launch import launch

_KINDS = {"sparsemax": 0, "entmax15": 1, "entmax_bisect": 2, "alpha_relu": 3}
_REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}
_NSTAT = 6  # m, tau, norm, n_finite, dL/dalpha, support size
NSTAT = tl.constexpr(_NSTAT)


@triton.jit
def _loss_elems(x, tau, norm, beta, al, MODE: tl.constexpr):
    """Elementwise terms: p (z - m), p^alpha, p^alpha log p (zero off the support; alpha-ReLU:
    p^alpha is NaN at a NaN logit), [p > 0].
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
    return tl.where(pos, p * zm, 0.0), pa, palp, pos.to(tl.float32)


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
def _fy_fwd_kernel(Z, Y, LOSS, STATS, ALPHA, n_rows, n_cols, stride, ignore_index, eps, relu_tau,
                   tol, MODE: tl.constexpr, SMOOTH: tl.constexpr, MAX_ITER: tl.constexpr,
                   BR: tl.constexpr, BC: tl.constexpr, SINGLE: tl.constexpr,
                   GROUPS: tl.constexpr, GROUP_ITER: tl.constexpr):
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
        m, zsum, nfin, zg = S.row_max(Z, rows, keep, n_cols, stride, BR, BC)
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
        tau0 = S.start(zg, m, a1, beta, row_ok & keep, tol, MODE, GROUP_ITER, GROUPS)
    if SINGLE:
        x = (z - m[:, None]) * a1[:, None]
        if MODE != 3:
            tau, norm, _it, _p = S.solve_tile(x, beta, row_ok & keep, tol, tau0, MODE, MAX_ITER)
        e1, e2, e3, e4 = _loss_elems(x, tau, norm, beta, al, MODE)
        pz = tl.sum(e1, 1)
        spa = tl.sum(e2, 1)
        spalp = tl.sum(e3, 1)
        nnz = tl.sum(e4, 1)
    else:
        if MODE != 3:
            tau, norm, _it = S.solve_stream(Z, rows, keep, n_cols, stride, m, a1, beta,
                                            row_ok & keep, tol, tau0, MODE, MAX_ITER, BR, BC)
        pz2 = tl.zeros([BR, BC], tl.float32)
        spa2 = tl.zeros([BR, BC], tl.float32)
        spalp2 = tl.zeros([BR, BC], tl.float32)
        nnz2 = tl.zeros([BR, BC], tl.float32)
        for c0 in range(0, n_cols, BC):
            cols = c0 + tl.arange(0, BC)
            x = S.load_scaled(Z, rows, keep, cols, n_cols, stride, m, a1)
            e1, e2, e3, e4 = _loss_elems(x, tau, norm, beta, al, MODE)
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
        nq = tl.maximum(nfin, 1.0)
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
    tl.store(sp + 3, tl.maximum(nfin, 1.0), mask=rmask)
    tl.store(sp + 4, dal, mask=rmask)
    tl.store(sp + 5, tl.where(keep, nnz, 0.0), mask=rmask)


@triton.jit(do_not_specialize=["n_rows"])  # n_rows only masks: one kernel for any count
def _fy_bwd_kernel(Z, Y, G, W, STATS, ALPHA, DZ, n_rows, n_cols, stride, ignore_index, eps,
                   MODE: tl.constexpr, SMOOTH: tl.constexpr, G_ONE: tl.constexpr, BR: tl.constexpr,
                   BC: tl.constexpr):
    """dz = (p - q) g_row, recomputing p = [(alpha-1)(z - m) - tau]_+^beta / norm; g_row = G[row],
    or with G_ONE (a reduced loss) g_row = G[0] W[0] (W: the reduce kernel's weight of a kept row)."""
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.program_id(1) * BC + tl.arange(0, BC)
    rmask = rows < n_rows
    y = tl.load(Y + rows, mask=rmask, other=ignore_index)
    keep = rmask & (y != ignore_index) & (y >= 0) & (y < n_cols)
    r64 = rows.to(tl.int64)
    if G_ONE:
        g = tl.zeros([BR], tl.float32) + tl.load(G).to(tl.float32) * tl.load(W)
    else:
        g = tl.load(G + rows, mask=rmask, other=0.0).to(tl.float32)
    g = tl.where(keep, g, 0.0)
    sp = STATS + r64 * NSTAT
    m = tl.load(sp + 0, mask=rmask, other=0.0)
    tau = tl.load(sp + 1, mask=rmask, other=0.0)
    norm = tl.load(sp + 2, mask=rmask, other=1.0)
    al = S.row_alpha(ALPHA, rows, rmask, BR, MODE)
    a1 = al - 1.0
    beta = 1.0 / a1
    cmask = cols[None, :] < n_cols
    z = tl.load(Z + r64[:, None] * stride + cols[None, :], mask=keep[:, None] & cmask,
                other=float("-inf")).to(tl.float32)
    x = (z - m[:, None]) * a1[:, None]
    p = S.probs(x, tau, norm, beta, MODE)
    if MODE == 3:
        p = tl.where(z != z, z, p)  # NaN logit -> NaN gradient there (the hardware max drops NaN)
    onehot = cols[None, :] == y[:, None]
    q = tl.where(onehot, 1.0 - eps, 0.0)
    if SMOOTH:
        nfin = tl.load(sp + 3, mask=rmask, other=1.0)
        q += tl.where(z > float("-inf"), eps / nfin[:, None], 0.0)
    dz = (p - q) * g[:, None]
    tl.store(DZ + r64[:, None] * n_cols + cols[None, :], dz.to(DZ.dtype.element_ty),
             mask=rmask[:, None] & cmask)


@triton.jit(do_not_specialize=["n_rows", "n_cols", "ignore_index"])
def _fy_reduce_kernel(LOSS, Y, OUT, AUX, n_rows, n_cols, ignore_index, REDUCE: tl.constexpr,
                      BLOCK: tl.constexpr):
    """One program, the rows in a fixed order. AUX[1] = 1 if every target is ignore_index or in
    [0, n_cols), else 0. REDUCE 1 / 2 ("sum" / "mean"): OUT[0] = w sum_kept LOSS (in OUT's dtype),
    AUX[0] = w = 1 / max(1, kept rows) for the mean (a mean over no rows is 0), else 1."""
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    bad = tl.zeros([BLOCK], tl.int32)
    for start in range(0, n_rows, BLOCK):
        rows = start + offs
        rmask = rows < n_rows
        y = tl.load(Y + rows, mask=rmask, other=ignore_index)
        kept = rmask & (y != ignore_index)
        bad += (kept & ((y < 0) | (y >= n_cols))).to(tl.int32)
        if REDUCE > 0:
            total += tl.load(LOSS + rows, mask=kept, other=0.0)
            count += kept.to(tl.float32)
    tl.store(AUX + 1, (tl.sum(bad, 0) == 0).to(tl.float32))  # (the assertion reads it as is: no compare)
    if REDUCE > 0:
        w = tl.sum(count, 0) * 0.0 + 1.0
        if REDUCE == 2:
            w = 1.0 / tl.maximum(tl.sum(count, 0), 1.0)
        tl.store(OUT, (tl.sum(total, 0) * w).to(OUT.dtype.element_ty))
        tl.store(AUX, w)


def reduce_rows(loss: torch.Tensor, target: torch.Tensor, n_cols: int, ignore_index: int, reduction: str,
                dtype: torch.dtype, check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Check the targets (an asynchronous device assertion on CUDA; `check=False`: only the flag) and
    reduce the row losses: (the loss: per row as given for "none", else 0-d in `dtype`; AUX (2,)
    float32: the weight of a kept row in the reduced loss, and the flag, 1 if every target is fine)."""
    aux = torch.empty(2, device=loss.device, dtype=torch.float32)
    mode = _REDUCTIONS[reduction]
    out = loss if mode == 0 else torch.empty((), device=loss.device, dtype=dtype)
    launch(_fy_reduce_kernel, (1,), (loss, target, out, aux, loss.shape[0], n_cols, ignore_index),
           {"REDUCE": mode, "BLOCK": 1024}, 4)
    if check:
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
                 max_iter: int = 64, tol: float = 1e-6):
    """Forward kernel only: (per-row loss float32 (N,), row stats (N, _NSTAT), alpha rows)."""
    n_rows, n_cols = z.shape
    mode = _KINDS[kind]
    loss = torch.empty(n_rows, device=z.device, dtype=torch.float32)
    stats = torch.empty(n_rows, _NSTAT, device=z.device, dtype=torch.float32)
    a_rows = _alpha_rows(alpha, n_rows, z.device) if mode >= 2 else None
    if n_rows == 0:
        return loss, stats, a_rows
    cfg = launch_config(n_cols, z.element_size(), config, mode=mode, lanes=False)
    grid = (cdiv(n_rows, cfg["BR"]),)
    launch(_fy_fwd_kernel, grid, (z, target, loss, stats, a_rows if a_rows is not None else z,
                                  n_rows, n_cols, z.stride(0), ignore_index, float(eps),
                                  float(tau), tol),
           {"MODE": mode, "SMOOTH": eps > 0, "MAX_ITER": max_iter if mode != 1 else 32,
            "BR": cfg["BR"], "BC": cfg["BC"], "SINGLE": cfg["SINGLE"],
            "GROUPS": 0 if mode == 3 else cfg["GROUPS"], "GROUP_ITER": cfg["GROUP_ITER"]},
           cfg["num_warps"], cfg["FP_FUSION"])
    return loss, stats, a_rows


def fy_grad_rows(z, target, g_rows, stats, a_rows, kind: str, ignore_index: int, eps: float,
                 bwd_block: int = 1024, out: torch.Tensor | None = None,
                 weight: torch.Tensor | None = None) -> torch.Tensor:
    """Backward kernel only: dz (N, V) in z's dtype (written into `out` if given). `g_rows`: the
    gradient of each row's loss (N,), or with `weight` (the reduce kernel's AUX) that of the reduced
    loss (one element), each kept row's being g_rows weight[0]."""
    n_rows, n_cols = z.shape
    dz = out if out is not None else torch.empty((n_rows, n_cols), device=z.device, dtype=z.dtype)
    if dz.numel() == 0:
        return dz
    bc = min(next_pow2(n_cols), bwd_block)
    br = max(1, bwd_block // bc)
    grid = (cdiv(n_rows, br), cdiv(n_cols, bc))
    launch(_fy_bwd_kernel, grid, (z, target, g_rows, weight if weight is not None else g_rows, stats,
                                  a_rows if a_rows is not None else z, dz, n_rows, n_cols, z.stride(0),
                                  ignore_index, float(eps)),
           {"MODE": _KINDS[kind], "SMOOTH": eps > 0, "G_ONE": weight is not None, "BR": br, "BC": bc}, 4,
           fp_fusion=True)  # elementwise: no reduction across lanes
    return dz


class _FYLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, alpha, target, kind, tau, ignore_index, eps, reduction):
        z = z.contiguous()
        rows, stats, a_rows = fy_loss_rows(z, target, kind, alpha, tau, ignore_index, eps)
        loss, aux = reduce_rows(rows, target, z.shape[1], ignore_index, reduction, z.dtype)
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
            return None, None, None, None, None, None, None, None
        z, target, stats, a_rows, aux = ctx.saved_tensors
        a_rows = a_rows if ctx.kind in ("entmax_bisect", "alpha_relu") else None
        g = g.contiguous() if ctx.reduced else g.contiguous().to(torch.float32)
        dz = None
        if ctx.needs_input_grad[0]:
            dz = fy_grad_rows(z, target, g, stats, a_rows, ctx.kind, ctx.ignore_index, ctx.eps,
                              weight=aux if ctx.reduced else None)
        dalpha = None
        if ctx.needs_input_grad[1] and ctx.kind == "entmax_bisect":
            g_rows = g.float() * aux[0] if ctx.reduced else g
            keep = (target != ctx.ignore_index).to(torch.float32)
            da_rows = stats[:, 4] * g_rows * keep
            dalpha = (da_rows.sum().reshape(ctx.alpha_shape) if _numel(ctx.alpha_shape) == 1
                      else da_rows.reshape(ctx.alpha_shape))
        return dz, dalpha, None, None, None, None, None, None


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def fy_loss(logits: torch.Tensor, target: torch.Tensor, kind: str, alpha=1.5, tau: float = 0.0,
            ignore_index: int = -100, label_smoothing: float = 0.0, return_support: bool = False,
            reduction: str = "none"):
    """Fenchel-Young loss of (N, V) logits with int64 targets; autograd to logits and alpha.
    reduction "none": per row (N,) float32; "sum" / "mean" (over the rows whose target is not
    ignore_index): 0-d in the logits' dtype. A target neither in [0, V) nor ignore_index fails a
    device assertion (asynchronous on CUDA). ``return_support``: also the number of nonzero
    probabilities of each row (N,) float32 (0 on ignore_index rows), as (loss, that)."""
    loss, support = _FYLoss.apply(logits, alpha, target.contiguous(), kind, float(tau), int(ignore_index),
                                  float(label_smoothing), reduction)
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
