"""alpha-entmax for any alpha >= 1 by bisection on the threshold (Blondel et al. 2019; Peters et al. 2019).

    entmax_alpha(z) = [(alpha - 1) z - tau]_+^{1/(alpha-1)},   sum_i p_i = 1.

With x = (alpha - 1)(z - max z), tau lies in [-1, -d^{1-alpha}]: at tau = -1 the largest entry alone
has mass 1, and at tau = -d^{1-alpha} every entry has mass at most 1/d. The bisection runs on
s = -tau - 1 in [d^{1-alpha} - 1, 0] and forms p_i = exp(log1p(x_i + s) / (alpha - 1)): near alpha = 1
x_i - tau is 1 plus a term of order alpha - 1, which float32 holds to 6e-8 absolute, and the power
1/(alpha - 1) would multiply that error (6e-3 relative at alpha = 1 + 1e-5, further from the truth
than softmax); x_i + s keeps it relative, and p tends to softmax's exp(z_i - max z - theta) as
alpha -> 1 (s = expm1(-(alpha - 1) theta)). f(s) = sum p_i(s) - 1 is increasing, so bisection
halves the bracket (width < 1) every step.

Iterations: the default `n_iter` is the number of halvings after which the bracket is below the
resolution of the compute dtype (2^-24 for float32, 2^-53 for float64), plus a few: 30 for float32,
60 for float64; more cannot change s, so `n_iter` is capped at MAX_ITER. The result is then divided
by its sum, so rows sum to 1 to within rounding (|sum p - 1| <= 1e-6 in float32).

Gradients: w.r.t. z by Proposition 1 of Peters et al. 2019 (u = p^{2-alpha}); w.r.t. alpha by
Correia et al. 2019: with p~ = u / sum u and the Shannon terms s_i = p_i log p_i,
    dp_i/dalpha = (p_i - p~_i) / (alpha - 1)^2 - (s_i - p~_i sum_j s_j) / (alpha - 1).
Both terms grow like 1/(alpha - 1) and cancel; written with L = log p, e = alpha - 1, W = sum u,
A = sum_j p_j L_j and psi_i = (p_i^{-e} - 1 + e L_i) / e^2 = L_i^2 h(e L_i), h(x) = (e^-x - 1 + x) / x^2
(a series for |x| < 1/2, h(0) = 1/2), the same quantity is
    dp_i/dalpha = p_i [Psi (1 - e L_i) - psi_i (1 - e A)] / W,   Psi = sum_j p_j psi_j,
with no cancellation, and at alpha = 1 (softmax) it is the limit p_i (sum_j p_j L_j^2 - L_i^2) / 2.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor
from torch.autograd import Function

from . import _dispatch
from ._common import (
    Alpha,
    Solved,
    check_alpha,
    check_input,
    compute_dtype,
    log_power_slope,
    on_last_dim,
    shift_by_max,
    support_backward,
    top_candidates,
)

_DEFAULT_ITERS = {torch.float32: 30, torch.float64: 60}
MAX_ITER = 200  # past ~60 halvings the bracket is below float64's resolution: more iterations change nothing


def default_n_iter(dtype: torch.dtype) -> int:
    return _DEFAULT_ITERS.get(compute_dtype(dtype), 30)


def check_n_iter(n_iter, dtype: torch.dtype, name: str = "n_iter", error: type = ValueError) -> int:
    """The number of bisection steps: the dtype's default for None, else an int in [1, MAX_ITER] (not a bool)."""
    if n_iter is None:
        return default_n_iter(dtype)
    if isinstance(n_iter, bool) or not isinstance(n_iter, int) or not 1 <= n_iter <= MAX_ITER:
        raise error(f"{name} must be an integer in [1, {MAX_ITER}] (60 bisection steps already reach "
                    f"float64's resolution; more would only slow it down), got {n_iter!r}")
    return n_iter


