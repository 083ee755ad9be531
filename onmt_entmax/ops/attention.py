"""Scaled dot-product attention with a sparse normalizer.

    out = drop(pi(scale q k^T + mask)) v,   pi in {sparsemax, 1.5-entmax, alpha-entmax},

with masked keys at -1e18, the fill OpenNMT-py uses (they get weight exactly 0; a row with every
key masked attends uniformly, as OpenNMT-py's eager path does), and drop the attention dropout
of training (weights zeroed with probability r, the others scaled by 1 / (1 - r)). The torch
reference composes the mapping with two matmuls and is differentiable. On CUDA, calls that need
no gradient (decoding) run one fused kernel (`triton/attention.py`), calls that need one on short
rows two launches with a single autograd node (`triton/attention_tiles.py`): host work, not GPU
time, is what sparse attention costs over softmax's fused SDPA call there. Longer rows take the
tiled kernels of `triton/attention_long.py` (calls without a gradient: beyond the decoding kernel's
keys), whose memory grows as Tq + Tk, not Tq x Tk (the weights are recomputed tile by tile).
"""
from __future__ import annotations

import math
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _dispatch
from ._common import SHORT_ROW_KEYS as SHORT_ROW_KEYS  # (public: longer rows take the tiled kernels)
from ._common import Alpha, alpha_in_range, check_alpha, check_input, compute_dtype
from .bounded_alpha import bounded_alpha
from .entmax import KINDS, mapping_of_kind

MASKED = -1e18


def _reference(q: Tensor, k: Tensor, v: Tensor, keep: Optional[Tensor], kind: str, alpha: Alpha,
               scale: float, n_iter: Optional[int], dropout_p: float = 0.0, return_weights: bool = False):
    scores = torch.matmul(q, k.transpose(-2, -1)).to(compute_dtype(q.dtype)) * scale
    if keep is not None:
        scores = scores.masked_fill(~keep, MASKED)
    p = mapping_of_kind(scores, kind, alpha, -1, n_iter)
    out = torch.matmul((F.dropout(p, dropout_p) if dropout_p > 0 else p).to(v.dtype), v)
    return (out, p.detach()) if return_weights else out


