"""Fenchel-Young losses of the sparse mappings (Blondel et al. 2020; Peters et al. 2019).

For an entmax mapping with Tsallis entropy H_alpha(p) = (1 - sum p^alpha) / (alpha (alpha - 1))
(Shannon at alpha = 1):

    L(z, y) = (p - e_y)^T z + H_alpha(p),   p = entmax_alpha(z),   dL/dz = p - e_y.

alpha-ReLU (fixed threshold tau, unnormalized p) has the loss whose gradient is exactly
alpha_relu(z) - e_y (Tezekbayev et al., Lemma 1):

    L(z, y) = sum_i p_i^alpha / alpha - z_y + (1 + alpha tau) / (alpha (alpha - 1)),

i.e. Omega*(z) - z_y + Omega(e_y) with Omega(mu) = sum mu^alpha / (alpha (alpha-1)) + tau sum mu / (alpha-1);
it is >= 0 and is 0 iff p = e_y.

Label smoothing is the Fenchel-Young one (Peters & Martins 2021): the loss against the smoothed
target q = (1 - eps) e_y + eps u, with u uniform over the classes whose logit is finite
(classes at -inf are impossible and receive no mass):

    L_eps(z, y) = L(z, y) + eps (z_y - mean_u z) - H_alpha(q),   dL_eps/dz = p - q.

The calling convention is that of nn.CrossEntropyLoss: input (N, C) with target (N,), or
(N, C, d1, ...) with (N, d1, ...), or (C,) with (); `ignore_index` rows give 0 and are left out of
the mean (a mean over no rows is 0, not NaN); a target outside [0, C) raises ValueError.
"""
from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor, nn
from torch.autograd import Function

from . import _dispatch
from ._common import (
    Alpha,
    Solved,
    check_alpha,
    check_input,
    compute_dtype,
    device_check,
    expm1_ratio,
    expm1_ratio_slope,
    shift_by_max,
)
from .alpha_relu import alpha_relu_probs, check_tau, power_
from .entmax15 import entmax15_solve
from .entmax_bisect import alpha_like, bisect_last, bisect_solve, check_n_iter, reduce_to_shape
from .sparsemax import sparsemax_solve

KINDS = ("sparsemax", "entmax15", "entmax_bisect", "alpha_relu")
REDUCTIONS = ("mean", "sum", "none")


def _log_or_zero(p: Tensor) -> Tensor:
    pos = p > 0
    return torch.where(pos, torch.log(torch.where(pos, p, torch.ones_like(p))), torch.zeros_like(p))


def tsallis_entropy(p: Tensor, alpha: Tensor) -> Tensor:
    """H_alpha(p) = (1 - sum p^alpha) / (alpha (alpha - 1)) (keepdim), Shannon -sum p log p at alpha = 1.

    For p on the simplex, 1 - sum p^alpha = -sum p (p^(alpha-1) - 1), so with L = log p and
    g(x) = expm1(x) / x:  H_alpha(p) = -sum_i p_i L_i g((alpha - 1) L_i) / alpha, which has no
    cancellation near alpha = 1 and is Shannon's entropy there."""
    a = alpha.expand_as(p[..., :1])
    logp = _log_or_zero(p)
    return -(p * logp * expm1_ratio((a - 1) * logp)).sum(dim=-1, keepdim=True) / a


def tsallis_entropy_dalpha(p: Tensor, alpha: Tensor) -> Tensor:
    """d H_alpha(p) / d alpha (keepdim), from the form of ``tsallis_entropy``:
    -sum_i p_i L_i^2 g'((a-1) L_i) / a + sum_i p_i L_i g((a-1) L_i) / a^2, at alpha = 1 the limit
    sum p L - (sum p L^2) / 2."""
    a = alpha.expand_as(p[..., :1])
    logp = _log_or_zero(p)
    x = (a - 1) * logp
    return (-(p * logp * logp * expm1_ratio_slope(x)).sum(dim=-1, keepdim=True) / a
            + (p * logp * expm1_ratio(x)).sum(dim=-1, keepdim=True) / (a * a))


def _smoothed_target_entropy(n_classes: Tensor, eps: float, alpha: Tensor) -> tuple[Tensor, Tensor]:
    """H_alpha(q) and dH_alpha(q)/dalpha for q = (1-eps) e_y + eps/n over n classes (keepdim): q has the
    value big once and small n - 1 times (the formulas of ``tsallis_entropy`` on those two values)."""
    a = alpha.expand_as(n_classes)
    big = (1 - eps) + eps / n_classes
    small = eps / n_classes
    rest = n_classes - 1
    terms = []
    for q, count in ((big, torch.ones_like(rest)), (small, rest)):
        logq = _log_or_zero(q)
        x = (a - 1) * logq
        terms.append((count * q * logq * expm1_ratio(x), count * q * logq * logq * expm1_ratio_slope(x)))
    plog = terms[0][0] + terms[1][0]
    plog2 = terms[0][1] + terms[1][1]
    return -plog / a, -plog2 / a + plog / (a * a)


