"""The alpha-ReLU threshold tau without training: eq. (3) of "Speeding Up Entmax" (Tezekbayev et al.).

alpha-ReLU(z) = [(alpha-1) z - tau]_+^{1/(alpha-1)} uses a constant tau. The paper takes the mean
alpha-entmax threshold tau(z) of an untrained model (``tau_first_batch``), or predicts it
(``tau_formula``): the logits of an untrained Transformer are i.i.d. N(0, sigma^2) with

    sigma^2 = 2 d_model / (d_model + V)                          (their Lemma 3, Glorot init)

and, approximating the k largest of V normal draws by sigma Phi^{-1}(1 - i/V), the support
fraction p = k/V of alpha-entmax solves (eps = 1/V, q(x) = Phi^{-1}(1 - x))

    k * mean_{x in [eps, p]} [(alpha-1) sigma (q(x) - q(p))]^{1/(alpha-1)} = 1,          (*)

i.e. the entries above the threshold sum to one; then tau = (alpha-1) sigma q(p*). For alpha = 1.5
(*) is their eq. (11), q(p) = m(p) - sqrt(4 eps / (sigma^2 p) - s(p)) with m, s the mean and
variance of q on [eps, p], giving eq. (3): tau = sqrt(d_model / (2 (d_model + V))) Phi^{-1}(1 - p*).
Other alphas use (*) by quadrature (our extension of their Lemma 2, same approximations).
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import torch
from torch import Tensor

from .entmax import entmax_threshold

_N = NormalDist()
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(96)


def _probit(x: float) -> float:
    """Phi^{-1}(x)."""
    return _N.inv_cdf(x)


def _pdf(t: float) -> float:
    """phi(t) = exp(-t^2/2) / sqrt(2 pi)."""
    return math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)


def logit_sigma(d_model: int, vocab_size: int) -> float:
    """sigma = sqrt(2 d_model / (d_model + V)): std of untrained Transformer logits (Lemma 3)."""
    return math.sqrt(2.0 * d_model / (d_model + vocab_size))


def _moments_15(p: float, eps: float) -> tuple[float, float]:
    """m(p), s(p) of eqs. (7)-(8): mean and variance of q(x) = Phi^{-1}(1-x) for x uniform on [eps, p].

    Antiderivatives: int Phi^{-1}(x) dx = -phi(Phi^{-1}(x)); int Phi^{-1}(x)^2 dx = x - phi(t) t, t = Phi^{-1}(x).
    """
    ta, tb = _probit(eps), _probit(p)
    m = (_pdf(tb) - _pdf(ta)) / (p - eps)
    second = ((p - _pdf(tb) * tb) - (eps - _pdf(ta) * ta)) / (p - eps)
    return m, second - m * m


def _excess_15(p: float, eps: float, sigma: float) -> float:
    """k sigma^2/4 mean (q(x) - q(p))^2 - 1 = (sigma^2 p / (4 eps)) (s + (m - q(p))^2) - 1, for (*) at 1.5."""
    m, s = _moments_15(p, eps)
    return sigma * sigma * p / (4.0 * eps) * (s + (m - _probit(1.0 - p)) ** 2) - 1.0


def _mass(tau: float, lo: float, hi: float, sigma: float, alpha: float) -> float:
    """int_lo^hi [(alpha-1) sigma t - tau]_+^{1/(alpha-1)} phi(t) dt, Gauss-Legendre.

    (The integral over x in [eps, p] after the substitution t = q(x), dx = phi(t) dt.)
    """
    t = 0.5 * (hi - lo) * _NODES + 0.5 * (hi + lo)
    base = np.clip((alpha - 1.0) * sigma * t - tau, 0.0, None)
    vals = base ** (1.0 / (alpha - 1.0)) * np.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    return 0.5 * (hi - lo) * float(np.dot(_WEIGHTS, vals))


def _excess(p: float, eps: float, sigma: float, alpha: float) -> float:
    """Left side of (*) minus 1 for the support fraction p (threshold at the p-quantile, tau = (alpha-1) sigma q(p))."""
    lo, hi = _probit(1.0 - p), _probit(1.0 - eps)
    return p / (eps * (p - eps)) * _mass((alpha - 1.0) * sigma * lo, lo, hi, sigma, alpha) - 1.0


def _bisect(f, lo: float, hi: float, tol: float) -> float:
    """Root of f, increasing on [lo, hi] with f(lo) < 0 <= f(hi)."""
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def support_fraction(sigma: float, vocab_size: int, alpha: float = 1.5, tol: float = 1e-12) -> float:
    """p* in (1/V, 1 - 1/V]: the fraction of the V entries that alpha-entmax keeps, solving (*).

    The left side of (*) grows with p (more entries, each farther above the threshold), so p* is
    found by bisection on log p. Returns 1 - 1/V when every entry is kept (the dense regime of
    alpha near 1 with small sigma V, where (*) has no root). V = 2 leaves no p: (1/2, 1/2] is empty
    (the quantile grid q(i/V), i = 1..V-1, has the one point q(1/2) = 0), so V >= 3 is required.
    """
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be >= 3 (the support fraction p* lies in (1/V, 1 - 1/V], empty for "
                         f"V = 2), got {vocab_size}")
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    if not 1.0 < alpha <= 2.0:
        raise ValueError(f"alpha must be in (1, 2], got {alpha}")
    eps = 1.0 / vocab_size
    f = (lambda p: _excess_15(p, eps, sigma)) if alpha == 1.5 else (lambda p: _excess(p, eps, sigma, alpha))
    top = 1.0 - eps
    if f(top) < 0:
        return top
    return math.exp(_bisect(lambda lp: f(math.exp(lp)), math.log(eps * (1 + 1e-9)), math.log(top), tol))


def tau_normal(sigma: float, vocab_size: int, alpha: float = 1.5) -> float:
    """alpha-entmax threshold of V i.i.d. N(0, sigma^2) scores: tau ~ (alpha-1) sigma Phi^{-1}(1 - p*) (Lemma 2).

    Dense regime (every entry kept): tau below (alpha-1) sigma q(1 - 1/V) solving the same mass
    equation over all V entries, continuous with the sparse branch at p = 1 - 1/V.
    """
    p = support_fraction(sigma, vocab_size, alpha)
    eps = 1.0 / vocab_size
    if p < 1.0 - eps:
        return (alpha - 1.0) * sigma * _probit(1.0 - p)
    lo, hi = _probit(eps), _probit(1.0 - eps)
    scale = (1.0 - eps) / (eps * (1.0 - 2.0 * eps))
    top = (alpha - 1.0) * sigma * lo  # the threshold at the smallest entry
    # the mass decreases in tau; bracket downwards until it exceeds 1
    step = 1.0
    while scale * _mass(top - step, lo, hi, sigma, alpha) < 1.0:
        step *= 2.0
    return -_bisect(lambda u: scale * _mass(-u, lo, hi, sigma, alpha) - 1.0, -top, step - top, 1e-12)


def tau_formula(d_model: int, vocab_size: int, alpha: float = 1.5) -> float:
    """Eq. (3): tau = (alpha-1) sigma Phi^{-1}(1 - p*), sigma^2 = 2 d_model / (d_model + V).

    For alpha = 1.5 this is sqrt(d_model / (2 (d_model + V))) Phi^{-1}(1 - p*) (their Table 3:
    d_model 512, V = 10k / 40k / 60k -> .33 / .17 / .14). Valid for an OpenNMT-py Transformer with
    Glorot-uniform generator weights (``param_init_glorot``) fed by a layer norm.
    """
    if int(d_model) < 1:
        raise ValueError(f"d_model must be a positive integer, got {d_model}")
    if int(vocab_size) < 3:
        raise ValueError(f"vocab_size must be >= 3 (the support fraction p* of eq. 3 lies in (1/V, 1 - 1/V], "
                         f"empty for V = 2), got {vocab_size}")
    return tau_normal(logit_sigma(int(d_model), int(vocab_size)), int(vocab_size), float(alpha))


def tau_first_batch(logits: Tensor, alpha: float = 1.5, mask: Tensor | None = None) -> float:
    """Mean alpha-entmax threshold of logits (..., V): tau = mean_rows tau(z), p = [(alpha-1) z - tau]_+^{1/(alpha-1)}.

    ``mask`` (the leading shape, True = keep) drops padding rows. The "first batch" estimate of
    the paper when ``logits`` are an untrained model's outputs on one batch.
    """
    if not isinstance(logits, Tensor) or logits.dim() < 1 or logits.size(-1) < 1:
        raise ValueError("logits must be a tensor (..., V) with V >= 1")
    tau = entmax_threshold(logits.detach(), alpha=alpha, dim=-1).squeeze(-1)
    if mask is not None:
        if mask.shape != tau.shape:
            raise ValueError(f"mask must have the leading shape of logits {tuple(tau.shape)}, got {tuple(mask.shape)}")
        tau = tau[mask.bool()]
    if tau.numel() == 0 or not torch.isfinite(tau).all():
        raise ValueError("logits: need at least one row with a finite entry (all-(-inf) rows have no threshold)")
    return float(tau.double().mean())


__all__ = ["logit_sigma", "support_fraction", "tau_normal", "tau_formula", "tau_first_batch"]
