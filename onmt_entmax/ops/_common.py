"""Shared plumbing of the mappings: argument checks, dtype policy and the exact sort-based core.

Every mapping works on the last dimension of a float32/float64 tensor; the public wrappers move
`dim` there, upcast half precision (float16/bfloat16 are computed in float32 and returned in the
input dtype) and move it back.
"""
from __future__ import annotations

import math
import numbers
import weakref
from typing import Callable, NamedTuple, Union

import torch
from torch import Tensor
from torch.autograd import Function

Alpha = Union[float, Tensor]
# the normalized mappings, by name (``entmax.mapping_of_kind``); here, below everything, so that the
# Triton package can check op names without importing the mappings that dispatch to it
KINDS = ("sparsemax", "entmax15", "entmax_bisect")
# attention rows of at most this many keys take the short-row tiles (`triton/attention_tiles.py`); longer rows
# with a gradient take the tiled kernels of any length (O(T) memory) unless the call asks for the Tq x Tk weights
SHORT_ROW_KEYS = 128

_HALF = (torch.float16, torch.bfloat16)
# A float alpha below this takes the torch reference on CUDA too: the kernels solve tau in float32
# and form p = (x - tau)^{1/(alpha-1)} from x - tau = 1 + O(alpha - 1), whose rounding error grows like
# 6e-9 / (alpha - 1) (6e-7 at 1.01, 6e-4 at 1 + 1e-5); the reference forms p by log1p, exact to float32
# at any alpha (entmax_bisect.py). Learned alphas are clamped to [1.01, 2], so never routed.
KERNEL_ALPHA_MIN = 1.01


def device_check(ok: Tensor, message: str, error: type = ValueError) -> None:
    """Raise `error(message)` unless the one-element tensor `ok` is true.

    On CPU this is an ordinary check. On CUDA it must not synchronise the host (a wait at every call,
    docs/kernels.md, and no CUDA-graph capture): there it is an asynchronous device assertion
    carrying the same message, as F.cross_entropy does for its targets.
    """
    if ok.is_cuda:
        torch._assert_async(ok, message)
    elif not bool(ok):
        raise error(message)


def tensor_version(t: Tensor) -> int:
    """``t._version``, bumped by every in-place change; -1 for inference tensors (made under
    ``torch.inference_mode``, as Eole's decoding runs), which track none."""
    return -1 if t.is_inference() else t._version


# alpha tensors checked and unchanged since: id -> (weak reference, version, strict, largest value allowed)
_CHECKED_ALPHA: dict[int, tuple] = {}
_IN_RANGE = 0.0  # the bound recorded by `alpha_in_range`: below every dtype's largest finite value


def _checked_before(alpha: Tensor, strict: bool, upper: float) -> bool:
    seen = _CHECKED_ALPHA.get(id(alpha))
    return (seen is not None and seen[0]() is alpha and seen[1] == tensor_version(alpha) and seen[2] >= strict
            and seen[3] <= upper)


def _remember_checked(alpha: Tensor, strict: bool, upper: float) -> None:
    if len(_CHECKED_ALPHA) >= 256:  # forget tensors that no longer exist
        for key in [k for k, v in _CHECKED_ALPHA.items() if v[0]() is None]:
            del _CHECKED_ALPHA[key]
    _CHECKED_ALPHA[id(alpha)] = (weakref.ref(alpha), tensor_version(alpha), strict, upper)


def alpha_in_range(alpha: Tensor) -> Tensor:
    """Mark a tensor of alphas as known to be >= 1 (e.g. clamped into [1.01, 2] as learned alphas
    are): `check_alpha` skips it while it is unchanged. A learned alpha is a new tensor at every
    training call, and the check costs three device operations a call."""
    _remember_checked(alpha, strict=False, upper=_IN_RANGE)
    return alpha


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def largest_finite(dtype: torch.dtype) -> float:
    """The largest finite value of the dtype a tensor of `dtype` is computed in (float32 for half
    precision): a number above it is inf there, so 1e39 is a finite Python float but no float32 alpha."""
    return torch.finfo(compute_dtype(dtype)).max


