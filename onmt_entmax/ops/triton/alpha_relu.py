"""alpha-ReLU decoding scores in one launch (no gradient):

    log alpha_relu(z) = log([(alpha - 1) z - tau]_+) / (alpha - 1),   -inf exactly where it is 0.

Elementwise, float32 math, stored in z's dtype; NaN stays NaN. The torch reference
(`ops.alpha_relu_log`) is five elementwise operations, five launches at every beam step.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._config import cdiv
from ._launch import launch

_BLOCK = 1024


@triton.jit(do_not_specialize=["n"])
def log_kernel(Z, OUT, n, am1, tau, BLOCK: tl.constexpr):
    """OUT = log([am1 z - tau]_+) / am1 over n elements; public as the kernel the process warm-up
    launches (its name is what `compiled_before` looks for in Triton's cache)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    msk = offs < n
    d = tl.load(Z + offs, mask=msk, other=0.0).to(tl.float32) * am1 - tau
    out = tl.where(d > 0, tl.log(d) / am1, tl.where(d == d, float("-inf"), d))
    tl.store(OUT + offs, out.to(OUT.dtype.element_ty), mask=msk)


def alpha_relu_log(z: torch.Tensor, alpha: float, tau: float) -> torch.Tensor:
    """log [(alpha - 1) z - tau]_+ / (alpha - 1) elementwise, z's shape and dtype (kernel path)."""
    zc = z.contiguous()
    out = torch.empty_like(zc)
    n = zc.numel()
    if n:
        launch(log_kernel, (cdiv(n, _BLOCK),), (zc, out, n, float(alpha) - 1.0, float(tau)),
               {"BLOCK": _BLOCK}, 4)
    return out
