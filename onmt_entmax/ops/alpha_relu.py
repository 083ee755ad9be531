"""alpha-ReLU (Tezekbayev et al., "Speeding Up Entmax"): entmax with a fixed threshold.

    alpha_relu(z) = [(alpha - 1) z - tau]_+^{1/(alpha-1)},   alpha > 1, tau a constant.

Unnormalized (no search for tau, elementwise). Its derivative is p^{2-alpha} on the support:
d/dz [(a-1) z - tau]^{1/(a-1)} = [(a-1) z - tau]^{(2-a)/(a-1)} = p^{2-a}.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function

from . import _dispatch
from ._common import check_alpha, check_input, check_number, compute_dtype


def check_tau(tau: float, dtype: torch.dtype = torch.float32, name: str = "tau") -> float:
    """tau as a float, refused unless it is a number finite in the compute dtype of `dtype`
    (a tau of 1e39 is -inf in (alpha-1) z - tau in float32: every output 0)."""
    return check_number(tau, name, dtype)


def power_(x: Tensor, e: float) -> Tensor:
    """x^e in place for x >= 0, by multiplications and square roots for the common exponents."""
    if e == 1:
        return x
    if e == 2:
        return x.square_()
    if e == 0.5:
        return x.sqrt_()
    if e == 1.5:
        return x.mul_(x.sqrt())
    return x.pow_(e)


def alpha_relu_probs(x: Tensor, alpha: float, tau: float) -> Tensor:
    """p = [(alpha - 1) x - tau]_+^{1/(alpha-1)} of a checked x in its compute dtype (no autograd node)."""
    return power_(((alpha - 1) * x).sub_(tau).clamp_(min=0), 1.0 / (alpha - 1))


def alpha_relu_slope(p: Tensor, alpha: float) -> Tensor:
    """dp/dz = p^{2-alpha} where p > 0, 0 elsewhere."""
    if alpha == 2:
        return (p > 0).to(p.dtype)
    if alpha < 2:  # 0^{positive} = 0: no mask needed
        return power_(p.clone(), 2 - alpha)
    return torch.where(p > 0, p.pow(2 - alpha), torch.zeros_like(p))


class AlphaReLUFunction(Function):
    @staticmethod
    def forward(ctx, x: Tensor, alpha: float, tau: float) -> Tensor:
        p = alpha_relu_probs(x, alpha, tau)
        ctx.save_for_backward(p)
        ctx.alpha = alpha
        return p

    @staticmethod
    def backward(ctx, g: Tensor):
        (p,) = ctx.saved_tensors
        return g * alpha_relu_slope(p, ctx.alpha), None, None


def alpha_relu(z: Tensor, alpha: float = 1.5, tau: float = 0.0, dim: int = -1) -> Tensor:
    """alpha-ReLU [(alpha-1) z - tau]_+^{1/(alpha-1)} elementwise (alpha > 1, tau finite).

    `dim` is accepted for API symmetry with the normalized mappings; the map is elementwise.
    -inf entries give 0; float16/bfloat16 are computed in float32.
    """
    check_input(z)
    check_alpha(alpha, strict=True, dtype=z.dtype)
    tau = check_tau(tau, z.dtype)
    x = z.to(compute_dtype(z.dtype))
    return AlphaReLUFunction.apply(x, float(alpha), tau).to(z.dtype)


def alpha_relu_log(z: Tensor, alpha: float = 1.5, tau: float = 0.0) -> Tensor:
    """log alpha_relu(z) = log([(alpha-1) z - tau]_+) / (alpha-1): -inf exactly where p = 0.

    What beam search adds up, without forming p (so no p that underflows to 0 where the log is
    finite): five elementwise operations, one kernel on CUDA. Not differentiable (decoding);
    float16/bfloat16 are computed in float32 and returned in their dtype.
    """
    check_input(z)
    check_alpha(alpha, strict=True, dtype=z.dtype)
    tau = check_tau(tau, z.dtype)
    out = _dispatch.try_kernel("alpha_relu_log", z, float(alpha), tau)  # (decoding, every step)
    if out is not None:
        return out
    x = z.to(compute_dtype(z.dtype))
    with torch.no_grad():
        return torch.mul(x, alpha - 1).sub_(tau).clamp_(min=0).log_().div_(alpha - 1).to(z.dtype)