def check_number(value: float, name: str, dtype: torch.dtype = torch.float32, error: type = ValueError,
                 bound: str = "") -> float:
    """``float(value)``, refused (`error` naming `name`) unless it is a number that stays finite in the
    compute dtype of `dtype` (float32 by default: what models compute the mappings in, half precision
    included). A bool is no number here (a YAML ``true`` is not an alpha). `bound` (e.g. ">= 1") is
    only named in the message."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise error(f"{name} must be {bound + ' and ' if bound else ''}finite, got {value!r}")
    if abs(v) > largest_finite(dtype):
        raise error(f"{name} {v:g} is not finite in {dtype_name(compute_dtype(dtype))}")
    return v


def check_alpha(alpha: Alpha, name: str = "alpha", strict: bool = False, dtype: torch.dtype = torch.float32,
                error: type = ValueError) -> None:
    """Raise `error` (a ValueError) unless alpha >= 1 (alpha > 1 when `strict`) and finite in the dtype it
    is used in: the compute dtype of `dtype` (the input's; float32 by default, as models compute);
    NaN is refused too. A float tensor alpha is used in that dtype as well, so a float64 1e300 is
    refused for float32 logits.

    A tensor is checked once until it changes (same object, same version): decoding passes the
    same per-head alpha at every step, and on CUDA the check costs three device operations.
    """
    bound = "> 1" if strict else ">= 1"
    if isinstance(alpha, Tensor):
        if not torch.is_floating_point(alpha):
            raise TypeError(f"{name} must be a float tensor, got dtype {alpha.dtype}")
        # the largest alpha finite both as stored and once cast to the compute dtype (exact in alpha's dtype)
        upper = min(torch.finfo(alpha.dtype).max, largest_finite(dtype))
        if _checked_before(alpha, strict, upper):  # (unchanged since a check at least as strict)
            return
        where = f"finite in {dtype_name(compute_dtype(dtype))}"
        if alpha.numel():
            a = alpha.detach()
            ok = (((a > 1) if strict else (a >= 1)) & (a <= upper)).all()  # False for NaN too
            if a.is_cuda:
                device_check(ok, f"{name} must be {bound} and {where} everywhere")
            elif not bool(ok):
                raise error(f"{name} must be {bound} and {where} everywhere, got min {a.min().item():g}, "
                            f"max {a.max().item():g}")
            _remember_checked(alpha, strict, upper)
    else:
        a = check_number(alpha, name, dtype, error, bound)
        if a <= 1 if strict else a < 1:
            raise error(f"{name} must be {bound}{'' if strict else ' (1 is softmax)'}, got {alpha!r}")


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

    Tensor arguments in `args` (per-row alpha) are moved the same way as `z`. As torch.softmax: a
    0-dimensional z is one row of one entry (dim 0 or -1), and an empty z gives an empty result of
    its shape.
    """
    check_input(z)
    if z.dim() == 0:
        if dim not in (0, -1):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        args = tuple(a.reshape(1) if isinstance(a, Tensor) and a.dim() == 0 else a for a in args)
        return on_last_dim(fn, z.reshape(1), 0, *args).reshape(())
    x = z.movedim(dim, -1)
    if x.numel() == 0:  # no row, or rows of no entry: nothing to normalize
        return z.clone()
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


def top_candidates(z: Tensor, reach: float) -> tuple[Tensor, Tensor, Tensor]:
    """The entries of each row that can be in the support, sorted decreasingly, without a full sort.

    For an entmax mapping written as p = [x - tau]_+^{1/(a-1)} with x = (a-1)(z - max z), the
    threshold satisfies tau >= -1 (p_max <= 1), so the support lies in {z > max z - reach} with
    reach = 1/(a-1). A top-64 serves rows whose 64th value is already out of reach; the other
    rows (flat ones) count their candidates and take one top-k of that size (or a full sort).

    Returns (sorted top-k values (R, k), row max (R, 1), dead-row mask (R, 1)); a dead row is
    entirely -inf, gets max 0 here and a zero output from the callers.
    """
    d = z.shape[-1]
    vals = _largest(z, min(d, 64))
    lead = vals.shape[:-1]
    vals = vals.reshape(-1, vals.shape[-1])
    if vals.shape[-1] < d:
        top = vals[:, :1]
        # in the frame of the row max: top - reach rounds to top once |top| >> reach (a -1e18 masked row)
        short = ~((vals[:, -1:] - top <= -reach) | (top == float("-inf")) | torch.isnan(top)).squeeze(-1)
        if bool(short.any()):
            # rows with more than 64 candidates (flat rows): count them, then one top-k of that size
            todo = short.nonzero().squeeze(-1)
            rows = z.reshape(-1, d)[todo]
            k = int((rows - top[todo] > -reach).sum(dim=-1).max())
            more = _largest(rows, k)
            pad = torch.full((vals.shape[0], more.shape[-1] - vals.shape[-1]), float("-inf"),
                             dtype=vals.dtype, device=vals.device)
            vals = torch.cat([vals, pad], dim=-1)
            vals[todo] = more
    vals = vals.reshape(lead + vals.shape[-1:])
    top = vals[..., :1]
    dead = top == float("-inf")
    return vals, torch.where(dead, torch.zeros_like(top), top), dead


def _largest(z: Tensor, k: int) -> Tensor:
    """The k largest entries of each row, sorted decreasingly (a full sort when k is a large share)."""
    if 4 * k >= z.shape[-1]:
        return z.sort(dim=-1, descending=True).values
    return z.topk(k, dim=-1).values


def on_support_only(tau: Tensor, dead: Tensor) -> Tensor:
    """A threshold of +inf for dead rows, so that [z - tau]_+ is 0 there without a full-size mask."""
    if bool(dead.any()):
        tau = torch.where(dead, torch.full_like(tau, float("inf")), tau)
    return tau


class Solved(NamedTuple):
    """A solved batch of rows: the full output and its restriction to the sorted candidates."""

    p: Tensor        # (R, d) probabilities
    p_cand: Tensor   # (R, k) probabilities of the k sorted candidates (the support is among them)
    z_cand: Tensor   # (R, k) candidate logits minus the row max (-inf where the row had -inf)
    tau: Tensor      # (R, 1) threshold in the frame p = [(alpha-1) z - tau]_+^{1/(alpha-1)}
    max: Tensor      # (R, 1) row max
    dead: Tensor     # (R, 1) rows that are entirely -inf


def support_backward(p: Tensor, g: Tensor, u: Tensor) -> Tensor:
    """Jacobian-vector product of an entmax mapping (Peters et al. 2019, Proposition 1).

    With u = p^{2-alpha} on the support (0 elsewhere):  dz = u * g - (sum(u * g) / sum(u)) u.
    A zero row (fully masked input) has u = 0 and gets a zero gradient.
    """
    ug = u * g
    su = u.sum(dim=-1, keepdim=True)
    q = ug.sum(dim=-1, keepdim=True) / torch.where(su > 0, su, torch.ones_like(su))
    return ug - q * u


def support_function(name: str, mapping: Callable[[Tensor], Tensor],
                     slope: Callable[[Tensor], Tensor]) -> type[Function]:
    """An autograd Function p = mapping(x) over the last dim, differentiated by Proposition 1
    with u = slope(p) (p^{2-alpha} on the support), never through the sort or the search."""

    def forward(ctx, x: Tensor) -> Tensor:
        p = mapping(x)
        ctx.save_for_backward(p)
        return p

    def backward(ctx, g: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors
        return support_backward(p, g, slope(p))

    doc = f"{name}: forward {mapping.__name__}, backward Proposition 1 with u = {slope.__name__}(p)."
    return type(name, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward),
                                    "__doc__": doc})