def sparse_attention(q: Tensor, k: Tensor, v: Tensor, keep: Optional[Tensor] = None, kind: str = "entmax15",
                     alpha: Alpha = 1.5, scale: Optional[float] = None, n_iter: Optional[int] = None,
                     dropout_p: float = 0.0, return_weights: bool = False, alpha_logit: Optional[Tensor] = None,
                     alpha_bounds: tuple[float, float] = (1.01, 2.0),
                     is_causal: bool = False) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """drop(pi(scale q k^T)) v with keys where ``keep`` is False masked (weight 0).

    q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv); ``keep`` a bool tensor broadcastable to
    (..., Tq, Tk) (True = attend, as ``scaled_dot_product_attention``'s boolean mask) or None;
    ``kind`` one of sparsemax / entmax15 / entmax_bisect; ``alpha`` (entmax_bisect) a float or a
    tensor broadcastable to (..., Tq, 1), e.g. (H, 1, 1) for one alpha per head; ``scale``
    defaults to 1/sqrt(D); ``dropout_p`` the attention dropout, applied whenever it is > 0 (as
    ``scaled_dot_product_attention``'s: pass 0 outside training). Scores of float16/bfloat16 inputs
    are computed in float32; the result has v's dtype. ``return_weights``: also the attention weights
    pi(scale q k^T) (before dropout, float32 or float64, no gradient), as (out, weights).

    ``alpha_logit`` (entmax_bisect, instead of ``alpha``): a 1-D tensor of H or 1 logits a, one per
    head (dim -3 of q), of the learned alphas of "Adaptively Sparse Transformers",
    alpha = clamp(1 + sigmoid(a), *alpha_bounds), differentiated through; on CUDA with gradients the
    attention kernels compute alpha and dL/da themselves (no separate op and reduction a call).

    ``is_causal``: keys after the query masked too (key j > query t, top-left aligned, as
    ``scaled_dot_product_attention``'s), without a mask in memory where the tiled kernels run.

    On CUDA every call with a gradient (or dropout) and rows longer than the short-row tiles'
    (`triton/attention_tiles.py`), and every call without one beyond the decoding kernel's keys, runs
    the tiled kernels of `triton/attention_long.py`, which keep O(Dv) numbers a query row, not the
    Tq x Tk weights; a call that wants the weights (``return_weights``) takes the materialized path.
    """
    if not torch.is_grad_enabled() and alpha_logit is None and dropout_p == 0 and not return_weights \
            and not is_causal \
            and isinstance(q, Tensor) and isinstance(k, Tensor) and isinstance(v, Tensor):
        # decoding, every attention layer at every step: the kernel's own checks (shapes, dtypes,
        # strides, mask, alpha) decide, and anything they refuse takes the checked path below
        if kind == "entmax_bisect":
            check_alpha(alpha, dtype=q.dtype)  # (a tensor alpha: checked once until it changes)
        out = _dispatch.try_kernel("sparse_attention_decode", q, k, v, keep, kind, alpha,
                                   None if scale is None else float(scale))
        if out is not None:
            return out
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_input(x, name)
    if kind not in KINDS:
        raise ValueError(f"sparse_attention kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"sparse_attention: q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} "
                         "need q and k to share the last dim and k and v the key dim")
    if keep is not None and keep.dtype != torch.bool:
        raise TypeError(f"sparse_attention: keep must be a bool mask, got dtype {keep.dtype}")
    if alpha_logit is not None:
        _check_alpha_logit(alpha_logit, kind, alpha_bounds, q)
    elif kind == "entmax_bisect":
        check_alpha(alpha, dtype=q.dtype)
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"sparse_attention: dropout_p must be in [0, 1], got {dropout_p!r}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    wants_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad or (
        isinstance(alpha, Tensor) and alpha.requires_grad) or (alpha_logit is not None and alpha_logit.requires_grad))
    call = dict(k=k, v=v, keep=keep, kind=kind, dropout_p=dropout_p, return_weights=return_weights,
                is_causal=is_causal)
    if alpha_logit is not None:
        if wants_grad:
            fast = _dispatch.kernel("sparse_attention_train", q, alpha=alpha_logit, **call)
            if fast is not None:
                return fast(q, k, v, keep, kind, alpha_logit, scale, dropout_p, return_weights, alpha_bounds,
                            is_causal)
        alpha = alpha_in_range(bounded_alpha(alpha_logit, *alpha_bounds).view(-1, 1, 1))
    if is_causal:  # the tiled kernels mask by position; every other path reads a mask
        fast = _dispatch.kernel("sparse_attention_train", q, alpha=alpha, **call)
        if fast is not None:
            return fast(q, k, v, keep, kind, alpha, scale, dropout_p, return_weights, None, True)
        if keep is not None:
            _check_keep(keep, q, k)
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        keep = causal if keep is None else keep & causal
        call.update(keep=keep, is_causal=False)
    if wants_grad or dropout_p > 0 or return_weights:
        fast = _dispatch.kernel("sparse_attention_train", q, alpha=alpha, **call)
        if fast is not None:
            return fast(q, k, v, keep, kind, alpha, scale, dropout_p, return_weights)
    else:  # no gradient wanted, and not tried above: alphas from logits, or grad mode on for inputs that need
        # none (a call the early attempt refused is asked again here, then takes the reference)
        out = _dispatch.try_kernel("sparse_attention_decode", q, k, v, keep, kind, alpha, scale)
        if out is not None:
            return out
    if keep is not None:  # (the kernel refuses a keep of the wrong shape: checked here)
        _check_keep(keep, q, k)
    return _reference(q, k, v, keep, kind, alpha, scale, n_iter, dropout_p, return_weights)


def _check_alpha_logit(alpha_logit: Tensor, kind: str, bounds: tuple[float, float], q: Tensor) -> None:
    """ValueError unless alpha_logit holds one float per head of q (dim -3), or one, for entmax_bisect,
    and the bounds are 1 <= lo <= hi."""
    if kind != "entmax_bisect":
        raise ValueError(f"sparse_attention: alpha_logit is for kind='entmax_bisect', got kind={kind!r}")
    if not isinstance(alpha_logit, Tensor):
        raise TypeError(f"sparse_attention: alpha_logit must be a tensor, got {type(alpha_logit).__name__}")
    if q.dim() < 3:
        raise ValueError(f"sparse_attention: alpha_logit needs q with a head dim, (..., H, Tq, D), got q "
                         f"{tuple(q.shape)}")
    heads = q.shape[-3]
    if not (alpha_logit.is_floating_point() and alpha_logit.dim() == 1 and alpha_logit.numel() in (1, heads)):
        raise ValueError(f"sparse_attention: alpha_logit must be a 1-D float tensor of {heads} (one per head) or "
                         f"1 values, got shape {tuple(alpha_logit.shape)}, dtype {alpha_logit.dtype}")
    lo, hi = bounds
    if not 1.0 <= lo <= hi:
        raise ValueError(f"sparse_attention: alpha_bounds must satisfy 1 <= lo <= hi, got {bounds!r}")


def _check_keep(keep: Tensor, q: Tensor, k: Tensor) -> None:
    """ValueError unless keep broadcasts to the scores (..., queries, keys) of q and k."""
    try:
        scores = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
        ok = torch.broadcast_shapes(keep.shape, scores) == scores
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"sparse_attention: keep {tuple(keep.shape)} does not broadcast to the scores of "
                         f"q {tuple(q.shape)} and k {tuple(k.shape)}: (..., queries, keys)")