def _power_of_1p(u: Tensor, inv: Tensor) -> Tensor:
    """[1 + u]_+^inv as exp(inv log1p(u)): 0 where u <= -1 (inv > 0)."""
    return torch.exp(torch.log1p(u.clamp(min=-1.0)) * inv)


def _bisect_shift(x: Tensor, am1: Tensor, n_iter: int) -> Tensor:
    """s = -tau - 1 in [d^{1-alpha} - 1, 0] for rows x = (alpha-1)(z - max z) (keepdim); am1 = alpha - 1."""
    d = (x > float("-inf")).sum(dim=-1, keepdim=True).clamp(min=1).to(x.dtype)
    lo = torch.expm1(-am1 * torch.log(d))
    hi = torch.zeros_like(lo)
    inv = 1.0 / am1
    for _ in range(n_iter):
        mid = (lo + hi) / 2
        mass = _power_of_1p(x + mid, inv).sum(dim=-1, keepdim=True)
        above = mass >= 1
        hi = torch.where(above, mid, hi)
        lo = torch.where(above, lo, mid)
    # hi keeps sum p >= 1, so the row never vanishes: for a huge alpha p = (1 + x + s)^{1/(alpha-1)} is
    # flat in s, the bracket closes on s = -1, which the dtype cannot tell from a midpoint just above it
    return hi


def alpha_like(x: Tensor, alpha: Alpha) -> Tensor:
    """alpha as a tensor of x's dtype broadcastable to x with size 1 on the last dim."""
    a = torch.as_tensor(alpha, dtype=x.dtype, device=x.device)
    if a.dim() == 0:
        return a.reshape([1] * x.dim())
    if a.shape[-1] != 1:
        raise ValueError(f"alpha must have size 1 along dim, got shape {tuple(a.shape)} for input "
                         f"{tuple(x.shape)}")
    while a.dim() < x.dim():
        a = a.unsqueeze(0)
    return a


def bisect_solve(z: Tensor, a: Tensor, n_iter: int) -> Solved:
    """alpha-entmax (every alpha > 1) of the rows of z by bisection on their candidates only.

    Entries with z <= max z - 1/(alpha-1) have x <= -1 <= tau, hence p = 0; the bisection runs on
    the others (bracket [d^{1-alpha} - 1, 0] of s is valid for any superset of the support of size d).
    """
    am1 = a - 1
    reach = float(1.0 / am1.min())
    vals, m, dead = top_candidates(z, reach)
    zc = vals - m
    xc = zc * am1
    shift = _bisect_shift(xc, am1, n_iter)
    inv = 1.0 / am1
    pc = _power_of_1p(xc + shift, inv)
    total = pc.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(z.dtype).tiny)
    pc = pc / total
    shift = torch.where(dead, torch.full_like(shift, float("-inf")), shift) if bool(dead.any()) else shift
    # the same arithmetic as on the candidates, so that p sums to 1 as pc does
    p = _power_of_1p((z - m).mul_(am1).add_(shift), inv).div_(total)
    return Solved(p, pc, zc, -1 - shift + am1 * m, m, dead)


def bisect_last(x: Tensor, a: Tensor, n_iter: int) -> tuple[Tensor, Tensor]:
    """(p, tau) along the last dim; rows with alpha == 1 are softmax; dead rows are zeros."""
    soft = a == 1
    if not bool(soft.any()):
        solved = bisect_solve(x, a, n_iter)
        return solved.p, solved.tau
    p_soft = softmax_safe(x, -1)
    if bool(soft.all()):
        return p_soft, torch.full_like(x[..., :1], float("nan"))
    solved = bisect_solve(x, torch.where(soft, torch.full_like(a, 2.0), a), n_iter)
    return torch.where(soft, p_soft, solved.p), torch.where(soft, torch.full_like(solved.tau, float("nan")),
                                                            solved.tau)


