"""A keep mask by tiles: what the tiled attention kernels need to know of it before reading an entry.

The masks the toolkits pass are mostly whole tiles: key padding is a run of kept keys then masked ones,
a decoder's mask (causal and padding) is kept below the diagonal and masked above it. Reading each
entry of such a mask costs a gather an entry in every pass over the keys, and a causal mask given as a
tensor makes every pass visit the tiles above the diagonal. A first launch reads the mask once a call and
classes each (query block of BM rows, key tile of BN keys):

    EMPTY  no entry kept: s = -1e18 there, known without reading the mask;
    FULL   every entry kept: s unmasked;
    MIXED  both: the entries read from the mask,

over the rows < Tq and keys < Tk only (the kernels mask keys past Tk themselves and never store rows past
Tq). A block with a row that keeps no key (such a row attends uniformly to every key, as the reference)
has every tile MIXED, so that its -1e18 entries are all swept as before. With the classes, the runs of each
block's row of them (`_runs`): its key tiles not EMPTY, [jlo, jhi) (the forward and the dq kernel sweep only
those), and among them its first run of FULL tiles, [f0, f1) (swept in a loop that does not read the mask, so
Triton pipelines it); a second launch finds the same runs of each backward key tile (of R forward tiles) over
the query blocks, [qlo, qhi) and [g0, g1), for the dk, dv kernel. Outside [jlo, jhi) every entry is -1e18 for
every row of a block, and such entries add exact zeros (f = 0, u = 0) to every sum: skipping them is exact.

A mask that broadcasts over the queries (key padding, (B, 1, 1, Tk)) is classed once for its one row:
its blocks are one row each, and every query block reads the same classes. With ``causal`` (is_causal and a
mask) the classes are those of the mask and the causal one together, a block a query block: a row may then
keep no key (its first key masked), which the mask alone would not show.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._config import cdiv
from ._launch import launch
from .attention import broadcast4, keep_at

EMPTY, FULL, MIXED = 0, 1, 2
CHUNK = 256  # keys a step of the class kernel ([BM, CHUNK] of the mask at once, CHUNK / BN tiles)


@triton.jit
def tile_class(kc, j, n_kc, R: tl.constexpr):
    """The class of key tile j of R forward tiles (R = 1 or 2) in the block whose classes start at kc (n_kc
    forward tiles): the tiles' own where they agree, else MIXED (an odd last tile alone)."""
    if R == 1:
        cls = tl.load(kc + j)
    else:
        c0 = tl.load(kc + 2 * j)
        c1 = tl.load(kc + 2 * j + 1, mask=2 * j + 1 < n_kc, other=c0)
        cls = tl.where(c0 == c1, c0, 2)
    return cls


@triton.jit
def block_index(b, h, qb, kb_b, kb_h, cq):
    """The keep block of (batch b, head h, query block qb): (b kb_b + h kb_h) blocks of the mask's (batch,
    head) entries, of cq blocks each (or of one, cq = 0, where the mask broadcasts over the queries)."""
    return (b * kb_b + h * kb_h) * tl.maximum(cq, 1) + qb * (cq > 0).to(tl.int64)


@triton.jit
def _runs(lo, f0, f1, hi, cls, j, valid, n):
    """(lo, f0, f1, hi) after the classes cls at positions j (valid ones, scanned in increasing order, n past the
    last): lo, hi the first and last + 1 not EMPTY, [f0, f1) the first run of FULL ones (n, n: none yet)."""
    live = valid & (cls != 0)
    lo = tl.minimum(lo, tl.min(tl.where(live, j, n), 0))
    hi = tl.maximum(hi, tl.max(tl.where(live, j + 1, 0), 0))
    f0 = tl.minimum(f0, tl.min(tl.where(valid & (cls == 1), j, n), 0))
    f1 = tl.minimum(f1, tl.min(tl.where(valid & (cls != 1) & (j > f0), j, n), 0))
    return lo, f0, f1, hi


@triton.jit
def _store_runs(OUT, lo, f0, f1, hi, n, scale):
    """OUT[0:4] = lo, f0, f1, hi, times scale: (0, 0, 0, 0) where nothing is live, f0 = f1 = lo where no tile is
    FULL (the FULL run ends at hi at most: the tiles past hi are EMPTY)."""
    lo = tl.where(hi == 0, 0, lo)
    no_full = f0 == n
    f0 = tl.where(no_full, lo, f0)
    f1 = tl.where(no_full, lo, tl.minimum(f1, hi))
    tl.store(OUT, lo * scale)
    tl.store(OUT + 1, f0 * scale)
    tl.store(OUT + 2, f1 * scale)
    tl.store(OUT + 3, hi * scale)


