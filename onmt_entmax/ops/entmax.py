"""One entry point for alpha-entmax and its threshold, choosing the exact algorithm when there is one."""
from __future__ import annotations

from typing import Optional

from torch import Tensor

from ._common import KINDS, Alpha, check_alpha, check_input, compute_dtype  # noqa: F401 (KINDS is re-exported)
from .entmax15 import entmax15, entmax15_threshold
from .entmax_bisect import alpha_like, bisect_last, check_n_iter, entmax_bisect, softmax_safe
from .sparsemax import sparsemax, sparsemax_threshold


def mapping_of_kind(z: Tensor, kind: str, alpha: Alpha = 1.5, dim: int = -1, n_iter: Optional[int] = None) -> Tensor:
    """pi(z) along `dim` for `kind` in KINDS (`alpha` and `n_iter` for entmax_bisect only)."""
    if kind == "sparsemax":
        return sparsemax(z, dim)
    if kind == "entmax15":
        return entmax15(z, dim)
    return entmax_bisect(z, alpha, dim, n_iter=n_iter)


def entmax(z: Tensor, alpha: Alpha = 1.5, dim: int = -1, n_iter: Optional[int] = None) -> Tensor:
    """alpha-entmax along `dim`: alpha = 1 softmax, 1.5 exact 1.5-entmax, 2 exact sparsemax, else bisection.

    A tensor `alpha` (per row / per head, possibly learnable) always takes the bisection path.
    """
    check_input(z)
    check_alpha(alpha, dtype=z.dtype)
    if not isinstance(alpha, Tensor):
        a = float(alpha)
        if a == 1.0:
            return softmax_safe(z, dim)
        if a == 1.5:
            return entmax15(z, dim)
        if a == 2.0:
            return sparsemax(z, dim)
    return entmax_bisect(z, alpha, dim, n_iter)


def entmax_threshold(z: Tensor, alpha: Alpha = 1.5, dim: int = -1, n_iter: Optional[int] = None) -> Tensor:
    """tau (keepdim along `dim`) such that entmax(z) = [(alpha-1) z - tau]_+^{1/(alpha-1)}.

    Exact for alpha 1.5 and 2, by bisection otherwise; +inf for rows that are entirely -inf
    (no entry passes it).
    Used for the alpha-ReLU threshold estimate (the mean 1.5-entmax threshold of an untrained model).
    """
    check_input(z)
    check_alpha(alpha, strict=True, dtype=z.dtype)
    x = z.movedim(dim, -1).detach().to(compute_dtype(z.dtype))
    if not isinstance(alpha, Tensor) and float(alpha) == 1.5:
        tau = entmax15_threshold(x)
    elif not isinstance(alpha, Tensor) and float(alpha) == 2.0:
        tau = sparsemax_threshold(x)
    else:
        if isinstance(alpha, Tensor) and alpha.dim() == z.dim():
            alpha = alpha.movedim(dim, -1)
        a = alpha_like(x, alpha)
        n = check_n_iter(n_iter, x.dtype)
        _, tau = bisect_last(x, a, n)
    return tau.movedim(-1, dim)
