"""One dispatch point from the public ops to the CUDA (Triton) kernels.

The torch code in this package is the reference and runs everywhere. On CUDA tensors, when
`onmt_entmax.ops.triton` imports (Triton present) and says it handles the call, the op is run
by the kernel instead. Set ONMT_ENTMAX_NO_TRITON=1 to force the reference path.

Contract for `onmt_entmax.ops.triton` (all callables autograd-aware, same semantics and dtype
policy as the reference, `dim` any int):
    supports(op: str, z: Tensor, dim: int, **kw) -> bool
    sparsemax(z, dim) -> Tensor
    entmax15(z, dim) -> Tensor
    entmax_bisect(z, alpha, dim, n_iter) -> Tensor       # alpha float or tensor (size 1 along dim)
    fy_loss(logits (N, V), target (N,), kind: str, alpha, tau, ignore_index: int,
            label_smoothing: float) -> per-row loss (N,) float32
        kind in {"sparsemax", "entmax15", "entmax_bisect", "alpha_relu"}; rows whose target is
        ignore_index give 0; targets are already validated.
"""
from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Callable, Optional

from torch import Tensor


@functools.lru_cache(maxsize=1)
def _triton() -> Optional[ModuleType]:
    if os.environ.get("ONMT_ENTMAX_NO_TRITON"):
        return None
    try:
        from . import triton as kernels  # noqa: WPS433 (optional dependency)
    except ImportError:
        return None
    return kernels


def kernel(op: str, z: Tensor, dim: int = -1, **kw) -> Optional[Callable]:
    """The kernel implementing `op` for this call, or None for the torch reference."""
    if not z.is_cuda:
        return None
    kernels = _triton()
    if kernels is None or not kernels.supports(op, z, dim, **kw):
        return None
    return getattr(kernels, op)
