"""Sparse attention for training in two launches and no copies, for short key rows.

OpenNMT-py's heads are transposed views, (B, T, H, d) in memory read as (B, H, T, d); cuBLAS's
batched matmuls copy such views (`attention_train.py` copies q, k, v, the output gradient, and the
layer copies the output and dq, dk, dv back: 8 copies a call on a host-bound step). Here every
tile is loaded through its strides and stored in the layout of the tensor it belongs to:

- forward, one program per (batch, head, BM queries): s = scale q k^T by `tl.dot` (fp32 inputs at
  IEEE precision as torch's matmul, half inputs on tensor cores), keys where keep is False at -1e18, the
  mapping by the mappings' solver (`mapping.map_tile`), d = p m / (1 - r) with the Philox draw of
  `attention.dropout_keep`, out = d v; writes p (float32, for the backward) and out.
- backward, one program per (batch, head), k and v held: for each block of BM queries,
  dd = dO v^T, g = dd m / (1 - r), ds = scale (u g - (sum u g / sum u) u) (0 at masked keys),
  dq = ds k written, dk += ds^T q, dv += d^T dO and the head's alpha-gradient accumulated; the
  alpha-gradient is added to its (H or 1) entries atomically, through the clamp(1 + sigmoid(a))
  of a learned alpha when the kernels are given its logits a (`attention.alpha_rows`).
Rows of up to MAX_KEYS keys and heads of up to MAX_HEAD_DIM; longer ones take `attention_train`.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._common import SHORT_ROW_KEYS
from ._config import cdiv, next_pow2
from ._launch import launch, launch_spec
from .attention import alpha_flags, alpha_rows, dropout_keep, head_alpha, keep_at, strides4
from .mapping import alpha_grad, bwd_sums, map_tile, u_of_p, weighted_mean

MAX_KEYS = SHORT_ROW_KEYS
MAX_HEAD_DIM = 128
BM = 16  # queries a program (the smallest tl.dot tile)

_INTS = ["Tq", "H", "Tk", "D", "Dv", "sq_b", "sq_h", "sq_t", "sk_b", "sk_h", "sk_t", "sv_b", "sv_h", "sv_t",
         "so_b", "so_h", "so_t", "sm_b", "sm_h", "sm_q", "sm_k", "sa_h", "seed"]


@triton.jit
def load_tile(X, b, h, s_b, s_h, s_t, rows, n_rows, cols, n_cols):
    """x[b, h, rows, cols] through the strides (unit stride on the last dim), 0 outside."""
    off = b * s_b + h * s_h + rows[:, None].to(tl.int64) * s_t + cols[None, :]
    return tl.load(X + off, mask=(rows < n_rows)[:, None] & (cols < n_cols)[None, :], other=0.0)


@triton.jit
def store_tile(X, val, b, h, s_b, s_h, s_t, rows, n_rows, cols, n_cols):
    off = b * s_b + h * s_h + rows[:, None].to(tl.int64) * s_t + cols[None, :]
    tl.store(X + off, val.to(X.dtype.element_ty), mask=(rows < n_rows)[:, None] & (cols < n_cols)[None, :])


@triton.jit
def _block(bh, H, Tq, Tk, t0, BR: tl.constexpr, BC: tl.constexpr):
    """(b, h, query rows t [BR], keys [BC], their [BR, BC] linear offsets in (B, H, Tq, Tk) and mask)."""
    b = (bh // H).to(tl.int64)
    h = bh % H
    t = t0 + tl.arange(0, BR)
    keys = tl.arange(0, BC)
    off = ((bh * Tq).to(tl.int64) + t[:, None]) * Tk + keys[None, :]
    return b, h, t, keys, off, (t < Tq)[:, None] & (keys < Tk)[None, :]


@triton.jit(do_not_specialize=_INTS)
def _fwd_kernel(Q, K, V, O, P, KEEP, ALPHA, Tq, H, Tk, D, Dv, sq_b, sq_h, sq_t, sk_b, sk_h, sk_t, sv_b, sv_h,
                sv_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, sa_h, seed, scale, drop, tol,
                MODE: tl.constexpr, MAX_ITER: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, BD: tl.constexpr,
                BDV: tl.constexpr, HAS_KEEP: tl.constexpr, HAS_DROP: tl.constexpr, PREC: tl.constexpr,
                LOGIT: tl.constexpr, LO: tl.constexpr, HI: tl.constexpr):
    bh = tl.program_id(1)
    b, h, t, keys, off, msk = _block(bh, H, Tq, Tk, tl.program_id(0) * BR, BR, BC)
    d = tl.arange(0, BD)
    q = load_tile(Q, b, h, sq_b, sq_h, sq_t, t, Tq, d, D)
    k = load_tile(K, b, h, sk_b, sk_h, sk_t, keys, Tk, d, D)
    s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
    if HAS_KEEP:
        s = tl.where(keep_at(KEEP, b, h, t[:, None], keys[None, :], msk, sm_b, sm_h, sm_q, sm_k), s, -1e18)
    z = tl.where(msk, s, float("-inf"))
    a1, _chain = alpha_rows(ALPHA, h * sa_h + 0 * t, t < Tq, BR, MODE, LOGIT, LO, HI)
    p, _it = map_tile(z, a1, msk, tol, MODE, MAX_ITER, BR, BC, False, 1)
    tl.store(P + off, p, mask=msk)
    if HAS_DROP:
        p = tl.where(dropout_keep(seed, off, drop), p * (1.0 / (1.0 - drop)), 0.0)
    dv = tl.arange(0, BDV)
    v = load_tile(V, b, h, sv_b, sv_h, sv_t, keys, Tk, dv, Dv)
    o = tl.dot(p.to(v.dtype), v, input_precision=PREC)
    store_tile(O, o, b, h, so_b, so_h, so_t, t, Tq, dv, Dv)


@triton.jit(do_not_specialize=_INTS)
def _bwd_kernel(Q, K, V, GO, P, DQ, DK, DV, DALPHA, KEEP, ALPHA, Tq, H, Tk, D, Dv, sq_b, sq_h, sq_t, sk_b, sk_h,
                sk_t, sv_b, sv_h, sv_t, so_b, so_h, so_t, sm_b, sm_h, sm_q, sm_k, sa_h, seed, scale, drop,
                MODE: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr,
                HAS_KEEP: tl.constexpr, HAS_DROP: tl.constexpr, PREC: tl.constexpr, LOGIT: tl.constexpr,
                LO: tl.constexpr, HI: tl.constexpr, HAS_DALPHA: tl.constexpr):
    """One program per (batch, head): k, v held, dk and dv accumulated over the blocks of queries;
    (HAS_DALPHA) the head's alpha-gradient summed over its queries and added to DALPHA[h]."""
    bh = tl.program_id(0)
    b, h, t, keys, off, msk = _block(bh, H, Tq, Tk, 0, BR, BC)
    d = tl.arange(0, BD)
    dv = tl.arange(0, BDV)
    k = load_tile(K, b, h, sk_b, sk_h, sk_t, keys, Tk, d, D)
    v = load_tile(V, b, h, sv_b, sv_h, sv_t, keys, Tk, dv, Dv)
    dk = tl.zeros([BC, BD], tl.float32)
    dvv = tl.zeros([BC, BDV], tl.float32)
    # (the same alpha on every row)
    a1, chain = alpha_rows(ALPHA, h * sa_h + 0 * t, t < BR, BR, MODE, LOGIT, LO, HI)
    da = tl.zeros([BR], tl.float32)
    for t0 in range(0, Tq, BR):
        b, h, t, keys, off, msk = _block(bh, H, Tq, Tk, t0, BR, BC)
        go = load_tile(GO, b, h, so_b, so_h, so_t, t, Tq, dv, Dv)
        g = tl.dot(go, tl.trans(v), input_precision=PREC)  # dd = dO v^T
        p = tl.load(P + off, mask=msk, other=0.0)
        if HAS_DROP:
            m = dropout_keep(seed, off, drop)
            g = tl.where(m, g * (1.0 / (1.0 - drop)), 0.0)
            pd = tl.where(m, p * (1.0 / (1.0 - drop)), 0.0)
        else:
            pd = p
        g = tl.where(msk, g, 0.0)
        su, sug, sgp, splp, sgplp = bwd_sums(p, g, a1, MODE)
        qm = weighted_mean(sug, su)
        u, _lg = u_of_p(p, a1, MODE)
        ds = u * (g - qm[:, None]) * scale
        if HAS_KEEP:  # (a fully masked row has p uniform and u > 0: its fill is a constant, no gradient)
            ds = tl.where(keep_at(KEEP, b, h, t[:, None], keys[None, :], msk, sm_b, sm_h, sm_q, sm_k), ds, 0.0)
        store_tile(DQ, tl.dot(ds.to(k.dtype), k, input_precision=PREC), b, h, sq_b, sq_h, sq_t, t, Tq, d, D)
        q = load_tile(Q, b, h, sq_b, sq_h, sq_t, t, Tq, d, D)
        dk += tl.dot(tl.trans(ds).to(q.dtype), q, input_precision=PREC)
        dvv += tl.dot(tl.trans(pd).to(go.dtype), go, input_precision=PREC)
        if HAS_DALPHA:
            da += tl.where(t < Tq, alpha_grad(a1, qm, sgp, splp, sgplp), 0.0)
    store_tile(DK, dk, b, h, sk_b, sk_h, sk_t, keys, Tk, d, D)
    store_tile(DV, dvv, b, h, sv_b, sv_h, sv_t, keys, Tk, dv, Dv)
    if HAS_DALPHA:  # (B programs add to each head's entry)
        tl.atomic_add(DALPHA + h * sa_h, tl.sum(da * chain))


