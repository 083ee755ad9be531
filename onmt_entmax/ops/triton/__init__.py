"""Triton CUDA kernels for the sparse mappings, their Fenchel-Young losses, sparse attention and
the beam step, as the table `KERNELS` that `onmt_entmax.ops._dispatch` reads: one `KernelEntry`
(whose docstring states the contract) an op, naming its public op, its kernel and the predicate
saying which calls the kernel takes (none for the decoding ops, whose kernels decide themselves).
The kernels live in submodules imported lazily (`_submodule`), so this package imports where Triton
is absent (every call then takes the reference).
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import os
from types import ModuleType
from typing import Any, Callable, Optional

import torch

from .._common import KERNEL_ALPHA_MIN, KINDS  # KINDS: the normalized mappings, by name
from ._config import DEFAULTS


@dataclasses.dataclass(frozen=True)
class KernelEntry:
    """One op's kernel, as the dispatcher (`ops._dispatch`) reads it from `KERNELS` (one entry an op):
    the contract between a public op, whose torch code is the reference, and its kernel.

    op: the name the public op dispatches by (`kernel` / `try_kernel`) and ONMT_ENTMAX_NO_TRITON lists.
    reference: the public op of `onmt_entmax.ops` holding the torch reference, which runs wherever
        this kernel does not.
    run: the kernel, with the reference's semantics and dtype policy, `dim` any int, autograd-aware
        where the reference is.
    supports: `(z, dim, **kw) -> bool`, whether this call takes `run` (asked by `kernel`); None for
        the decoding ops, run at every beam step (host-bound), whose `run` looks at its arguments
        once and returns None for a call it does not take (`try_kernel`).

    The runs, by op (their docstrings below say more):
        sparsemax(z, dim) -> Tensor
        entmax15(z, dim) -> Tensor
        entmax_bisect(z, alpha, dim, n_iter) -> Tensor       # alpha float or tensor (size 1 along dim)
        bounded_alpha(a, lo, hi) -> clamp(1 + sigmoid(a), lo, hi)   # supports() gets a as z
        fy_loss(logits (N, V), target (N,) int64, kind: str, alpha, tau, ignore_index: int,
                label_smoothing: float, return_support: bool, reduction: str)
            -> loss: per row (N,) float32 for reduction "none", else ("sum" / "mean") 0-d in the logits'
            dtype; kind in {"sparsemax", "entmax15", "entmax_bisect", "alpha_relu"}; rows whose target
            is ignore_index give 0; it checks the targets itself (a device assertion naming the target,
            asynchronous: no host sync). return_support: (loss, the number of nonzero probabilities of
            each row (N,) float32, 0 on ignore_index rows). supports() gets kind= and alpha=.
        sparse_attention_train(q, k, v, keep, kind, alpha, scale, dropout_p, return_weights, alpha_bounds,
                               is_causal)
            -> (B, H, Tq, Dv) or (that, weights)  # differentiable; supports() gets q as z and k=, v=,
            keep=, kind=, alpha=, dropout_p=, return_weights=, is_causal= (keys after the query masked,
            top-left aligned, as scaled_dot_product_attention's); with alpha_bounds (lo, hi), alpha
            holds logits a of alpha = clamp(1 + sigmoid(a), lo, hi)
      The decoding ops (supports None, no grad; None for a call the kernel does not take):
        log_probs(z, kind, alpha, dim) -> log pi(z), -inf where pi(z) = 0
        alpha_relu_log(z, alpha: float, tau: float) -> log alpha_relu(z)
        beam_stats(scores (R, N), kept (R, K)) -> (finite count (R,) int64, best score not kept (R,) float32)
        beam_topk(scores (R, N), k) -> (k best (R, k), their positions (R, k) int64, stats (R, 2) float64:
            finite count, best score not kept)
        sparse_attention_decode(q, k, v, keep, kind, alpha, scale) -> (B, H, Tq, Dv)
    """

    op: str
    reference: str
    run: Callable[..., Any]
    supports: Optional[Callable[..., bool]] = None


_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
HAVE_TRITON = importlib.util.find_spec("triton") is not None


def available(x: torch.Tensor) -> bool:
    """True when x is a tensor the kernels take: CUDA (or TRITON_INTERPRET=1), float dtype."""
    return HAVE_TRITON and x.dtype in _FLOATS and (x.is_cuda or os.environ.get("TRITON_INTERPRET", "0") == "1") \
        and x.dim() >= 1 and x.numel() > 0


def _mapping_supports(z: torch.Tensor, dim: int = -1) -> bool:
    """sparsemax and 1.5-entmax: any float tensor the kernels take."""
    return available(z)


def _bisect_supports(z: torch.Tensor, dim: int = -1, alpha=None) -> bool:
    """alpha-entmax: a float alpha the kernels resolve, or a tensor of per-row alphas for rows held
    in registers (alpha == 1 rows are computed as softmax there): `_bisect_alpha_ok`."""
    return available(z) and _bisect_alpha_ok(alpha, z.shape[dim] if z.dim() else 1)


def _loss_supports(z: torch.Tensor, dim: int = -1, kind: str | None = None, alpha=None) -> bool:
    """The fused loss: (N, V) logits of a kind the kernel computes; alpha-entmax and alpha-ReLU with
    a float alpha > 1 (1 is softmax), alpha-entmax's >= KERNEL_ALPHA_MIN."""
    if not available(z) or z.dim() != 2 or kind not in ("sparsemax", "entmax15", "entmax_bisect", "alpha_relu"):
        return False
    if kind in ("entmax_bisect", "alpha_relu"):
        least = KERNEL_ALPHA_MIN if kind == "entmax_bisect" else 1.0
        return not torch.is_tensor(alpha) and alpha is not None and float(alpha) > 1.0 \
            and float(alpha) >= least
    return True


def _bounded_alpha_supports(a: torch.Tensor, dim: int = -1) -> bool:
    """The learned alphas' clamp(1 + sigmoid(a), lo, hi): the tensors `alpha.supports` takes."""
    return available(a) and _submodule("alpha").supports(a)


def _attention_train_supports(q: torch.Tensor, dim: int = -1, *, k: torch.Tensor, v: torch.Tensor, keep=None,
                              kind: str | None = None, alpha=None, dropout_p: float = 0.0,
                              return_weights: bool = False, is_causal: bool = False) -> bool:
    """Differentiable attention: a call the tiles of any length take (`_long_attention`), else one of
    `attention_train` (short-row tiles, or the weights materialized) without a causal mask."""
    if not available(q):
        return False
    args = (q, k, v, keep, kind, alpha, dropout_p)
    if _long_attention(*args, return_weights):
        return True
    return not is_causal and _submodule("attention_train").supports(*args)


def _long_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha, dropout_p: float,
                    return_weights: bool) -> bool:
    """Whether a differentiable attention call takes the tiled kernels of any length
    (`attention_long`, O(T) memory): every call the short-row tiles (`attention_tiles.fits`) do not
    take, unless it wants the weights (a Tq x Tk matrix: the materialized path)."""
    if return_weights or q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        return False
    return not _submodule("attention_tiles").fits(q, k, v) \
        and _submodule("attention_long").supports(q, k, v, keep, kind, alpha, dropout_p)