@triton.jit(do_not_specialize=["Tq", "Tk", "Hk", "sm_b", "sm_h", "sm_q", "sm_k", "n_kt"])
def _classes_kernel(KEEP, KCLS, JR, Tq, Tk, Hk, sm_b, sm_h, sm_q, sm_k, n_kt, BM: tl.constexpr, BN: tl.constexpr,
                    CH: tl.constexpr, CAUSAL: tl.constexpr):
    """One program per (keep block qb, mask batch x head kb): the classes of its key tiles and their runs
    (JR[blk] = jlo, f0, f1, jhi: `_runs`). CAUSAL: the mask and the causal one together."""
    qb = tl.program_id(0)
    kb = tl.program_id(1)
    blk = (kb * tl.num_programs(0) + qb).to(tl.int64)
    b = (kb // Hk).to(tl.int64)
    h = (kb % Hk).to(tl.int64)
    t = qb * BM + tl.arange(0, BM)
    rows = t < Tq
    NB: tl.constexpr = CH // BN
    seen = tl.zeros([BM], tl.int32)
    lo = n_kt
    f0 = n_kt
    f1 = n_kt
    hi = 0
    for c in range(0, n_kt, NB):
        keys = c * BN + tl.arange(0, CH)
        inside = rows[:, None] & (keys < Tk)[None, :]
        kept = keep_at(KEEP, b, h, t[:, None], keys[None, :], inside, sm_b, sm_h, sm_q, sm_k) & inside
        if CAUSAL:
            kept = kept & (keys[None, :] <= t[:, None])
        gone = inside & (kept == 0)
        seen = tl.maximum(seen, tl.max(kept.to(tl.int32), 1))
        any_kept = tl.max(tl.max(tl.reshape(kept.to(tl.int32), [BM, NB, BN]), 2), 0)
        any_gone = tl.max(tl.max(tl.reshape(gone.to(tl.int32), [BM, NB, BN]), 2), 0)
        cls = tl.where(any_kept == 0, 0, tl.where(any_gone == 0, 1, 2))
        j = c + tl.arange(0, NB)
        tl.store(KCLS + blk * n_kt + j, cls.to(tl.int8), mask=j < n_kt)
        lo, f0, f1, hi = _runs(lo, f0, f1, hi, cls, j, j < n_kt, n_kt)
    if tl.max((rows & (seen == 0)).to(tl.int32), 0) > 0:  # a row keeping no key: every tile swept, read
        for c in range(0, n_kt, NB):
            j = c + tl.arange(0, NB)
            tl.store(KCLS + blk * n_kt + j, tl.full([NB], 2, tl.int8), mask=j < n_kt)
        lo = 0
        f0 = n_kt
        hi = n_kt
    _store_runs(JR + 4 * blk, lo, f0, f1, hi, n_kt, 1)


@triton.jit(do_not_specialize=["n_blocks", "n_kt", "n_kt_b", "n_qb"])
def _columns_kernel(KCLS, QR, n_blocks, n_kt, n_kt_b, n_qb, R: tl.constexpr, CB: tl.constexpr):
    """One program per (backward key tile jb of R forward tiles, mask batch x head kb): the runs of its classes over
    the query blocks (QR[kb, jb] = qlo, g0, g1, qhi: `_runs`), in query blocks (a mask with one block, broadcast
    over the queries: its class for every query block)."""
    jb = tl.program_id(0)
    kb = tl.program_id(1)
    lo = n_blocks
    f0 = n_blocks
    f1 = n_blocks
    hi = 0
    for c in range(0, n_blocks, CB):
        qb = c + tl.arange(0, CB)
        kc = KCLS + (kb * n_blocks + qb).to(tl.int64) * n_kt
        # (tile_class's rule for a pair, with loads masked to the blocks: the interpreter takes no scalar mask on a
        # vector of pointers)
        if R == 1:
            cls = tl.load(kc + jb, mask=qb < n_blocks, other=0)
        else:
            c0 = tl.load(kc + 2 * jb, mask=qb < n_blocks, other=0)
            c1 = tl.load(kc + 2 * jb + 1, mask=(qb < n_blocks) & (2 * jb + 1 + 0 * qb < n_kt), other=c0)
            cls = tl.where(c0 == c1, c0, 2)
        lo, f0, f1, hi = _runs(lo, f0, f1, hi, cls, qb, qb < n_blocks, n_blocks)
    _store_runs(QR + 4 * (kb * n_kt_b + jb).to(tl.int64), lo, f0, f1, hi, n_blocks, tl.where(n_blocks == 1, n_qb, 1))


class KeepTiles:
    """A keep mask's tiles for one call's launch shape (query blocks of bm rows, key tiles of bn keys, backward key
    tiles of r of them): ``tensors``, the kernels' KCLS (mask batch x head x blocks, key tiles) int8, JR (..., 4)
    int32, each block's key tiles [jlo, jhi) not EMPTY and [f0, f1) its first run of FULL ones, and QR (mask batch
    x head, backward key tiles, 4) int32, the same of each backward key tile over the query blocks; ``ints``,
    `block_index`'s strides kb_b, kb_h, cq and KCLS's row length n_kc."""

    def __init__(self, keep: torch.Tensor, Tq: int, Tk: int, bm: int, bn: int, r: int, causal: bool = False):
        shape, (sm_b, sm_h, sm_q, sm_k) = broadcast4(keep)
        Bk, Hk, Tqk = shape[0], shape[1], Tq if causal else shape[2]
        n_kt, n_qb = cdiv(Tk, bn), cdiv(Tq, bm)
        n_blocks = n_qb if Tqk > 1 else 1
        dev = keep.device
        cls = torch.empty((Bk * Hk * n_blocks, n_kt), device=dev, dtype=torch.int8)
        jr = torch.empty((Bk * Hk * n_blocks, 4), device=dev, dtype=torch.int32)
        qr = torch.empty((Bk * Hk, cdiv(n_kt, r), 4), device=dev, dtype=torch.int32)
        self.tensors = cls, jr, qr
        self.ints = (Hk if Bk > 1 else 0), (1 if Hk > 1 else 0), (n_blocks if Tqk > 1 else 0), n_kt
        if n_qb == 0:  # (no query: nothing to launch, nor will the attention kernels)
            return
        launch(_classes_kernel, (n_blocks, Bk * Hk), (keep, cls, jr, Tqk, Tk, Hk, sm_b, sm_h, sm_q, sm_k, n_kt),
               dict(BM=bm, BN=bn, CH=max(CHUNK, bn), CAUSAL=bool(causal)), 8 if bm * CHUNK > 8192 else 4)
        launch(_columns_kernel, (cdiv(n_kt, r), Bk * Hk), (cls, qr, n_blocks, n_kt, cdiv(n_kt, r), n_qb),
               dict(R=r, CB=128), 4)


def _runs_reference(cls: torch.Tensor) -> torch.Tensor:
    """(..., 4) of `_runs` / `_store_runs` over the last dim of classes cls (..., n)."""
    n = cls.shape[-1]
    j = torch.arange(n)
    live, full = cls != EMPTY, cls == FULL
    lo = torch.where(live, j, n).amin(-1)
    hi = torch.where(live, j + 1, 0).amax(-1)
    lo = torch.where(hi == 0, 0, lo)
    f0 = torch.where(full, j, n).amin(-1)
    f1 = torch.where(~full & (j > f0[..., None]), j, n).amin(-1)
    no_full = f0 == n
    f0 = torch.where(no_full, lo, f0)
    f1 = torch.where(no_full, lo, torch.minimum(f1, hi))
    return torch.stack([lo, f0, f1, hi], -1).int()


def reference(keep: torch.Tensor, Tq: int, Tk: int, bm: int, bn: int, r: int, causal: bool = False) -> tuple:
    """`KeepTiles`' tensors by torch ops, on the CPU (the tests' reference)."""
    shape = broadcast4(keep)[0]
    Bk, Hk, Tqk = shape[0], shape[1], Tq if causal else shape[2]
    k4 = keep.reshape(shape).expand(Bk, Hk, Tqk, Tk)
    if causal:
        k4 = k4 & torch.ones(Tq, Tk, dtype=torch.bool, device=keep.device).tril()
    n_kt, n_qb = cdiv(Tk, bn), cdiv(Tq, bm)
    n_blocks = n_qb if Tqk > 1 else 1
    rows = n_blocks * bm if Tqk > 1 else 1
    # padding (rows past Tq, keys past Tk) counts as neither kept nor masked
    kept = torch.zeros(Bk, Hk, rows, n_kt * bn, dtype=torch.bool)
    inside = torch.zeros_like(kept)
    kept[:, :, :Tqk, :Tk] = k4.cpu()
    inside[:, :, :Tqk, :Tk] = True
    kept_t = kept.view(Bk, Hk, n_blocks, -1, n_kt, bn)
    gone_t = (inside & ~kept).view(Bk, Hk, n_blocks, -1, n_kt, bn)
    any_kept, any_gone = kept_t.any(5).any(3), gone_t.any(5).any(3)
    cls = torch.where(~any_kept, EMPTY, torch.where(~any_gone, FULL, MIXED))
    dead = (inside.any(3) & ~kept.any(3)).view(Bk, Hk, n_blocks, -1).any(3)
    cls = torch.where(dead[..., None], MIXED, cls)
    n_b = cdiv(n_kt, r)
    pairs = torch.nn.functional.pad(cls, (0, n_b * r - n_kt), value=-1).view(Bk, Hk, n_blocks, n_b, r)
    first, other = pairs[..., 0], pairs[..., -1]
    other = torch.where(other < 0, first, other)
    cls_b = torch.where(first == other, first, MIXED)
    qr = _runs_reference(cls_b.transpose(2, 3))
    if n_blocks == 1:
        qr = qr * n_qb
    return (cls.reshape(-1, n_kt).to(torch.int8), _runs_reference(cls).reshape(-1, 4),
            qr.reshape(Bk * Hk, n_b, 4))