def fits(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether these shapes take the tiles (the caller checked `attention_train.supports`)."""
    return k.shape[2] <= MAX_KEYS and q.shape[3] <= MAX_HEAD_DIM and v.shape[3] <= MAX_HEAD_DIM


class _Call:
    """Shapes, strides and flags of one call, shared by its two kernels."""

    def __init__(self, q, k, v, keep, alpha, bounds, mode: int, scale: float, drop: float, seed: int):
        B, H, Tq, D = q.shape
        Tk, Dv = k.shape[2], v.shape[3]
        self.shape = (B, H, Tq, Tk)
        self.mode, self.scale, self.drop, self.seed = mode, scale, drop, seed
        self.alpha, sa_h = head_alpha(alpha, mode, q)
        self.keep = keep if keep is not None else q
        sm = strides4(keep) if keep is not None else (0, 0, 0, 0)
        self.sizes = (Tq, H, Tk, D, Dv)
        self.qkv = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3])
        self.mask = (*sm, sa_h)
        self.blocks = {"BD": next_pow2(max(D, 16)), "BDV": next_pow2(max(Dv, 16)),
                       "PREC": "ieee" if q.dtype == torch.float32 else "tf32"}
        self.flags = {"HAS_KEEP": keep is not None, "HAS_DROP": drop > 0, **alpha_flags(bounds)}
        self.grid_q = (cdiv(Tq, BM), B * H)


def forward(q, k, v, keep, alpha, bounds, mode: int, scale: float, drop: float, seed: int):
    """(out (B, H, Tq, Dv), a view of (B, Tq, H, Dv) memory as OpenNMT-py's unshape wants it;
    p float32 (B, H, Tq, Tk); the call). alpha: alphas, or logits with bounds (`alpha_flags`)."""
    call = _Call(q, k, v, keep, alpha, bounds, mode, scale, drop, seed)
    B, H, Tq, Tk = call.shape
    out = torch.empty((B, Tq, H, v.shape[3]), device=q.device, dtype=v.dtype).transpose(1, 2)
    p = torch.empty(call.shape, device=q.device, dtype=torch.float32)
    if p.numel() == 0:
        return out, p, call
    tensors = (q, k, v, out, p, call.keep, call.alpha)
    ints = (*call.sizes, *call.qkv, *out.stride()[:3], *call.mask, seed)
    launch(_fwd_kernel, call.grid_q, (*tensors, *ints, scale, drop, 1e-6),
           dict(MODE=mode, MAX_ITER=64 if mode == 2 else 32, BR=BM, BC=next_pow2(max(Tk, 16)), **call.blocks,
                **call.flags), 4, False, spec=launch_spec(tensors, ints))
    return out, p, call


def backward(call: _Call, q, k, v, p, grad, dalpha):
    """(dq, dk, dv) in the layouts of q / k / v, and the gradient of the alpha tensor (alphas or
    logits) added to ``dalpha`` (float32 zeros of its size) unless that is None: one launch."""
    B, H, Tq, Tk = call.shape
    if grad.stride(-1) != 1:
        grad = grad.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    tensors = (q, k, v, grad, p, dq, dk, dv, dalpha if dalpha is not None else p, call.keep, call.alpha)
    ints = (*call.sizes, *call.qkv, *grad.stride()[:3], *call.mask, call.seed)
    bc = next_pow2(max(Tk, 16))
    launch(_bwd_kernel, (B * H,), (*tensors, *ints, call.scale, call.drop),
           dict(MODE=call.mode, BR=BM, BC=bc, **call.blocks, **call.flags, HAS_DALPHA=dalpha is not None),
           4 if bc * max(call.blocks["BD"], call.blocks["BDV"]) <= 4096 else 8, False,
           spec=launch_spec(tensors, ints))
    return dq, dk, dv