def _bisect_alpha_ok(alpha, n_cols: int) -> bool:
    """alpha-entmax's kernels take a float alpha >= KERNEL_ALPHA_MIN (closer to 1 their float32
    threshold cannot resolve p: the reference forms it by log1p), or a float tensor of per-row alphas
    for rows held in registers (whose alpha == 1 rows they compute as softmax)."""
    if torch.is_tensor(alpha):
        return alpha.is_floating_point() and n_cols <= DEFAULTS["SINGLE_MAX"]
    return alpha is not None and float(alpha) >= KERNEL_ALPHA_MIN


def _decodes(z: torch.Tensor) -> bool:
    """What the decoding ops (run by `_dispatch.try_kernel`, which has checked the device and
    ONMT_ENTMAX_NO_TRITON) need of their scores: Triton present, a float dtype the kernels read."""
    return HAVE_TRITON and z.dtype in _FLOATS and z.dim() >= 1


def sparsemax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Sparsemax along dim (kernel path)."""
    return _submodule("mapping").sparsemax(z, dim)


def entmax15(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Exact 1.5-entmax along dim (kernel path)."""
    return _submodule("mapping").entmax15(z, dim)


def entmax_bisect(z: torch.Tensor, alpha=1.5, dim: int = -1, n_iter: int | None = None
                  ) -> torch.Tensor:
    """alpha-entmax along dim (kernel path). The kernel runs Newton to |sum p - 1| <= 1e-6
    (at most 64 passes) whatever n_iter, which counts bisection steps on the reference path."""
    return _submodule("mapping").entmax_bisect(z, alpha, dim)


