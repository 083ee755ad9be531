"""One dispatch point from the public ops to the CUDA (Triton) kernels.

The torch code in this package is the reference and runs everywhere. On CUDA tensors, when
`onmt_entmax.ops.triton` imports (Triton present) and says it handles the call, the op is run
by the kernel instead. ONMT_ENTMAX_NO_TRITON=1 forces the reference path for every op; a
comma-separated list of op names (e.g. `fy_loss,entmax_bisect`) only for those (read at each
call, so it can be changed while a process runs).

Contract for `onmt_entmax.ops.triton` (all callables autograd-aware, same semantics and dtype
policy as the reference, `dim` any int):
    supports(op: str, z: Tensor, dim: int, **kw) -> bool
    sparsemax(z, dim) -> Tensor
    entmax15(z, dim) -> Tensor
    entmax_bisect(z, alpha, dim, n_iter) -> Tensor       # alpha float or tensor (size 1 along dim)
    fy_loss(logits (N, V), target (N,) int64, kind: str, alpha, tau, ignore_index: int,
            label_smoothing: float, return_support: bool, reduction: str)
        -> loss: per row (N,) float32 for reduction "none", else ("sum" / "mean") 0-d in the logits' dtype
        kind in {"sparsemax", "entmax15", "entmax_bisect", "alpha_relu"}; rows whose target is
        ignore_index give 0; it checks the targets itself (a device assertion naming the target,
        asynchronous: no host sync). return_support: (loss, the number of nonzero probabilities
        of each row (N,) float32, 0 on ignore_index rows).
    sparse_attention_train(q, k, v, keep, kind, alpha, scale, dropout_p, return_weights, alpha_bounds,
                           is_causal)
        -> (B, H, Tq, Dv) or (that, weights)  # differentiable; supports() gets q as z and k=, v=,
        keep=, kind=, alpha=, dropout_p=, return_weights=, is_causal= as keywords (is_causal: keys
        after the query masked, top-left aligned, as scaled_dot_product_attention's);
        with alpha_bounds (lo, hi), alpha holds logits a of alpha = clamp(1 + sigmoid(a), lo, hi)
    The decoding ops below run at every beam step (host-bound): each decides itself and returns
    None for a call it does not take (run by `try_kernel`; `supports` is not asked):
    log_probs(z, kind, alpha, dim) -> log pi(z), -inf where pi(z) = 0, or None   # no grad
    alpha_relu_log(z, alpha: float, tau: float) -> log alpha_relu(z), or None   # no grad
    beam_stats(scores (R, N), kept (R, K)) -> (finite count (R,) int64, best score not kept (R,) float32),
        or None   # no grad
    beam_topk(scores (R, N), k) -> (k best (R, k), their positions (R, k) int64, stats (R, 2) float64:
        finite count, best score not kept), or None   # no grad
    sparse_attention_decode(q, k, v, keep, kind, alpha, scale) -> (B, H, Tq, Dv), or None  # no grad
"""
from __future__ import annotations

import functools
import os
import threading
from types import ModuleType
from typing import Any, Callable, Optional

import torch
from torch import Tensor


def _disabled(op: str) -> bool:
    flag = os.environ.get("ONMT_ENTMAX_NO_TRITON", "").strip()
    if not flag or flag == "0":
        return False
    return flag == "1" or op in {name.strip() for name in flag.split(",")}


@functools.lru_cache(maxsize=1)
def _triton() -> Optional[ModuleType]:
    try:
        from . import triton as kernels  # noqa: WPS433 (optional dependency)
    except ImportError:
        return None
    return kernels


def kernel(op: str, z: Tensor, dim: int = -1, **kw) -> Optional[Callable]:
    """The kernel implementing `op` for this call, or None for the torch reference."""
    if not z.is_cuda or _disabled(op):
        return None
    kernels = _triton()
    if kernels is None or not kernels.supports(op, z, dim, **kw):
        return None
    return getattr(kernels, op)


_SETUP: Optional[threading.Thread] = None  # the set-up started by prepare_in_background


def prepare_in_background() -> bool:
    """Start the host half of Triton's once-a-process set-up in a daemon thread: importing Triton
    and a kernel module (0.1-0.2 s on the CPU VM) and hashing Triton's library into its cache key
    (0.27-0.40 s there; file reads and sha256 release the GIL), so that it overlaps what the caller
    does next (loading a model's weights onto the GPU): the warm-up then took 0.39-0.45 s against
    0.64-0.65 s (medians, H200, docs/kernels.md). Once a process, where a CUDA device and Triton
    are present (ONMT_ENTMAX_NO_TRITON=warm_up turns it off with the warm-up, =prepare alone);
    `warm_up` waits for it. True when started."""
    global _SETUP
    if _SETUP is not None or _disabled("warm_up") or _disabled("prepare") or not torch.cuda.is_available():
        return False
    kernels = _triton()
    if kernels is None or not kernels.HAVE_TRITON:
        return False
    _SETUP = threading.Thread(target=kernels.prepare, name="onmt_entmax-triton-setup", daemon=True)
    _SETUP.start()
    return True


def warm_up(device) -> bool:
    """Triton's once-a-process set-up on `device`, done now: the first launch of any kernel in a
    process hashes Triton's own library (~400 MB) into its cache key and starts its driver, 0.5-0.6 s
    on the H200 hosts (warm disk cache; docs/kernels.md), which otherwise lands on the first call that
    runs a kernel, e.g. the first beam step of a timed translation. One launch of the smallest kernel
    (alpha-ReLU's log scores), where kernels run: a CUDA device, Triton present, neither op disabled
    (ONMT_ENTMAX_NO_TRITON=warm_up turns this off alone). True when it ran."""
    if _disabled("warm_up"):
        return False
    if _SETUP is not None:
        _SETUP.join()  # its cache key would otherwise be computed twice (an unlocked lru_cache)
    z = torch.zeros(1, 16, device=device)
    return try_kernel("alpha_relu_log", z, 1.5, 0.0) is not None


def cold_cache(device) -> Optional[str]:
    """Triton's cache directory when the kernels will run on `device` but have not been compiled
    for its GPU by this Triton yet (a machine's first sparse decoding: the first batches then
    compile each kernel they meet, seconds in all), else None. For a log line before `warm_up`."""
    device = torch.device(device)
    if device.type != "cuda" or _disabled("warm_up"):
        return None
    kernels = _triton()
    if kernels is None or not kernels.HAVE_TRITON:
        return None
    directory = kernels.cache_dir()  # empty: no disk cache, every process compiles (the user's choice)
    if not directory or kernels.compiled_before(torch.cuda.get_device_capability(device), directory):
        return None
    return directory


def try_kernel(op: str, z: Tensor, *args) -> Any:
    """`op(z, *args)` run by the kernel of an op that looks at its arguments itself (the decoding
    ops, at every beam step: the arguments looked at once, not by `supports` and again by the
    kernel); None where the torch reference must run instead: not CUDA, disabled, no Triton, or a
    call the kernel does not take."""
    if not z.is_cuda or _disabled(op):
        return None
    kernels = _triton()
    return None if kernels is None else getattr(kernels, op)(z, *args)
