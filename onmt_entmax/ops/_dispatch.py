"""One dispatch point from the public ops to the CUDA (Triton) kernels.

The torch code in this package is the reference and runs everywhere. On CUDA tensors, when
`onmt_entmax.ops.triton` imports (Triton present) and the entry of its `KERNELS` table for the op
takes the call, the op is run by the kernel instead (`KernelEntry` there states the contract).
`disabled` is the one reader of ONMT_ENTMAX_NO_TRITON: 1 forces the reference path for every op;
a comma-separated list of op names (e.g. `fy_loss,entmax_bisect`) only for those, and of `warm_up`
/ `prepare` for the once-a-process set-up (read at each call, so it can be changed while a
process runs).
"""
from __future__ import annotations

import functools
import os
import threading
from types import ModuleType
from typing import Any, Callable, Optional

import torch
from torch import Tensor


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
    and a kernel module and hashing Triton's library into its cache key (file reads and sha256
    release the GIL), so that it overlaps what the caller does next (loading a model's weights onto
    the GPU) and the warm-up takes less of what is left (docs/kernels.md). Once a process, where a
    CUDA device and Triton are present (ONMT_ENTMAX_NO_TRITON=warm_up turns it off with the warm-up,
    =prepare alone); `warm_up` waits for it. True when started."""
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
    process hashes Triton's own library (~400 MB) into its cache key and starts its driver (its time:
    docs/kernels.md), which otherwise lands on the first call that runs a kernel, e.g. the first beam
    step of a timed translation. One launch of the smallest kernel
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