def _solve(kind: str, z: Tensor, a: Tensor, n_iter: int) -> Optional[Solved]:
    """The mapping restricted to its candidates, or None when some row has alpha == 1 (dense)."""
    if kind == "sparsemax":
        return sparsemax_solve(z)
    if kind == "entmax15":
        return entmax15_solve(z)
    if bool((a == 1).any()):
        return None
    return bisect_solve(z, a, n_iter)


def _entmax_loss(kind: str, z: Tensor, y: Tensor, a: Tensor, n_iter: int) -> tuple[Tensor, Tensor, Tensor]:
    """(loss (R, 1), p (R, d), p on the entries that matter for the alpha-gradient).

    L = sum_{p>0} p_i (z_i - max z) - (z_y - max z) + H_alpha(p); the sums run over the sorted
    candidates only (the support is among them), so the full rows are touched just to write p.
    """
    solved = _solve(kind, z, a, n_iter)
    if solved is None:  # dense rows (softmax): full-row sums
        xs, m, dead = shift_by_max(z)
        p = bisect_last(z, a, n_iter)[0]
        pz = torch.where(p > 0, p * xs, torch.zeros_like(p)).sum(dim=-1, keepdim=True)
        loss = pz - xs.gather(-1, y) + tsallis_entropy(p, a)
        return torch.where(dead, torch.full_like(loss, float("inf")), loss), p, p
    pc, zc = solved.p_cand, solved.z_cand
    pz = torch.where(pc > 0, pc * zc, torch.zeros_like(pc)).sum(dim=-1, keepdim=True)
    loss = pz - (z.gather(-1, y) - solved.max) + tsallis_entropy(pc, a)
    return torch.where(solved.dead, torch.full_like(loss, float("inf")), loss), solved.p, pc


def _finite_classes(z: Tensor) -> tuple[Optional[Tensor], Tensor, Tensor]:
    """(mask of finite logits or None when all are finite, their count (R, 1), row sum over them (R, 1))."""
    total = z.sum(dim=-1, keepdim=True)
    if bool(torch.isfinite(total).all()):
        return None, torch.full_like(total, z.shape[-1]), total
    finite = z > float("-inf")
    count = finite.sum(dim=-1, keepdim=True).to(z.dtype)
    return finite, count, torch.where(finite, z, torch.zeros_like(z)).sum(dim=-1, keepdim=True)


class FYLossFunction(Function):
    """Per-row Fenchel-Young loss of 2-D logits and (want_support) the support size of each row;
    backward (p - q) * g and, for entmax_bisect, dL/dalpha."""

    @staticmethod
    def forward(ctx, z: Tensor, target: Tensor, alpha: Tensor, kind: str, tau: float, n_iter: int,
                ignore_index: int, eps: float, want_support: bool) -> tuple[Tensor, Tensor]:
        keep = target != ignore_index
        y = torch.where(keep, target, torch.zeros_like(target)).unsqueeze(-1)
        a = alpha_like(z, alpha)
        if kind == "alpha_relu":
            al = float(a.reshape(-1)[0])
            p = alpha_relu_probs(z, al, tau)
            loss = (power_(p.clone(), al).sum(dim=-1, keepdim=True) / al - z.gather(-1, y)
                    + (1 + al * tau) / (al * (al - 1)))
            p_alpha = p
        else:
            loss, p, p_alpha = _entmax_loss(kind, z, y, a, n_iter)
        finite, n_finite, dh_q = None, None, None
        if eps > 0:
            finite, n_finite, z_sum = _finite_classes(z)
            h_q, dh_q = _smoothed_target_entropy(n_finite.clamp(min=1), eps, a)
            loss = loss + eps * (z.gather(-1, y) - z_sum / n_finite.clamp(min=1)) - h_q
        loss = torch.where(keep.unsqueeze(-1), loss, torch.zeros_like(loss)).squeeze(-1)
        ctx.save_for_backward(p, y, keep, finite, n_finite, a, p_alpha)
        ctx.dh_q = dh_q
        ctx.kind, ctx.eps, ctx.alpha_shape = kind, eps, alpha.shape
        support = ((p > 0) & keep.unsqueeze(-1)).sum(-1).to(torch.float32) if want_support else loss.new_empty(0)
        ctx.mark_non_differentiable(support)
        return loss, support

    @staticmethod
    def backward(ctx, g: Tensor, _g_support: Tensor):
        p, y, keep, finite, n_finite, a, p_alpha = ctx.saved_tensors
        scale = (g * keep.to(g.dtype)).unsqueeze(-1)
        grad = p * scale
        grad.scatter_add_(-1, y, -(1 - ctx.eps) * scale)
        if ctx.eps > 0:
            smooth = ctx.eps * scale / n_finite.clamp(min=1)
            grad = grad.sub_(smooth) if finite is None else grad.sub_(finite.to(grad.dtype) * smooth)
        da = None
        if ctx.needs_input_grad[2] and ctx.kind == "entmax_bisect":
            dl = tsallis_entropy_dalpha(p_alpha, a)
            if ctx.dh_q is not None:
                dl = dl - ctx.dh_q
            da = reduce_to_shape(dl * scale, ctx.alpha_shape)
        return grad, None, da, None, None, None, None, None, None


