"""Sparse attention with gradients (training): out = drop(pi(scale q k^T, masked)) v.

Forward: s = q k^T (cuBLAS); one kernel over blocks of score rows scales them, masks them (keys
where keep is False at -1e18, OpenNMT-py's fill: weight exactly 0), solves p = pi(s) in registers
(`mapping.map_tile`: the mappings' solver and certificate) and drops out
    d_j = p_j m_j / (1 - r),   m_j = [U_j >= r],  U_j = Philox(seed, j) uniform in [0, 1),
writing p (float32, for the backward) and d (v's dtype); out = d v (cuBLAS).
Backward, with G = dL/d out: dd = G v^T and dv = d^T G (cuBLAS); one kernel regenerates m from
the seed and gives, with g = dd m / (1 - r) and u = p^(2 - alpha) on the support (mapping.py),
    ds = scale (u g - (sum u g / sum u) u),  0 at masked keys,
and the alpha-gradient of each row, added atomically to its head's entry (through the clamp(1 +
sigmoid(a)) of a learned alpha given as logits a: `attention.alpha_rows`); dq = ds k, dk = ds^T q
(cuBLAS).
One autograd node and 3 + 5 launches where OpenNMT-py's eager branch runs a scaling, a matmul, a
mask fill, the mapping, a dropout and a matmul, each with its own backward: training steps of a
small Transformer are bound by this host work (docs/kernels.md). Rows of up to
`attention_tiles.MAX_KEYS` keys take `attention_tiles.py` instead: two launches that also skip the
copies cuBLAS makes of OpenNMT-py's transposed head views.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from . import _solver as S
from . import attention_tiles
from ._config import cdiv, launch_config
from ._launch import launch, launch_spec
from .attention import MAX_KEYS, alpha_flags, alpha_rows, dropout_keep, head_alpha, keep_at, strides4
from .attention import supports as fused_supports
from .mapping import MODES, alpha_grad, bwd_sums, map_tile, u_of_p, weighted_mean

# sizes, strides and the seed are not specialised: one kernel per dtype and tile shape, a launch key
# built without looking at them, and no vectorised loads (mapping._fwd_lanes_kernel says why)
_INTS = ["n_rows", "n_cols", "Tq", "H", "sm_b", "sm_h", "sm_q", "sm_k", "sa_h", "seed"]


@triton.jit
def _rows(ALPHA, n_rows, Tq, H, sa_h, BR: tl.constexpr, MODE: tl.constexpr, LOGIT: tl.constexpr,
          LO: tl.constexpr, HI: tl.constexpr):
    """(score rows [BR] of this program, their mask, the index of their alpha, alpha - 1 and
    d alpha / d ALPHA of each (`alpha_rows`)): row = (b H + h) Tq + t, alpha from the head h
    (sa_h = 1) or shared (sa_h = 0)."""
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    rmask = rows < n_rows
    ai = ((rows // Tq) % H) * sa_h
    a1, chain = alpha_rows(ALPHA, ai, rmask, BR, MODE, LOGIT, LO, HI)
    return rows, rmask, ai, a1, chain


@triton.jit
def _kept_keys(KEEP, r3, c3, msk3, Tq, H, sm_b, sm_h, sm_q, sm_k):
    """keep[b, h, t, j] of each entry of a tile of score rows r = (b H + h) Tq + t."""
    return keep_at(KEEP, r3 // Tq // H, (r3 // Tq) % H, r3 % Tq, c3, msk3, sm_b, sm_h, sm_q, sm_k)


@triton.jit(do_not_specialize=_INTS)
def _fwd_kernel(Sc, P, D, KEEP, ALPHA, n_rows, n_cols, Tq, H, sm_b, sm_h, sm_q, sm_k, sa_h, seed,
                scale, drop, tol, MODE: tl.constexpr, MAX_ITER: tl.constexpr, BR: tl.constexpr,
                BC: tl.constexpr, LANES: tl.constexpr, GROUPS: tl.constexpr, GROUP_ITER: tl.constexpr,
                HAS_KEEP: tl.constexpr, HAS_DROP: tl.constexpr, HAS_D: tl.constexpr, LOGIT: tl.constexpr,
                LO: tl.constexpr, HI: tl.constexpr):
    rows, rmask, _ai, a1, _chain = _rows(ALPHA, n_rows, Tq, H, sa_h, BR, MODE, LOGIT, LO, HI)
    r3, c3, msk3 = S.lane_cols(rows, rmask, n_cols, BR, BC, LANES)
    off = r3 * n_cols + c3
    z = tl.load(Sc + off, mask=msk3, other=float("-inf")).to(tl.float32) * scale
    if HAS_KEEP:
        z = tl.where(_kept_keys(KEEP, r3, c3, msk3, Tq, H, sm_b, sm_h, sm_q, sm_k), z, -1e18)
    p, _it = map_tile(tl.reshape(z, [BR, BC]), a1, tl.reshape(msk3, [BR, BC]), tol, MODE, MAX_ITER,
                      BR, BC, GROUPS, GROUP_ITER)
    p = tl.reshape(p, msk3.shape)
    tl.store(P + off, p, mask=msk3)
    if HAS_DROP:
        p = tl.where(dropout_keep(seed, off, drop), p * (1.0 / (1.0 - drop)), 0.0)
    if HAS_D:
        tl.store(D + off, p.to(D.dtype.element_ty), mask=msk3)


@triton.jit(do_not_specialize=_INTS)
def _bwd_kernel(P, GD, DS, KEEP, ALPHA, DALPHA, n_rows, n_cols, Tq, H, sm_b, sm_h, sm_q, sm_k, sa_h,
                seed, scale, drop, MODE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                LANES: tl.constexpr, HAS_KEEP: tl.constexpr, HAS_DROP: tl.constexpr, LOGIT: tl.constexpr,
                LO: tl.constexpr, HI: tl.constexpr, HAS_DALPHA: tl.constexpr):
    rows, rmask, ai, a1, chain = _rows(ALPHA, n_rows, Tq, H, sa_h, BR, MODE, LOGIT, LO, HI)
    r3, c3, msk3 = S.lane_cols(rows, rmask, n_cols, BR, BC, LANES)
    off = r3 * n_cols + c3
    p = tl.load(P + off, mask=msk3, other=0.0)
    g = tl.load(GD + off, mask=msk3, other=0.0).to(tl.float32)
    if HAS_DROP:
        g = tl.where(dropout_keep(seed, off, drop), g * (1.0 / (1.0 - drop)), 0.0)
    p = tl.reshape(p, [BR, BC])
    g = tl.reshape(g, [BR, BC])
    su, sug, sgp, splp, sgplp = bwd_sums(p, g, a1, MODE)
    q = weighted_mean(sug, su)
    u, _lg = u_of_p(p, a1, MODE)
    ds = tl.reshape(u * (g - q[:, None]), msk3.shape) * scale
    if HAS_KEEP:  # (a fully masked row has p uniform and u > 0: its fill is a constant, no gradient)
        ds = tl.where(_kept_keys(KEEP, r3, c3, msk3, Tq, H, sm_b, sm_h, sm_q, sm_k), ds, 0.0)
    tl.store(DS + off, ds.to(DS.dtype.element_ty), mask=msk3)
    if HAS_DALPHA:  # (rows of one head add to its entry)
        tl.atomic_add(DALPHA + ai, alpha_grad(a1, q, sgp, splp, sgplp) * chain, mask=rmask)


def _layout(n_cols: int, elem_size: int, mode: int, backward: bool, soft_rows: bool) -> dict:
    """The mapping kernels' tile for these rows; a program of one row gets one lane column (J = 1)."""
    cfg = launch_config(n_cols, elem_size, mode=mode, backward=backward, soft_rows=soft_rows)
    return dict(cfg, LANES=cfg["LANES"] or cfg["BR"])