# --- functions of x = (alpha - 1) log p <= 0 whose closed forms cancel near alpha = 1 ------------------
def _series(x: Tensor, coefficients: list[float]) -> Tensor:
    """sum_k c_k x^k by Horner's rule."""
    out = torch.zeros_like(x)
    for c in reversed(coefficients):
        out = out * x + c
    return out


def _closed_or_series(x: Tensor, closed: Callable[[Tensor], Tensor], coefficients: list[float]) -> Tensor:
    """``closed(x)`` for x < -1/2, the Taylor series (15 terms: below 1e-17 of the value at |x| = 1/2,
    where the closed form loses at most a factor ~11 of the dtype's precision) on [-1/2, 0]."""
    far = x < -0.5
    safe = torch.where(far, x, torch.full_like(x, -1.0))
    return torch.where(far, closed(safe), _series(x, coefficients))


def log_power_slope(x: Tensor) -> Tensor:
    """h(x) = (e^-x - 1 + x) / x^2 = sum_k (-x)^k / (k+2)!,  h(0) = 1/2."""
    return _closed_or_series(x, lambda t: (torch.expm1(-t) + t) / (t * t),
                             [(-1.0) ** k / math.factorial(k + 2) for k in range(15)])


def expm1_ratio(x: Tensor) -> Tensor:
    """g(x) = (e^x - 1) / x,  g(0) = 1 (expm1 keeps it exact; only x = 0 needs the limit)."""
    zero = x == 0
    safe = torch.where(zero, torch.ones_like(x), x)
    return torch.where(zero, torch.ones_like(x), torch.expm1(safe) / safe)


def expm1_ratio_slope(x: Tensor) -> Tensor:
    """g'(x) = (e^x (x - 1) + 1) / x^2 = sum_k (k+1) x^k / (k+2)!,  g'(0) = 1/2."""
    return _closed_or_series(x, lambda t: (torch.exp(t) * (t - 1) + 1) / (t * t),
                             [(k + 1) / math.factorial(k + 2) for k in range(15)])
