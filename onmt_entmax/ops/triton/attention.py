"""Fused sparse attention forward (no grad): out = pi(scale q k^T, masked) v in one launch.

One program per query row (batch b, head h, query t): the scores s_j = scale <q, k_j> are
accumulated over chunks of the head dimension, masked keys get -1e18 (OpenNMT-py's fill: weight
exactly 0, and a fully masked row attends uniformly as in its eager path), the mapping's
threshold is solved on the row in registers (`mapping.map_tile`, the same solver and
certificate as the mapping kernels), and out = sum_j p_j v_j is accumulated chunk by chunk.
The point is host work, not GPU time: decoding is host-bound, and the unfused path issues a
scaled matmul, a masked fill, the mapping, a cast and a second matmul per attention layer and
step; this is one launch. Rows of up to MAX_KEYS keys for any number of queries, and a decoding
step's one query a row over up to LONG_KEYS[kind] keys (`_attn_fwd_staged_kernel`): the tiles of
`attention_long` would give such a call one program a (batch, head), each sweeping the keys in
several passes, where this reads k and v once.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .._common import KERNEL_ALPHA_MIN, KINDS
from . import _solver as S
from ._config import next_pow2
from ._launch import launch
from .alpha import bounded
from .mapping import MODES, map_tile

MAX_KEYS = 1024  # longer key rows: `attention_long`'s tiles (any number of queries)
# a decoding step's query (one a hypothesis) over up to LONG_KEYS[kind] keys: one program a row
# (`_attn_fwd_staged_kernel`), which reads k and v once where the tiles' 64-query blocks would sweep the keys
# in several passes on one block a (batch, head); past them the tiles were as fast (sparsemax, whose tiles'
# first pass certifies nearly every block, from 8192 keys: docs/kernels.md)
LONG_KEYS = {"sparsemax": 4096, "entmax15": 8192, "entmax_bisect": 8192}
_TILE = 2048  # rows of up to MAX_KEYS: keys x head-dim entries of the chunk held at once (registers)
STAGED_WARPS = 16  # longer rows: warps a program
_STAGED_PER_THREAD = 32  # and key-chunk x head-dim entries a thread


_INTS = ["Tq", "H", "Tk", "D", "Dv", "sq_b", "sq_h", "sq_t", "sk_b", "sk_h", "sk_t", "sv_b", "sv_h", "sv_t",
         "sm_b", "sm_h", "sm_q", "sm_k", "so_b", "so_h", "so_t", "sa_h"]


@triton.jit
def keep_at(KEEP, b, h, t, keys, msk, sm_b, sm_h, sm_q, sm_k):
    """keep[b, h, t, key] of each entry (strides 0 where keep broadcasts; True outside msk)."""
    return tl.load(KEEP + b * sm_b + h * sm_h + t * sm_q + keys * sm_k, mask=msk, other=1) != 0


@triton.jit
def dropout_keep(seed, off, drop):
    """Attention dropout's m = [U >= r], U = Philox(seed, entry offset) uniform in [0, 1): a
    backward draws the same m from the seed and the offsets."""
    return tl.rand(seed, off.to(tl.int32)) >= drop


@triton.jit
def alpha_rows(ALPHA, idx, mask, BR: tl.constexpr, MODE: tl.constexpr, LOGIT: tl.constexpr, LO: tl.constexpr,
               HI: tl.constexpr):
    """(alpha - 1, d alpha / d ALPHA) of each row [BR], ALPHA[idx] read as alpha, or (LOGIT) as the
    logit a of a learned alpha = clamp(1 + sigmoid(a), LO, HI) (`alpha.bounded`)."""
    if LOGIT:
        al, chain = bounded(tl.load(ALPHA + idx, mask=mask, other=0.0), LO, HI)
    else:
        al = S.row_alpha(ALPHA, idx, mask, BR, MODE)
        chain = tl.full([BR], 1.0, tl.float32)
    return al - 1.0, chain


# no specialisation on the ints (sizes, strides): one kernel per dtype / mask / tile shape, and a
# launch key the host builds without looking at each of them (launch's `spec`)
@triton.jit(do_not_specialize=_INTS)
def _attn_fwd_kernel(Q, K, V, KEEP, ALPHA, O, Tq, H, Tk, D, Dv, scale, tol,
                     sq_b, sq_h, sq_t, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t,
                     sm_b, sm_h, sm_q, sm_k, so_b, so_h, so_t, sa_h,
                     MODE: tl.constexpr, MAX_ITER: tl.constexpr, BC: tl.constexpr,
                     BD: tl.constexpr, HAS_KEEP: tl.constexpr):
    r = tl.program_id(0)
    t = r % Tq
    h = (r // Tq) % H
    b = (r // Tq // H).to(tl.int64)
    keys = tl.arange(0, BC)
    kin = keys < Tk
    # s_j = scale <q, k_j>: key rows along the tile's columns, head dim along its rows
    s = tl.zeros([BC], tl.float32)
    for d0 in range(0, D, BD):
        d = d0 + tl.arange(0, BD)
        dm = d < D
        q = tl.load(Q + b * sq_b + h * sq_h + t * sq_t + d, mask=dm, other=0.0).to(tl.float32)
        k = tl.load(K + b * sk_b + h * sk_h + keys[None, :] * sk_t + d[:, None],
                    mask=dm[:, None] & kin[None, :], other=0.0).to(tl.float32)
        s += tl.sum(k * q[:, None], 0)
    s = s * scale
    if HAS_KEEP:
        s = tl.where(keep_at(KEEP, b, h, t, keys, kin, sm_b, sm_h, sm_q, sm_k), s, -1e18)
    z = tl.where(kin, s, float("-inf"))[None, :]
    one = tl.full([1], 0, tl.int32)
    a1 = S.row_alpha(ALPHA + h * sa_h, one, one == 0, 1, MODE) - 1.0
    p, _it = map_tile(z, a1, kin[None, :], tol, MODE, MAX_ITER, 1, BC, False, 1)
    # out = sum_j p_j v_j, chunk by chunk of the value dim
    for d0 in range(0, Dv, BD):
        d = d0 + tl.arange(0, BD)
        dm = d < Dv
        v = tl.load(V + b * sv_b + h * sv_h + keys[None, :] * sv_t + d[:, None],
                    mask=dm[:, None] & kin[None, :], other=0.0).to(tl.float32)
        o = tl.sum(v * p, 1)
        tl.store(O + b * so_b + h * so_h + t * so_t + d, o.to(O.dtype.element_ty), mask=dm)


@triton.jit(do_not_specialize=_INTS)
def _attn_fwd_staged_kernel(Q, K, V, KEEP, ALPHA, O, SCR, Tq, H, Tk, D, Dv, scale, tol,
                            sq_b, sq_h, sq_t, sk_b, sk_h, sk_t, sv_b, sv_h, sv_t,
                            sm_b, sm_h, sm_q, sm_k, so_b, so_h, so_t, sa_h,
                            MODE: tl.constexpr, MAX_ITER: tl.constexpr, BC: tl.constexpr, BK: tl.constexpr,
                            BD: tl.constexpr, BDV: tl.constexpr, HAS_KEEP: tl.constexpr):
    """`_attn_fwd_kernel` for rows of more than MAX_KEYS keys: k and v are read in chunks of BK whole key
    rows (each row's head dim contiguous: full-width loads, where a [head dim, keys] tile of the whole row
    reads a few bytes of every key row a load), the scores of a chunk staged in the program's row of SCR
    (BC float32, L2-resident), the row then solved in registers and its p staged there in turn for the
    chunks of v. The barriers order one pass's global stores before the next pass's loads within the
    program (bar.sync makes a block's global writes visible to the whole block)."""
    r = tl.program_id(0)
    t = r % Tq
    h = (r // Tq) % H
    b = (r // Tq // H).to(tl.int64)
    row = SCR + r.to(tl.int64) * BC
    d = tl.arange(0, BD)
    dm = d < D
    q = tl.load(Q + b * sq_b + h * sq_h + t * sq_t + d, mask=dm, other=0.0).to(tl.float32)
    for k0 in range(0, Tk, BK):
        keys = k0 + tl.arange(0, BK)
        kin = keys < Tk
        k = tl.load(K + b * sk_b + h * sk_h + keys[:, None] * sk_t + d[None, :],
                    mask=kin[:, None] & dm[None, :], other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], 1) * scale
        if HAS_KEEP:
            s = tl.where(keep_at(KEEP, b, h, t, keys, kin, sm_b, sm_h, sm_q, sm_k), s, -1e18)
        tl.store(row + keys, s, mask=kin)
    tl.debug_barrier()
    cols = tl.arange(0, BC)
    cin = cols < Tk
    z = tl.load(row + cols, mask=cin, other=float("-inf"))[None, :]
    one = tl.full([1], 0, tl.int32)
    a1 = S.row_alpha(ALPHA + h * sa_h, one, one == 0, 1, MODE) - 1.0
    p, _it = map_tile(z, a1, cin[None, :], tol, MODE, MAX_ITER, 1, BC, False, 1)
    tl.debug_barrier()  # (every thread has read its scores before p overwrites them)
    tl.store(row + cols[None, :], p, mask=cin[None, :])
    tl.debug_barrier()
    dv = tl.arange(0, BDV)
    dvm = dv < Dv
    acc = tl.zeros([BK, BDV], tl.float32)
    for k0 in range(0, Tk, BK):
        keys = k0 + tl.arange(0, BK)
        kin = keys < Tk
        pk = tl.load(row + keys, mask=kin, other=0.0)
        v = tl.load(V + b * sv_b + h * sv_h + keys[:, None] * sv_t + dv[None, :],
                    mask=kin[:, None] & dvm[None, :], other=0.0).to(tl.float32)
        acc += v * pk[:, None]
    tl.store(O + b * so_b + h * so_h + t * so_t + dv, tl.sum(acc, 0).to(O.dtype.element_ty), mask=dvm)


def broadcast4(x: torch.Tensor) -> tuple[tuple, tuple]:
    """(shape, strides) of x broadcast from the left to 4-D (batch, head, query, key); a size-1 dim
    reads as stride 0."""
    pad = 4 - x.ndim
    shape = (1,) * pad + tuple(x.shape)
    return shape, tuple(0 if n == 1 else st for n, st in zip(shape, (0,) * pad + x.stride()))


def strides4(x: torch.Tensor) -> tuple[int, int, int, int]:
    """Strides of x broadcast to 4-D (batch, head, query, key); size-1 dims read as stride 0."""
    return broadcast4(x)[1]


def head_alpha(alpha, mode: int, like: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(the ALPHA argument, its stride over heads): alpha-entmax's float or (H or 1)-element alpha
    as a float32 tensor; any tensor for the other modes, which do not read it."""
    if mode != 2:
        return like, 0
    if not torch.is_tensor(alpha):
        alpha = torch.full((1,), float(alpha), device=like.device, dtype=torch.float32)
    return alpha, int(alpha.numel() > 1)


def alpha_flags(bounds) -> dict:
    """`alpha_rows`' constexprs: ALPHA holds alphas (bounds None) or logits a of alpha = clamp(1 +
    sigmoid(a), lo, hi) (bounds (lo, hi))."""
    lo, hi = (1.0, 2.0) if bounds is None else map(float, bounds)
    return {"LOGIT": bounds is not None, "LO": lo, "HI": hi}


def _geometry(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha):
    """The kernel's integer arguments (sizes and strides, `_INTS`) for a call it takes, else None.
    Written as plain comparisons on values read once: it runs at every decoding-time attention call.

    q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv) with unit stride on the last dim and q's dtype,
    1 <= Tk <= MAX_KEYS (LONG_KEYS[kind] for one query a row); keep None or a bool tensor on q's
    device broadcastable to (B, H, Tq, Tk);
    entmax_bisect's alpha a float > 1 or a contiguous float32 tensor of H or 1 values on q's device."""
    if kind not in KINDS or q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        return None
    B, H, Tq, D = q.shape
    Bk, Hk, Tk, Dk = k.shape
    Bv, Hv, Tv, Dv = v.shape
    if Bk != B or Hk != H or Dk != D or Bv != B or Hv != H or Tv != Tk \
            or not 1 <= Tk <= (MAX_KEYS if Tq > 1 else LONG_KEYS[kind]):
        return None
    sq, sk, sv = q.stride(), k.stride(), v.stride()
    if sq[3] != 1 or sk[3] != 1 or sv[3] != 1 or k.dtype != q.dtype or v.dtype != q.dtype:
        return None
    sm = (0, 0, 0, 0)
    if keep is not None:
        if keep.dtype != torch.bool or keep.ndim > 4 or keep.device != q.device:
            return None
        shape, sm = broadcast4(keep)
        if shape[0] not in (1, B) or shape[1] not in (1, H) or shape[2] not in (1, Tq) or shape[3] not in (1, Tk):
            return None
    sa_h = 0
    if kind == "entmax_bisect":
        if torch.is_tensor(alpha):
            n = alpha.numel()
            if n not in (1, H) or alpha.dtype != torch.float32 or not alpha.is_contiguous() \
                    or alpha.device != q.device:
                return None
            sa_h = int(n > 1)
        elif alpha is None or not float(alpha) >= KERNEL_ALPHA_MIN:  # (nearer 1: the reference, _common.py)
            return None
    # the output (B, H, Tq, Dv) is allocated contiguous
    return (Tq, H, Tk, D, Dv, sq[0], sq[1], sq[2], sk[0], sk[1], sk[2], sv[0], sv[1], sv[2], *sm,
            H * Tq * Dv, Tq * Dv, Dv, sa_h)


_PLANS: dict = {}  # call key (`_call_key`) -> launch plan (`_make_plan`), or None: a call the kernel refuses
_MAX_PLANS = 4096  # (cleared when full: decoding meets a few keys a step, most of them again and again)


def _call_key(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha) -> tuple:
    """Everything of a call that `_geometry` and the launch read, except the data: calls with equal
    keys take the same plan. Decoding repeats a handful of keys (every layer's self- and context
    attention look alike) at every step; reading them costs a third of `_geometry`."""
    return (kind, q.shape, q.stride(), q.dtype, q.get_device(), k.shape, k.stride(), k.dtype, v.shape, v.stride(),
            v.dtype, None if keep is None else (keep.shape, keep.stride(), keep.dtype, keep.get_device()),
            None if kind != "entmax_bisect" else (alpha.shape, alpha.dtype, alpha.is_contiguous(), alpha.get_device())
            if isinstance(alpha, torch.Tensor) else (None if alpha is None else float(alpha)))


def _make_plan(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha):
    """The launch of `_attn_fwd_kernel` (`_attn_fwd_staged_kernel` past MAX_KEYS keys) for calls like this
    one, or None for a call it does not take: (grid, output shape, ints before / after the scale, default
    scale, constexprs, warps, where ALPHA comes from (0: q, an unread placeholder; 1: the call's alpha tensor;
    2: the next field, a float alpha as a tensor), that tensor or None, the dtypes and 64-bit flag of the
    launch spec, the staged kernel's scratch floats a program or 0 for the other kernel)."""
    ints = _geometry(q, k, v, keep, kind, alpha)
    if ints is None:
        return None
    Tq, H, Tk, D, Dv = ints[:5]
    mode = MODES["bisect" if kind == "entmax_bisect" else kind]
    bc = next_pow2(max(Tk, 16))
    constexprs = {"MODE": mode, "MAX_ITER": 64 if mode == 2 else 32, "BC": bc, "HAS_KEEP": keep is not None}
    staged = Tk > MAX_KEYS
    if staged:
        warps = STAGED_WARPS
        bd, bdv = next_pow2(D), next_pow2(Dv)
        constexprs.update(BK=max(16, min(bc, _STAGED_PER_THREAD * 32 * warps // max(bd, bdv))), BD=bd, BDV=bdv)
    else:
        warps = 1 if bc <= 128 else 4
        constexprs["BD"] = max(1, min(next_pow2(max(D, Dv)), _TILE // bc))
    a = head_alpha(alpha, mode, q)[0]
    source = 0 if mode != 2 else 1 if isinstance(alpha, torch.Tensor) else 2
    dtypes = (q.dtype, k.dtype, v.dtype, (q if keep is None else keep).dtype, a.dtype, q.dtype) \
        + ((torch.float32,) if staged else ())
    return ((q.shape[0] * H * Tq,), (q.shape[0], H, Tq, Dv), ints[:5], ints[5:], 1.0 / math.sqrt(D), constexprs,
            warps, source, a if source == 2 else None, dtypes, max(ints) >= 2**31, bc if staged else 0)


def _plan_of(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha):
    key = _call_key(q, k, v, keep, kind, alpha)
    plan = _PLANS.get(key, _PLANS)  # (the dict itself: not yet planned)
    if plan is _PLANS:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _make_plan(q, k, v, keep, kind, alpha)
    return plan


def _launch_fwd(plan: tuple, q, k, v, keep, alpha, scale) -> torch.Tensor:
    """One launch of `_attn_fwd_kernel` or `_attn_fwd_staged_kernel` by a plan of `_make_plan`."""
    grid, out_shape, head, tail, default_scale, constexprs, warps, source, fixed, dtypes, wide, staged = plan
    out = q.new_empty(out_shape)
    if grid[0] == 0 or out_shape[3] == 0:
        return out
    a = q if source == 0 else alpha if source == 1 else fixed
    m = q if keep is None else keep
    # the spec `launch` keys its kernels by: the plan's dtypes, and the pointers' 16-byte alignment
    aligned = (q.data_ptr() % 16 == 0, k.data_ptr() % 16 == 0, v.data_ptr() % 16 == 0, m.data_ptr() % 16 == 0,
               a.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0)
    sc = default_scale if scale is None else float(scale)
    if staged:  # (a row of `staged` float32 a program: the scores, then p)
        scratch = torch.empty(grid[0] * staged, device=q.device, dtype=torch.float32)
        launch(_attn_fwd_staged_kernel, grid, (q, k, v, m, a, out, scratch, *head, sc, 1e-6, *tail), constexprs,
               warps, spec=(dtypes, aligned + (scratch.data_ptr() % 16 == 0,), wide))
    else:
        launch(_attn_fwd_kernel, grid, (q, k, v, m, a, out, *head, sc, 1e-6, *tail), constexprs, warps,
               spec=(dtypes, aligned, wide))
    return out


def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None,
                     kind: str, alpha=None, scale: float | None = None) -> torch.Tensor:
    """(B, H, Tq, Dv) = pi(scale q k^T, keys where keep is False at -1e18) v, one launch, for a call
    `supports` took: q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv); keep a bool tensor
    broadcastable to (B, H, Tq, Tk) or None; alpha (entmax_bisect) a float or a tensor of H or 1
    elements (per head); the output in q's dtype."""
    return _launch_fwd(_plan_of(q, k, v, keep, kind, alpha), q, k, v, keep, alpha, scale)


def decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None, kind: str, alpha,
           scale: float | None) -> torch.Tensor | None:
    """`sparse_attention` for a call the kernel takes, None for one it does not (decoding: the
    arguments are looked at once, not by `supports` and again by the launch)."""
    plan = _plan_of(q, k, v, keep, kind, alpha)
    return None if plan is None else _launch_fwd(plan, q, k, v, keep, alpha, scale)


def supports(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha) -> bool:
    """Shapes and arguments the fused kernel takes (the caller checked device and dtype)."""
    return _plan_of(q, k, v, keep, kind, alpha) is not None