class _Call:
    """One attention call's launch arguments shared by the forward and backward kernels."""

    def __init__(self, s_shape, keep, alpha, bounds, mode: int, scale: float, drop: float, seed: int, like):
        B, H, Tq, Tk = s_shape
        self.n_rows, self.n_cols, self.mode, self.scale, self.drop, self.seed = B * H * Tq, Tk, mode, scale, drop, seed
        self.keep = keep if keep is not None else like
        self.soft_rows = mode == 2 and torch.is_tensor(alpha)  # (a learned alpha may be 1: softmax rows)
        self.alpha, sa_h = head_alpha(alpha, mode, like)
        self.ints = (self.n_rows, Tk, Tq, H, *(strides4(keep) if keep is not None else (0, 0, 0, 0)), sa_h, seed)
        self.flags = {"HAS_KEEP": keep is not None, "HAS_DROP": drop > 0, **alpha_flags(bounds)}


def scores_forward(s: torch.Tensor, keep, alpha, bounds, mode: int, scale: float, drop: float, seed: int,
                   d_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, _Call]:
    """(p float32, d = dropout(p) in d_dtype (p itself when that is the same), the call) for
    contiguous scores s (B, H, Tq, Tk); alpha: alphas, or logits with bounds (`alpha_flags`)."""
    call = _Call(s.shape, keep, alpha, bounds, mode, scale, drop, seed, s)
    p = torch.empty(s.shape, device=s.device, dtype=torch.float32)
    has_d = drop > 0 or d_dtype != torch.float32
    d = torch.empty(s.shape, device=s.device, dtype=d_dtype) if has_d else p
    if p.numel() == 0:
        return p, d, call
    cfg = _layout(call.n_cols, s.element_size(), mode, False, call.soft_rows)
    tensors = (s, p, d, call.keep, call.alpha)
    launch(_fwd_kernel, (cdiv(call.n_rows, cfg["BR"]),),
           (*tensors, *call.ints, scale, drop, 1e-6),
           dict(MODE=mode, MAX_ITER=64 if mode == 2 else 32, BR=cfg["BR"], BC=cfg["BC"], LANES=cfg["LANES"],
                GROUPS=cfg["GROUPS"], GROUP_ITER=cfg["GROUP_ITER"], HAS_D=has_d, **call.flags),
           cfg["num_warps"], cfg["FP_FUSION"], spec=launch_spec(tensors, call.ints))
    return p, d, call


