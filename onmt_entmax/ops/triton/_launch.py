"""Low-overhead launches of the Triton kernels.

Triton's JIT dispatch (binding, specialisation, cache key, launcher) costs tens of microseconds
of host time per call, more than the GPU time of an attention-sized kernel (see
docs/kernels.md, `bench_kernels.py --overhead`). The first call for a given specialisation goes
through the JIT (which compiles and returns the compiled kernel); later calls with the same
specialisation (dtypes, 16-byte pointer alignment, int values 1 / multiple of 16 / 32-bit, the
constexprs and warps) launch that compiled kernel directly.

Floating-point contraction (`enable_fp_fusion`) is off wherever a thread holds a single entry of
a row it reduces. A warp reduces a row by a butterfly of shuffles, after which every lane holds the
row's sum, bit for bit the same, as long as each step is a plain (commutative) add: lane i computes
x_i + x_j and lane j x_j + x_i. When a lane's own term is a bare product, LLVM fuses it into the
first step, fma(d_i, d_i, d_j^2) in lane i against fma(d_j, d_j, d_i^2) in lane j, and the lanes
of one row end up with different sums. The solver's loop exit and certificate are decided from
these replicated row values, so the lanes then disagree: they leave the loop at different passes,
and the shuffles after it exchange with lanes that are elsewhere (wrong rows, seen with one-warp
tiles and with rows of at most 16 entries in OpenNMT-py training: docs/kernels.md). In a program
of one long row a thread adds its entries first, so its term entering the butterfly is a sum and
nothing can be fused there: long rows keep contraction (`launch_config`'s FP_FUSION), which is
~10% of the 1.5-entmax loss time. Tiles of several short rows do not, though each lane holds
several entries: Triton >= 3.7 runs their butterfly first (tests/ops/test_triton_codegen.py).
"""
from __future__ import annotations

import os

import torch

try:
    from triton import knobs
    from triton.runtime import driver
    _FAST = os.environ.get("TRITON_INTERPRET", "0") != "1"
except ImportError:  # other Triton versions: always the JIT path
    _FAST = False

_CACHE: dict = {}
_DRIVER: list = []  # (bound once: `driver.active` is a lazy proxy, two attribute lookups a launch)


def _spec(a):
    """The properties Triton specialises a runtime argument on."""
    if isinstance(a, torch.Tensor):
        return (a.dtype, a.data_ptr() % 16 == 0)
    if isinstance(a, bool):
        return ("b", a)
    if isinstance(a, int):
        return ("i", a == 1, a % 16 == 0, -2**31 <= a < 2**31)
    if a is None:
        return None
    return type(a)


def _specs(args: tuple) -> tuple:
    """`_spec` of every argument; tensors and plain ints (most of a launch's arguments) inline:
    a launch is host-bound at decoding shapes, and a function call per argument was ~half of
    `launch`'s own time."""
    return tuple([(a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, torch.Tensor) else
                  ("i", a == 1, a % 16 == 0, -2**31 <= a < 2**31) if type(a) is int else _spec(a)
                  for a in args])


def launch(fn, grid: tuple, args: tuple, constexprs: dict, num_warps: int,
           fp_fusion: bool = False, spec=None, num_stages: int | None = None, max_registers: int | None = None) -> None:
    """fn[grid](*args, **constexprs, num_warps=num_warps, enable_fp_fusion=fp_fusion) (and
    num_stages=num_stages, maxnreg=max_registers where given: Triton's defaults otherwise; a register cap
    trades spills for more resident blocks an SM); `args` are the runtime parameters in
    signature order, `constexprs` the remaining parameters. Like Triton, launches on the current CUDA
    device's current stream.

    `spec`: a caller that knows its kernel may pass what Triton specialises `args` on (dtypes,
    pointer alignment, 64-bit ints; e.g. for a kernel whose ints are all `do_not_specialize`)
    instead of having it derived argument by argument, which costs ~1 us of host time per argument."""
    options = {"num_warps": num_warps, "enable_fp_fusion": fp_fusion}
    if num_stages is not None:
        options["num_stages"] = num_stages
    if max_registers is not None:
        options["maxnreg"] = max_registers
    if not _FAST:
        fn[grid](*args, **constexprs, **options)
        return
    if not _DRIVER:  # Triton's active driver's device and stream getters, as its own launcher uses them
        _DRIVER.extend((driver.active.get_current_device, driver.active.get_current_stream))
    dev = _DRIVER[0]()
    # keyed by id(fn): a JITFunction hashes in Python (~1 us); the entry keeps fn, checked by identity
    key = (id(fn), dev, num_warps, fp_fusion, num_stages, max_registers, tuple(constexprs.items()),
           _specs(args) if spec is None else spec)
    entry = _CACHE.get(key)
    if entry is None or entry[2] is not fn:
        kernel = fn[grid](*args, **constexprs, **options)
        names = fn.arg_names[len(args):]
        if sorted(names) == sorted(constexprs) and kernel is not None:
            _CACHE[key] = (kernel, tuple(constexprs[n] for n in names), fn)
        return
    kernel, consts, _ = entry
    stream = _DRIVER[1](dev)
    g = tuple(grid) + (1, 1)
    full = args + consts
    enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    if _no_hooks(enter) and _no_hooks(leave):
        # nothing to call: the launcher skips None hooks, and no launch metadata is built for them
        kernel.run(g[0], g[1], g[2], stream, kernel.function, kernel.packed_metadata, None, None, None, *full)
        return
    kernel.run(g[0], g[1], g[2], stream, kernel.function, kernel.packed_metadata,
               kernel.launch_metadata(grid, stream, *full), enter, leave, *full)


def _no_hooks(hook) -> bool:
    """True for an unset launch hook: None, or (Triton 3.4+) a HookChain with nothing added (Triton's
    own launch still calls that empty chain twice a launch, after building the launch metadata)."""
    return hook is None or getattr(hook, "calls", None) == []


def launch_spec(tensors, ints) -> tuple:
    """`launch`'s `spec` for a kernel whose ints are all `do_not_specialize`: the tensors' dtypes and
    16-byte alignment, and whether any int needs 64 bits."""
    return tuple([(t.dtype, t.data_ptr() % 16 == 0) for t in tensors]), max(ints) >= 2**31
