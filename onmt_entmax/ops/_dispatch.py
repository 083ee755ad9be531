"""One dispatch point from the public ops to the CUDA (Triton) kernels.

The torch code in this package is the reference and runs everywhere. On CUDA tensors, when
`onmt_entmax.ops.triton` imports (Triton present) and its `KERNELS` table has an entry for the op
that takes the call, the op is run by the kernel instead. `disabled` is the one reader of
ONMT_ENTMAX_NO_TRITON: 1 forces the reference path for every op; a comma-separated list of op
names (e.g. `fy_loss,entmax_bisect`) only for those, and of `warm_up` / `prepare` for the
once-a-process set-up (read at each call, so it can be changed while a process runs).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import threading
from types import ModuleType
from typing import Any, Callable, Optional

import torch
from torch import Tensor


@dataclasses.dataclass(frozen=True)
class KernelEntry:
    """One op's kernel, as the dispatcher reads it from `onmt_entmax.ops.triton.KERNELS` (one entry
    an op): the contract between a public op, whose torch code is the reference, and its kernel.

    op: the name the public op dispatches by (`kernel` / `try_kernel`) and ONMT_ENTMAX_NO_TRITON lists.
    reference: the public op of `onmt_entmax.ops` holding the torch reference, which runs wherever
        this kernel does not.
    run: the kernel, with the reference's semantics and dtype policy, `dim` any int, autograd-aware
        where the reference is.
    supports: `(z, dim, **kw) -> bool`, whether this call takes `run` (asked by `kernel`); None for
        the decoding ops, run at every beam step (host-bound), whose `run` looks at its arguments
        once and returns None for a call it does not take (`try_kernel`).

    The runs, by op (their docstrings in ops/triton/__init__.py say more):
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


def disabled(name: str) -> bool:
    """Whether ONMT_ENTMAX_NO_TRITON turns off `name` (an op of `KERNELS`, or `warm_up` / `prepare`)."""
    flag = os.environ.get("ONMT_ENTMAX_NO_TRITON", "").strip()
    if not flag or flag == "0":
        return False
    return flag == "1" or name in {part.strip() for part in flag.split(",")}


def runs_kernels(z: Tensor) -> bool:
    """Whether z is on a device the kernels run on (CUDA)."""
    return z.is_cuda


@functools.lru_cache(maxsize=1)
def _triton() -> Optional[ModuleType]:
    try:
        from . import triton as kernels  # (optional dependency)
    except ImportError:
        return None
    return kernels


def kernel(op: str, z: Tensor, dim: int = -1, **kw) -> Optional[Callable]:
    """The kernel implementing `op` for this call (its entry's `run`, where its `supports` says so),
    or None for the torch reference."""
    if not runs_kernels(z) or disabled(op):
        return None
    kernels = _triton()
    if kernels is None:
        return None
    entry = kernels.KERNELS[op]
    return entry.run if entry.supports(z, dim, **kw) else None


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
    if _SETUP is not None or disabled("warm_up") or disabled("prepare") or not torch.cuda.is_available():
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
    if disabled("warm_up"):
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
    if device.type != "cuda" or disabled("warm_up"):
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
    if not runs_kernels(z) or disabled(op):
        return None
    kernels = _triton()
    return None if kernels is None else kernels.KERNELS[op].run(z, *args)