def scores_backward(call: _Call, p: torch.Tensor, gd: torch.Tensor, ds_dtype: torch.dtype, dalpha) -> torch.Tensor:
    """ds in ds_dtype from p and dd = dL/dd (contiguous, p's shape); the gradient of the alpha
    tensor added to ``dalpha`` (float32 zeros of its size) unless that is None."""
    ds = torch.empty(p.shape, device=p.device, dtype=ds_dtype)
    if p.numel() == 0:
        return ds
    cfg = _layout(call.n_cols, max(4, gd.element_size()), call.mode, True, call.soft_rows)
    tensors = (p, gd, ds, call.keep, call.alpha, dalpha if dalpha is not None else p)
    launch(_bwd_kernel, (cdiv(call.n_rows, cfg["BR"]),),
           (*tensors, *call.ints, call.scale, call.drop),
           dict(MODE=call.mode, BR=cfg["BR"], BC=cfg["BC"], LANES=cfg["LANES"], **call.flags,
                HAS_DALPHA=dalpha is not None),
           cfg["num_warps"], cfg["FP_FUSION"], spec=launch_spec(tensors, call.ints))
    return ds


class SparseAttention(torch.autograd.Function):
    """out = drop(pi(scale q k^T, masked)) v with gradients w.r.t. q, k, v and a per-head alpha (or
    the logits of a learned one: `alpha_flags`)."""

    @staticmethod
    def forward(ctx, q, k, v, keep, alpha, bounds, mode: int, scale: float, drop: float):
        """(out, p): p the weights before dropout (float32, not differentiable)."""
        if torch.is_autocast_enabled("cuda"):  # matmuls in the autocast dtype, as upstream's would run
            dt = torch.get_autocast_dtype("cuda")
            q, k, v = q.to(dt), k.to(dt), v.to(dt)
        seed = int(torch.randint(0, 2**31 - 1, ())) if drop > 0 else 0  # (CPU generator: no sync)
        a = alpha if torch.is_tensor(alpha) else None
        if attention_tiles.fits(q, k, v):  # short rows: two launches, no copies
            out, p, ctx.call = attention_tiles.forward(q, k, v, keep, alpha, bounds, mode, scale, drop, seed)
            ctx.save_for_backward(q, k, v, p, a)
            ctx.mark_non_differentiable(p)
            return out, p
        # OpenNMT-py's heads are transposed views (B, T, H, d) -> (B, H, T, d), which every batched
        # matmul would copy again (6 matmuls, 12 copies a call): one copy each, saved for the backward
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        s = torch.matmul(q, k.transpose(-2, -1))
        p, d, ctx.call = scores_forward(s, keep, alpha, bounds, mode, scale, drop, seed, v.dtype)
        ctx.save_for_backward(q, k, v, p, a, d)
        ctx.mark_non_differentiable(p)
        return torch.matmul(d, v), p

    @staticmethod
    @once_differentiable
    def backward(ctx, grad, _grad_p):
        q, k, v, p, alpha, *d = ctx.saved_tensors
        grad = grad.to(v.dtype)
        # (atomically added to by the kernels: rows of one head run in different programs)
        dalpha = torch.zeros(alpha.numel(), device=p.device, dtype=torch.float32) if ctx.needs_input_grad[4] else None
        if not d:  # (the tiles)
            dq, dk, dv = attention_tiles.backward(ctx.call, q, k, v, p, grad, dalpha)
        else:
            grad = grad.contiguous()  # (the gradient of upstream's unshape: a transposed view)
            gd = torch.matmul(grad, v.transpose(-2, -1))
            dv = torch.matmul(d[0].transpose(-2, -1), grad) if ctx.needs_input_grad[2] else None
            ds = scores_backward(ctx.call, p, gd, q.dtype, dalpha)
            dq = torch.matmul(ds, k) if ctx.needs_input_grad[0] else None
            dk = torch.matmul(ds.transpose(-2, -1), q) if ctx.needs_input_grad[1] else None
        if dalpha is not None:
            dalpha = dalpha.view(alpha.shape).to(alpha.dtype)
        return dq, dk, dv, None, dalpha, None, None, None, None


def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha=None,
                     scale: float = 1.0, dropout_p: float = 0.0, return_weights: bool = False,
                     alpha_bounds: tuple[float, float] | None = None):
    """(B, H, Tq, Dv) = drop(pi(scale q k^T, keys where keep is False at -1e18)) v, differentiable
    (and the weights before dropout, float32, with return_weights); the arguments as
    `attention.sparse_attention`'s (alpha: a float or H or 1 values; with alpha_bounds (lo, hi),
    H or 1 logits a of alpha = clamp(1 + sigmoid(a), lo, hi), differentiated through)."""
    mode = MODES["bisect" if kind == "entmax_bisect" else kind]
    out, p = SparseAttention.apply(q, k, v, keep, alpha, alpha_bounds, mode, float(scale), float(dropout_p))
    return (out, p) if return_weights else out


def supports(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha, dropout_p: float) -> bool:
    """The decoding kernel's arguments (`attention.supports`) over up to its MAX_KEYS keys, dropout in [0, 1)."""
    return 0.0 <= dropout_p < 1.0 and k.ndim == 4 and k.shape[2] <= MAX_KEYS \
        and fused_supports(q, k, v, keep, kind, alpha)
