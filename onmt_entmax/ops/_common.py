"""Shared plumbing of the mappings: argument checks, dtype policy and the exact sort-based core.

Every mapping works on the last dimension of a float32/float64 tensor; the public wrappers move
`dim` there, upcast half precision (float16/bfloat16 are computed in float32 and returned in the
input dtype) and move it back.
"""
from __future__ import annotations

from typing import Callable, Union

import torch
from torch import Tensor

Alpha = Union[float, Tensor]

_HALF = (torch.float16, torch.bfloat16)


def check_alpha(alpha: Alpha, name: str = "alpha", strict: bool = False) -> None:
    """Raise ValueError unless alpha >= 1 (alpha > 1 when `strict`)."""
    bad = (lambda a: a <= 1) if strict else (lambda a: a < 1)
    bound = "> 1" if strict else ">= 1"
    if isinstance(alpha, Tensor):
        if not torch.is_floating_point(alpha):
            raise TypeError(f"{name} must be a float tensor, got dtype {alpha.dtype}")
        if alpha.numel() and (bool(bad(alpha.detach()).any()) or bool(torch.isnan(alpha).any())):
            raise ValueError(f"{name} must be {bound} everywhere, got min {alpha.detach().min().item():g}")
    else:
        a = float(alpha)
        if a != a or bad(a):
            raise ValueError(f"{name} must be {bound}, got {alpha!r}")


def check_input(z: Tensor, name: str = "input") -> None:
    if not isinstance(z, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(z).__name__}")
    if not torch.is_floating_point(z):
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {z.dtype}")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float16/bfloat16 are computed in float32; float32/float64 as they are."""
    return torch.float32 if dtype in _HALF else dtype


def on_last_dim(fn: Callable[..., Tensor], z: Tensor, dim: int, *args) -> Tensor:
    """Apply `fn(x, *args)` (a row-wise map over the last dim) along `dim`, in the compute dtype.

    Tensor arguments in `args` (per-row alpha) are moved the same way as `z`.
    """
    check_input(z)
    x = z.movedim(dim, -1)
    args = tuple(a.movedim(dim, -1) if isinstance(a, Tensor) and a.dim() == z.dim() else a
                 for a in args)
    cdt = compute_dtype(z.dtype)
    out = fn(x.to(cdt), *args)
    return out.to(z.dtype).movedim(-1, dim)


def shift_by_max(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """x - max(x) row-wise, with fully -inf rows mapped to a zero row.

    Returns (shifted, row max, dead-row mask). A row whose entries are all -inf (a fully
    masked attention row) is flagged `dead`; callers output zeros there.
    """
    m = x.max(dim=-1, keepdim=True).values
    dead = m == float("-inf")
    m = torch.where(dead, torch.zeros_like(m), m)
    xs = x - m
    xs = torch.where(dead, torch.zeros_like(xs), xs)
    return xs, m, dead


def sorted_candidates(xs: Tensor, reach: float = 1.0) -> Tensor:
    """Entries of each row that can be in the support, sorted in decreasing order.

    For sparsemax and 1.5-entmax written as p = [x - tau]_+^{1/(a-1)} with max x = 0, the
    threshold satisfies tau >= -1 (p_max <= 1), so the support lies in {x > -reach} with
    reach = 1. Only the k = max_row |{x > -1}| largest entries are sorted (a top-k instead
    of a full sort); flat rows with many candidates fall back to a full sort.
    """
    d = xs.shape[-1]
    if d <= 64:
        return xs.sort(dim=-1, descending=True).values
    k = int((xs > -reach).sum(dim=-1).max().item()) if xs.numel() else 1
    k = max(k, 1)
    if 4 * k >= d:
        return xs.sort(dim=-1, descending=True).values
    return xs.topk(k, dim=-1, sorted=True).values


def support_backward(p: Tensor, g: Tensor, u: Tensor) -> Tensor:
    """Jacobian-vector product of an entmax mapping (Peters et al. 2019, Proposition 1).

    With u = p^{2-alpha} on the support (0 elsewhere):  dz = u * g - (sum(u * g) / sum(u)) u.
    A zero row (fully masked input) has u = 0 and gets a zero gradient.
    """
    ug = u * g
    su = u.sum(dim=-1, keepdim=True)
    q = ug.sum(dim=-1, keepdim=True) / torch.where(su > 0, su, torch.ones_like(su))
    return ug - q * u
