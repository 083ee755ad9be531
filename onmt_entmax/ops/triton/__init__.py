"""Triton CUDA kernels for the sparse mappings and their Fenchel-Young losses.

Contract with `onmt_entmax.ops._dispatch`: `supports(op, z, dim, **kw)` says whether the call can
take the kernel path; then `sparsemax(z, dim)`, `entmax15(z, dim)`, `entmax_bisect(z, alpha,
dim, n_iter)` and `fy_loss(rows, target, kind, alpha, tau, ignore_index, label_smoothing,
return_support)` run it. The no-grad ops, called at every beam step, check their own arguments
and return None for a call they do not take (run by `_dispatch.try_kernel`, not asked of
`supports`): `log_probs(z, kind, alpha, dim)` and `alpha_relu_log(z, alpha, tau)` (the scores),
`beam_stats(scores, kept)` and `beam_topk(scores, k)` (the pick and the certificate's reductions)
and `sparse_attention_decode(q, k, v, keep, kind, alpha, scale)` (fused attention forward). Through
`supports` again:
`sparse_attention_train(q, k, v, keep, kind, alpha, scale, dropout_p, return_weights, alpha_bounds,
is_causal)` (differentiable: short rows on `attention_tiles`, the rest on `attention_long`, O(T)
memory, unless the weights are asked for) and `bounded_alpha(a, lo, hi)`.
The kernels live in submodules imported lazily (`_submodule`), so this package imports where Triton
is absent (`supports` is then False).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from types import ModuleType

import torch

from .._common import KERNEL_ALPHA_MIN, KINDS  # KINDS: the normalized mappings, by name
from ._config import DEFAULTS

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
HAVE_TRITON = importlib.util.find_spec("triton") is not None


def available(x: torch.Tensor) -> bool:
    """True when x is a tensor the kernels take: CUDA (or TRITON_INTERPRET=1), float dtype."""
    if not HAVE_TRITON or os.environ.get("ONMT_ENTMAX_NO_TRITON", "").strip() == "1":
        return False
    return x.dtype in _FLOATS and (x.is_cuda or os.environ.get("TRITON_INTERPRET", "0") == "1") \
        and x.dim() >= 1 and x.numel() > 0


def supports(op: str, z: torch.Tensor, dim: int = -1, alpha=None, kind: str | None = None,
             **kw) -> bool:
    """Whether `op` on z has a kernel. Tensor alpha: mappings only, rows held in registers
    (alpha == 1 rows are computed as softmax there); float alpha must be > 1 (1 is softmax)."""
    if not available(z):
        return False
    if op in KINDS:
        return op != "entmax_bisect" or _bisect_alpha_ok(alpha, z.shape[dim] if z.dim() else 1)
    if op == "fy_loss":
        if z.dim() != 2 or kind not in ("sparsemax", "entmax15", "entmax_bisect", "alpha_relu"):
            return False
        if kind in ("entmax_bisect", "alpha_relu"):
            least = KERNEL_ALPHA_MIN if kind == "entmax_bisect" else 1.0
            return not torch.is_tensor(alpha) and alpha is not None and float(alpha) > 1.0 \
                and float(alpha) >= least
        return True
    if op == "bounded_alpha":
        return _submodule("alpha").supports(z)
    if op == "sparse_attention_train":
        args = (z, kw["k"], kw["v"], kw.get("keep"), kind, alpha, kw["dropout_p"])
        if _long_attention(*args, kw.get("return_weights", False)):
            return True
        return not kw.get("is_causal", False) and _submodule("attention_train").supports(*args)
    return False


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

    name = _submodule("alpha_relu")._log_kernel.__name__
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