def _flatten(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, tuple]:
    """(N, C, d1..) -> (N*d1*.., C) rows; returns the shape of the unreduced loss."""
    if logits.dim() == 1:
        if target.dim() != 0:
            raise ValueError(f"target must be 0-D for 1-D input, got shape {tuple(target.shape)}")
        return logits.unsqueeze(0), target.reshape(1), ()
    expected = (logits.shape[0],) + tuple(logits.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(f"target shape {tuple(target.shape)} does not match input shape "
                         f"{tuple(logits.shape)}: expected {expected}")
    if logits.dim() == 2:  # (N, C): already rows (each view op is host work, and one more node each way)
        return logits, target, expected
    rows = logits.movedim(1, -1).reshape(-1, logits.shape[1])
    return rows, target.reshape(-1), expected


def _check_target_dtype(target: Tensor) -> None:
    if target.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(f"target must be an integer (class index) tensor, got dtype {target.dtype}")


def _check_target_range(target: Tensor, n_classes: int, ignore_index: int) -> None:
    """(The kernel path checks the targets in its own launch.)"""
    bad = (target != ignore_index) & ((target < 0) | (target >= n_classes))
    if target.is_cuda:
        device_check(~bad.any(), f"target contains a class index outside [0, {n_classes}) "
                                 f"(and it is not ignore_index={ignore_index})")
    elif bool(bad.any()):
        value = int(target[bad].reshape(-1)[0])
        raise ValueError(f"target contains class index {value} outside [0, {n_classes}) "
                         f"(and it is not ignore_index={ignore_index})")


def fy_loss(logits: Tensor, target: Tensor, kind: str, alpha: Alpha = 1.5, tau: float = 0.0,
            n_iter: Optional[int] = None, ignore_index: int = -100, reduction: str = "mean",
            label_smoothing: float = 0.0, return_support: bool = False) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """Fenchel-Young loss of `kind` (one of KINDS) in the nn.CrossEntropyLoss convention.

    ``return_support``: (loss, support) with support the number of nonzero probabilities of each
    row, float32 in the shape of the unreduced loss, 0 where the target is ignore_index (what
    sparsity reports count; computed by the loss itself, no second mapping)."""
    if kind not in KINDS:
        raise ValueError(f"unknown loss kind {kind!r}; expected one of {KINDS}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    eps = float(label_smoothing)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing!r}")
    check_input(logits)
    if not isinstance(target, Tensor):
        raise TypeError(f"target must be a torch.Tensor of class indices, got {type(target).__name__}")
    check_alpha(alpha, strict=(kind == "alpha_relu"), dtype=logits.dtype)
    if kind == "alpha_relu":
        if isinstance(alpha, Tensor):
            raise TypeError("alpha_relu loss takes a float alpha")
        tau = check_tau(tau, logits.dtype)
    rows, flat_target, shape = _flatten(logits, target)
    _check_target_dtype(flat_target)
    flat_target = flat_target.long()
    fast = _dispatch.kernel("fy_loss", rows, -1, kind=kind, alpha=alpha)
    if fast is not None:  # the kernel path checks the targets and reduces in its own launches
        out = fast(rows, flat_target, kind, alpha, tau, ignore_index, eps, return_support, reduction)
        loss, support = out if return_support else (out, None)
        if reduction == "none":
            loss = loss.reshape(shape).to(logits.dtype)
    else:
        _check_target_range(flat_target, rows.shape[-1], ignore_index)
        cdt = compute_dtype(rows.dtype)
        n = check_n_iter(n_iter, cdt)
        a = alpha.to(cdt) if isinstance(alpha, Tensor) else torch.tensor(float(alpha), dtype=cdt, device=rows.device)
        if a.dim() > 0:
            a = a.reshape(-1, 1) if a.numel() > 1 else a.reshape(1, 1)
        per_row, support = FYLossFunction.apply(rows.to(cdt), flat_target, a, kind, tau, n, ignore_index, eps,
                                                return_support)
        loss = _reduce(per_row, flat_target, ignore_index, reduction, shape).to(logits.dtype)
    return (loss, support.reshape(shape)) if return_support else loss


def _reduce(per_row: Tensor, flat_target: Tensor, ignore_index: int, reduction: str, shape: tuple) -> Tensor:
    if reduction == "none":
        return per_row.reshape(shape)
    total = per_row.sum()
    if reduction == "sum":
        return total
    return total / (flat_target != ignore_index).sum().clamp(min=1)


def sparsemax_loss(logits: Tensor, target: Tensor, ignore_index: int = -100, reduction: str = "mean",
                   label_smoothing: float = 0.0, return_support: bool = False) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """Sparsemax loss (Martins & Astudillo 2016): FY loss with H = (1 - ||p||^2) / 2."""
    return fy_loss(logits, target, "sparsemax", 2.0, ignore_index=ignore_index, reduction=reduction,
                   label_smoothing=label_smoothing, return_support=return_support)


def entmax15_loss(logits: Tensor, target: Tensor, ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0, return_support: bool = False) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """1.5-entmax loss: FY loss with H = (1 - sum p^1.5) / 0.75."""
    return fy_loss(logits, target, "entmax15", 1.5, ignore_index=ignore_index, reduction=reduction,
                   label_smoothing=label_smoothing, return_support=return_support)


def entmax_bisect_loss(logits: Tensor, target: Tensor, alpha: Alpha = 1.5, n_iter: Optional[int] = None,
                       ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0,
                       return_support: bool = False) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """alpha-entmax loss for any alpha >= 1 (a float, or a tensor of one alpha or one per row of N)."""
    return fy_loss(logits, target, "entmax_bisect", alpha, n_iter=n_iter, ignore_index=ignore_index,
                   reduction=reduction, label_smoothing=label_smoothing, return_support=return_support)


def alpha_relu_loss(logits: Tensor, target: Tensor, alpha: float = 1.5, tau: float = 0.0,
                    ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0,
                    return_support: bool = False) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """alpha-ReLU loss: gradient alpha_relu(z) - e_y (see the module docstring)."""
    return fy_loss(logits, target, "alpha_relu", alpha, tau=tau, ignore_index=ignore_index,
                   reduction=reduction, label_smoothing=label_smoothing, return_support=return_support)


class _FYLoss(nn.Module):
    """nn.CrossEntropyLoss-style wrapper around `fy_loss`."""

    kind = ""

    def __init__(self, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = float(label_smoothing)

    def loss_kwargs(self) -> dict:
        return {}

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002 (torch convention)
        return fy_loss(input, target, self.kind, ignore_index=self.ignore_index, reduction=self.reduction,
                       label_smoothing=self.label_smoothing, **self.loss_kwargs())


class SparsemaxLoss(_FYLoss):
    kind = "sparsemax"

    def loss_kwargs(self) -> dict:
        return {"alpha": 2.0}


class Entmax15Loss(_FYLoss):
    kind = "entmax15"


class EntmaxBisectLoss(_FYLoss):
    """alpha-entmax loss; `alpha` may be a float or a (learnable) tensor, which then gets a gradient."""

    kind = "entmax_bisect"

    def __init__(self, alpha: Alpha = 1.5, n_iter: Optional[int] = None, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(ignore_index, reduction, label_smoothing)
        check_alpha(alpha, dtype=torch.float64)  # (usable in some dtype; each call checks it in the input's)
        self.alpha = alpha
        self.n_iter = n_iter

    def loss_kwargs(self) -> dict:
        return {"alpha": self.alpha, "n_iter": self.n_iter}


class AlphaReLULoss(_FYLoss):
    """alpha-ReLU loss with fixed threshold `tau`."""

    kind = "alpha_relu"

    def __init__(self, alpha: float = 1.5, tau: float = 0.0, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(ignore_index, reduction, label_smoothing)
        check_alpha(alpha, strict=True, dtype=torch.float64)  # (each call checks them in the input's dtype)
        self.alpha = float(alpha)
        self.tau = check_tau(tau, torch.float64)

    def loss_kwargs(self) -> dict:
        return {"alpha": self.alpha, "tau": self.tau}