def alpha_gradient(p: Tensor, g: Tensor, a: Tensor, u: Tensor) -> Tensor:
    """g . dp/dalpha per row (keepdim), Correia et al. 2019 in the cancellation-free form of the
    module docstring (exact at alpha = 1: softmax's limit); u = p^{2-alpha} on the support, shared
    with the input gradient."""
    e = a - 1
    pos = p > 0
    logp = torch.where(pos, torch.log(torch.where(pos, p, torch.ones_like(p))), torch.zeros_like(p))
    w = u.sum(dim=-1, keepdim=True)
    w = torch.where(w > 0, w, torch.ones_like(w))
    p_psi = torch.where(pos, p * logp * logp * log_power_slope(e * logp), torch.zeros_like(p))
    big_psi = p_psi.sum(dim=-1, keepdim=True)
    mean_log = (p * logp).sum(dim=-1, keepdim=True)
    dp = (p * big_psi * (1 - e * logp) - p_psi * (1 - e * mean_log)) / w
    return (g * dp).sum(dim=-1, keepdim=True)


def reduce_to_shape(grad: Tensor, shape: torch.Size) -> Tensor:
    """Sum a broadcast gradient back to `shape`."""
    while grad.dim() > len(shape):
        grad = grad.sum(dim=0)
    for i, n in enumerate(shape):
        if n == 1 and grad.shape[i] != 1:
            grad = grad.sum(dim=i, keepdim=True)
    return grad


class EntmaxBisectFunction(Function):
    """alpha-entmax over the last dim with gradients w.r.t. the input and alpha."""

    @staticmethod
    def forward(ctx, x: Tensor, alpha: Tensor, n_iter: int) -> Tensor:
        a = alpha_like(x, alpha)
        p, _ = bisect_last(x, a, n_iter)
        ctx.save_for_backward(p, a)
        ctx.alpha_shape = alpha.shape
        return p

    @staticmethod
    def backward(ctx, g: Tensor):
        p, a = ctx.saved_tensors
        u = torch.where(p > 0, p.pow(2 - a), torch.zeros_like(p))
        dx = support_backward(p, g, u)
        da = None
        if ctx.needs_input_grad[1]:
            da = reduce_to_shape(alpha_gradient(p, g, a, u), ctx.alpha_shape)
        return dx, da, None


def entmax_bisect(z: Tensor, alpha: Alpha = 1.5, dim: int = -1, n_iter: Optional[int] = None) -> Tensor:
    """alpha-entmax along `dim` for any alpha >= 1: [(alpha-1) z - tau]_+^{1/(alpha-1)}, summing to 1.

    `alpha` is a float or a tensor broadcastable to `z` with size 1 along `dim` (per row / per
    head); it receives a gradient when it requires one. alpha == 1 gives softmax exactly.
    `n_iter` bisection steps (default: 30 in float32, 60 in float64; see the module docstring).
    -inf entries get 0; an all -inf row gives zeros; float16/bfloat16 are computed in float32.
    """
    check_input(z)
    check_alpha(alpha, dtype=z.dtype)
    n = check_n_iter(n_iter, z.dtype)
    fast = _dispatch.kernel("entmax_bisect", z, dim, alpha=alpha)
    if fast is not None:
        return fast(z, alpha, dim, n)
    if not isinstance(alpha, Tensor):
        if float(alpha) == 1.0:
            return softmax_safe(z, dim)
        alpha = torch.tensor(float(alpha), dtype=compute_dtype(z.dtype), device=z.device)
    else:
        alpha = alpha.to(compute_dtype(z.dtype))
        if alpha.dim() == z.dim() and z.dim() > 0:
            alpha = alpha.movedim(dim, -1)
    return on_last_dim(lambda x: EntmaxBisectFunction.apply(x, alpha, n), z, dim)


def softmax_safe(z: Tensor, dim: int = -1) -> Tensor:
    """Softmax (alpha = 1) with the same conventions: an all -inf row gives zeros, not NaN."""
    def _soft(x: Tensor) -> Tensor:
        xs, _, dead = shift_by_max(x)
        p = torch.softmax(xs, dim=-1)
        return torch.where(dead, torch.zeros_like(p), p)
    return on_last_dim(_soft, z, dim)