def log_probs(z: torch.Tensor, kind: str, alpha=None, dim: int = -1) -> torch.Tensor | None:
    """log pi(z) along dim, -inf where pi(z) = 0, one launch, no gradient (kernel path); None for a
    call the kernels do not take (`kind` not a mapping of KINDS, an alpha they do not take)."""
    if not _decodes(z) or kind not in KINDS or not z.numel() or (
            kind == "entmax_bisect" and not _bisect_alpha_ok(alpha, z.shape[dim])):
        return None
    return _submodule("mapping").log_probs(z, kind, alpha, dim)


def alpha_relu_log(z: torch.Tensor, alpha: float, tau: float) -> torch.Tensor | None:
    """log [(alpha - 1) z - tau]_+ / (alpha - 1), one launch, no gradient (kernel path); None for
    alpha <= 1."""
    if not _decodes(z) or not alpha > 1.0:
        return None
    return _submodule("alpha_relu").alpha_relu_log(z, alpha, tau)


def beam_stats(scores: torch.Tensor, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(finite candidates, best score not kept) of each row, one launch (kernel path); None unless
    scores (R, N) and kept (R, K <= 64) are on one device."""
    if not _decodes(scores) or scores.dim() != 2 or kept.shape[1] > 64 or kept.device != scores.device:
        return None
    return _submodule("beam_step").beam_stats(scores, kept)


def beam_topk(scores: torch.Tensor, k: int):
    """(values (R, k), positions (R, k) int64, stats (R, 2) float64) of (R, N) scores: the k best and
    (finite count, best not kept), two launches (kernel path); None for k > 31 or very long rows."""
    if not _decodes(scores) or scores.dim() != 2:
        return None
    return _submodule("beam_step").beam_topk(scores, k)


def sparse_attention_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha=None,
                            scale: float | None = None) -> torch.Tensor | None:
    """Fused pi(scale q k^T, masked) v forward without grad (kernel path) for a call the kernel takes,
    None for one it does not (what it takes and the launch in one look at the arguments)."""
    if not HAVE_TRITON or q.dtype not in _FLOATS:
        return None
    out = _submodule("attention").decode(q, k, v, keep, kind, alpha, scale)
    if out is None and isinstance(q, torch.Tensor) and q.ndim == 4 and k.ndim == 4 \
            and k.shape[2] > _submodule("attention_tiles").MAX_KEYS:
        # rows longer than the decoding kernel's: the tiled kernels (no grad here)
        long = _submodule("attention_long")
        if long.supports(q, k, v, keep, kind, alpha, 0.0):
            return long.sparse_attention(q, k, v, keep, kind, alpha, q.shape[-1] ** -0.5 if scale is None else scale)
    return out


def sparse_attention_train(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep, kind: str, alpha=None,
                           scale: float = 1.0, dropout_p: float = 0.0, return_weights: bool = False,
                           alpha_bounds: tuple[float, float] | None = None, is_causal: bool = False):
    """Fused drop(pi(scale q k^T, masked)) v with gradients (kernel path); with return_weights also
    the weights before dropout: (out, weights); with alpha_bounds, alpha holds the logits of a
    learned alpha = clamp(1 + sigmoid(alpha), *alpha_bounds); is_causal (the tiled kernels only, as
    `supports` says): keys after the query masked too. Short rows take the tiles of
    `attention_tiles`, calls that want the weights the materialized path, the rest `attention_long`."""
    if _long_attention(q, k, v, keep, kind, alpha, dropout_p, return_weights):
        return _submodule("attention_long").sparse_attention(q, k, v, keep, kind, alpha, scale, dropout_p,
                                                             alpha_bounds, is_causal)
    return _submodule("attention_train").sparse_attention(q, k, v, keep, kind, alpha, scale, dropout_p,
                                                           return_weights, alpha_bounds)


def bounded_alpha(a: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """clamp(1 + sigmoid(a), lo, hi), differentiable (kernel path, one launch each way)."""
    return _submodule("alpha").bounded_alpha(a, lo, hi)


def fy_loss(logits: torch.Tensor, target: torch.Tensor, kind: str, alpha=1.5, tau: float = 0.0,
            ignore_index: int = -100, label_smoothing: float = 0.0, return_support: bool = False,
            reduction: str = "none"):
    """Fenchel-Young loss of (N, V) logits (kernel path), the targets checked on the device: per row
    (N,) float32, or reduced ("sum" / "mean") to 0-d in the logits' dtype; with return_support also
    the support size of each row: (loss, support)."""
    return _submodule("loss").fy_loss(logits, target, kind, alpha, tau, ignore_index, label_smoothing,
                                      return_support, reduction)


def prepare() -> None:
    """The host side of the first launch in a process, without a launch: import Triton and the
    smallest kernel's module, and compute Triton's cache key (`triton.runtime.cache.triton_key`,
    a hash of its own ~400 MB library, cached for the process). For a background thread
    (`_dispatch.prepare_in_background`): an error here is left to the first launch, which redoes
    what did not happen and raises it there."""
    try:
        _submodule("alpha_relu")
        from triton.runtime import cache

        key = getattr(cache, "triton_key", None)  # Triton 3.x; elsewhere the launch computes its own
        if key is not None:
            key()
    except Exception:  # noqa: BLE001 (see the docstring)
        pass


def cache_dir() -> str:
    """Where Triton keeps the kernels it compiled (TRITON_CACHE_DIR, by default ~/.triton/cache);
    empty when its disk cache is off."""
    try:
        from triton import knobs  # Triton >= 3.4

        return knobs.cache.dir or ""
    except (ImportError, AttributeError):
        from triton.runtime.cache import default_cache_dir

        return default_cache_dir()


def compiled_before(capability: tuple[int, int], directory: str) -> bool:
    """Whether Triton's cache `directory` holds the warm-up's kernel (`warm_up`, the first kernel a
    sparse decoding process runs) compiled by this Triton for GPUs of compute `capability`: false on
    a machine's first sparse run and after a Triton upgrade, when decoding compiles each kernel it
    meets. Reads the metadata Triton writes next to each binary (<hash>/<kernel>.json: its name,
    target architecture and Triton version)."""
    import glob
    import json

    import triton

    name = _submodule("alpha_relu").log_kernel.__name__
    arch = capability[0] * 10 + capability[1]
    for path in glob.glob(os.path.join(glob.escape(directory), "*", name + ".json")) if directory else ():
        try:
            with open(path, encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            continue
        if meta.get("target", {}).get("arch") == arch and meta.get("triton_version") == triton.__version__:
            return True
    return False


@functools.lru_cache(maxsize=None)
def _submodule(name: str) -> ModuleType:
    """The kernel submodule `name`, imported on first use (Triton compiles nothing until a kernel runs;
    an import statement in a function costs ~0.5 us at every call, and the decoding ops run at every
    layer and beam step)."""
    return importlib.import_module(f"{__name__}.{name}")


KERNELS: dict[str, KernelEntry] = {entry.op: entry for entry in (
    KernelEntry("sparsemax", "sparsemax", sparsemax, _mapping_supports),
    KernelEntry("entmax15", "entmax15", entmax15, _mapping_supports),
    KernelEntry("entmax_bisect", "entmax_bisect", entmax_bisect, _bisect_supports),
    KernelEntry("bounded_alpha", "bounded_alpha", bounded_alpha, _bounded_alpha_supports),
    KernelEntry("fy_loss", "fy_loss", fy_loss, _loss_supports),
    KernelEntry("sparse_attention_train", "sparse_attention", sparse_attention_train, _attention_train_supports),
    # the decoding ops, at every layer and beam step: their kernels look at a call once and decide
    KernelEntry("log_probs", "log_probs", log_probs),
    KernelEntry("alpha_relu_log", "alpha_relu_log", alpha_relu_log),
    KernelEntry("beam_stats", "beam_stats", beam_stats),
    KernelEntry("beam_topk", "beam_topk", beam_topk),
    KernelEntry("sparse_attention_decode", "sparse_attention", sparse_attention_decode),
)}
