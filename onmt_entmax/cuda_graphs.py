"""Training computations replayed as CUDA graphs, one per shape of their inputs.

A recurrent decoder with input feeding (Luong et al. 2015; the SIGMORPHON models of Peters et al.
2019) runs one small step per target position: at batch 64 a training step is ~5 ms of GPU kernels
against 25-40 ms of host time, 1,100-1,300 kernel launches (docs/benchmarks.md). Replaying the whole
loop, forward and backward, as two captured CUDA graphs (``torch.cuda.make_graphed_callables``) takes
that launch work off the host. A graph has fixed shapes: ``ShapeGraphs`` keeps one per shape, and the
caller pads a batch to a shape bucket (``round_up``) where padding provably changes nothing the loss
sees. Dropout inside a graph draws new numbers at every replay (the CUDA generator's offset advances),
not the numbers an eager step would draw. This module imports neither toolkit; each adapter wraps its
decoder's loop (``onmt_entmax/onmt/training/cuda_graphs.py``).
"""
from __future__ import annotations

import contextlib
import logging
import time
from typing import Callable, Iterator, Optional
from unittest import mock

import torch
import torch.nn.functional as F
from torch import Tensor, nn

MAX_GRAPHS = 96  # shapes captured at most; a batch of another shape then runs eagerly
T_STEP = 4  # a decoder's target steps are padded to a multiple of this
S_STEP = 8  # its source positions to a multiple of this

_log = logging.getLogger("onmt_entmax.cuda_graphs")


@contextlib.contextmanager
def thread_local_capture() -> Iterator[None]:
    """``torch.cuda.make_graphed_callables`` captures in CUDA's "global" mode, where an unsafe CUDA call
    from *any* thread of the process (a data loader's pinned-memory thread, Triton's set-up) ends the
    capture; here captures run in "thread_local" mode: only the capturing thread's calls count."""

    class Graph(torch.cuda.graph):
        def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode: str = "thread_local"):
            super().__init__(cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode)

    with mock.patch.object(torch.cuda, "graph", Graph):
        yield


class CaptureError(RuntimeError):
    """A capture failed: CUDA's random-number state is left inside the aborted capture, so the process
    cannot go on training (eager dropout would fail too). Printed in one line by the adapters."""

    onmt_entmax_refusal = True


def first_error(err: BaseException) -> str:
    """The first exception of a chain, in one line (a failed capture reports a later, vaguer one)."""
    while err.__context__ is not None and err.__context__ is not err:
        err = err.__context__
    return f"{type(err).__name__}: {err}".splitlines()[0]


def round_up(n: int, step: int) -> int:
    """The smallest multiple of ``step`` >= n."""
    return -(-n // step) * step


def pad_to(x: Tensor, dim: int, step: int, value: float = 0) -> Tensor:
    """``x`` padded with ``value`` at the end of ``dim`` to a multiple of ``step`` positions."""
    missing = round_up(x.size(dim), step) - x.size(dim)
    if not missing:
        return x
    pad = [0, 0] * (x.dim() - dim % x.dim())
    pad[-1] = missing
    return F.pad(x, pad, value=value)


def lstm_loop_trains_on_cuda(decoder: nn.Module, enc_out: Tensor) -> bool:
    """Where an input-feed decoder's loop can replay graphs: training, with gradients, on CUDA, from
    a plain LSTM state (h, c) without coverage, never under autocast (a graph would keep autocast's
    cached casts). ``decoder.state`` is the dict both toolkits' RNN decoders keep."""
    state = decoder.state
    return (decoder.training and torch.is_grad_enabled() and enc_out.is_cuda and not torch.is_autocast_enabled()
            and state.get("coverage") is None and isinstance(state.get("hidden"), tuple)
            and len(state["hidden"]) == 2)


class ShapeGraphs:
    """Captured CUDA graphs of a module's forward and backward, one per shape of its arguments.

    ``get(args)`` returns the graphed callable for the arguments' shapes (dtypes, requires_grad): the
    first call with a shape captures it (``torch.cuda.make_graphed_callables`` on a fresh module from
    ``make_module``: three warm-up passes, then the capture, a fraction of a second), later calls
    return the same graphs, which read their inputs from buffers that each replay copies the arguments
    into. None once ``max_graphs`` shapes are captured (the caller runs eagerly). A failed capture
    raises ``CaptureError``.

    Not for gradient accumulation: a replay overwrites the activations that the previous replay of the
    same graph saved for its backward, so each forward must be followed by its backward.
    """

    def __init__(self, make_module: Callable[[], nn.Module], max_graphs: int = MAX_GRAPHS,
                 log: logging.Logger = _log, name: str = "cuda graphs"):
        self.make_module = make_module
        self.max_graphs = max_graphs
        self.log = log  # (a toolkit's logger: its lines go to the training log)
        self.name = name  # (the option, in messages)
        self.graphs: dict[tuple, Callable] = {}
        self.capture_seconds = 0.0

    def get(self, args: tuple) -> Optional[Callable]:
        key = tuple((tuple(a.shape), a.dtype, a.requires_grad) for a in args)
        if key in self.graphs:
            return self.graphs[key]
        if len(self.graphs) >= self.max_graphs:
            return None
        sample = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)  # the input buffers
        module = self.make_module()  # (make_graphed_callables replaces the forward of the module it gets)
        start = time.perf_counter()
        try:
            with thread_local_capture():
                graphed = torch.cuda.make_graphed_callables(module, sample, allow_unused_input=True)
        except Exception as err:  # a kernel that syncs with the host, an op graphs do not take
            raise CaptureError(f"{self.name}: a CUDA graph capture failed ({first_error(err)}); this "
                               f"process cannot continue: train without {self.name} (-train_from the last "
                               "checkpoint resumes the run)") from err
        self.graphs[key] = graphed
        self.capture_seconds += time.perf_counter() - start
        if len(self.graphs) in (1, 8, 16, 32, 64):
            self.log.info("%s: %d shapes captured (%.1f s in all)", self.name, len(self.graphs),
                          self.capture_seconds)
        if len(self.graphs) == self.max_graphs:
            self.log.info("%s: %d shapes captured; batches of other shapes run eagerly", self.name,
                          self.max_graphs)
        return graphed
