"""Training computations replayed as CUDA graphs, one per shape of their inputs.

A recurrent decoder with input feeding (Luong et al. 2015; the SIGMORPHON models of Peters et al.
2019) runs one small step per target position: at batch 64 a training step spends several times
longer launching its kernels than the GPU spends running them (docs/benchmarks.md). Replaying the whole
loop, forward and backward, as two captured CUDA graphs (``torch.cuda.make_graphed_callables``) takes
that launch work off the host. A graph has fixed shapes: ``ShapeGraphs`` keeps one per shape, and the
caller pads a batch to a shape bucket (``round_up``) where padding provably changes nothing the loss
sees. Dropout inside a graph draws new numbers at every replay (the CUDA generator's offset advances),
not the numbers an eager step would draw. This module imports neither toolkit: ``DecoderGraphs``
drives OpenNMT-py's and Eole's ``InputFeedRNNDecoder`` loops through what they share (the ``state``
dict, a loop over per-step lists) and the differences each adapter passes in
(``onmt_entmax/onmt/training/cuda_graphs.py``, ``onmt_entmax/eole/training/cuda_graphs.py``).
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

from onmt_entmax.errors import CaptureError

MAX_GRAPHS = 96  # shapes captured at most; a batch of another shape then runs eagerly
ATTR = "entmax_graphs"  # the decoder attribute holding its DecoderGraphs
T_STEP = 4  # a decoder's target steps are padded to a multiple of this
S_STEP = 8  # its source positions to a multiple of this

_log = logging.getLogger("onmt_entmax.training.cuda_graphs")


class _ThreadLocalGraph(torch.cuda.graph):
    """``torch.cuda.graph`` capturing in "thread_local" mode. One class for the process: the capture
    stream it makes at its first capture (``default_capture_stream``, a class attribute) is the stream
    of every later capture, and the caching allocator reuses a free block of a memory pool only on the
    stream that freed it, so the shapes' captures can share one pool (``ShapeGraphs``)."""

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode: str = "thread_local", **kwargs):
        super().__init__(cuda_graph, pool=pool, stream=stream, capture_error_mode=capture_error_mode, **kwargs)


@contextlib.contextmanager
def thread_local_capture() -> Iterator[None]:
    """``torch.cuda.make_graphed_callables`` captures in CUDA's "global" mode, where an unsafe CUDA call
    from *any* thread of the process (a data loader's pinned-memory thread, Triton's set-up) ends the
    capture; here captures run in "thread_local" mode: only the capturing thread's calls count."""
    with mock.patch.object(torch.cuda, "graph", _ThreadLocalGraph):
        yield


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


def unreplayable(option: str, refusals: list[tuple[bool, str]]) -> Optional[str]:
    """The one-line refusal of ``option`` naming each setting (``refusals``: (refused, "name value"))
    that its graphs cannot replay, or None when there is none."""
    asked = [what for refused, what in refusals if refused]
    if not asked:
        return None
    return (f"{option} replays the input-feed LSTM decoder (accum_count 1, float32), but {', '.join(asked)} "
            f"is set: remove {option} or that option")


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

    All shapes capture into one memory pool (``pool``), so that the process holds about one shape's
    activations rather than one set per shape (with a pool each, the memory grew with every shape
    captured: docs/integration.md). Sharing is safe under this class's
    contract: each forward replay is followed by its backward before any other replay, and what must
    outlive a replay (input buffers, outputs, gradients: the graphed callable keeps them referenced) is
    never handed to a later capture; a later capture reuses only an earlier graph's temporaries and
    saved activations, which are dead once its backward has run. A graph's outputs are read before the
    next replay of *any* shape overwrites them.

    Not for gradient accumulation: a replay overwrites the activations that the previous replay saved
    for its backward, so each forward must be followed by its backward.
    """

    def __init__(self, make_module: Callable[[], nn.Module], max_graphs: int = MAX_GRAPHS,
                 log: logging.Logger = _log, name: str = "cuda graphs"):
        self.make_module = make_module
        self.max_graphs = max_graphs
        self.log = log  # (a toolkit's logger: its lines go to the training log)
        self.name = name  # (the option, in messages)
        self.graphs: dict[tuple, Callable] = {}
        self.capture_seconds = 0.0
        self.pool = None  # the memory pool every shape's graphs capture into (made at the first capture)

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
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            with thread_local_capture():
                graphed = torch.cuda.make_graphed_callables(module, sample, allow_unused_input=True,
                                                            pool=self.pool)
        except Exception as err:  # a kernel that syncs with the host, an op graphs do not take
            raise CaptureError(f"{self.name}: a CUDA graph capture failed ({first_error(err)}); this "
                               f"process cannot continue: train without {self.name} (-train_from the last "
                               "checkpoint resumes the run)") from err
        self.graphs[key] = graphed
        # (each capture warms up on a new side stream, whose freed blocks the allocator keeps for that
        # stream alone: released here, or every shape would keep its warm-up's activations cached)
        torch.cuda.empty_cache()
        self.capture_seconds += time.perf_counter() - start
        if len(self.graphs) in (1, 8, 16, 32, 64):
            self.log.info("%s: %d shapes captured (%.1f s in all); %.2f GiB held by the CUDA allocator",
                          self.name, len(self.graphs), self.capture_seconds, torch.cuda.memory_reserved() / 2**30)
        if len(self.graphs) == self.max_graphs:
            self.log.info("%s: %d shapes captured; batches of other shapes run eagerly", self.name,
                          self.max_graphs)
        return graphed


class InputFeedSteps(nn.Module):
    """An input-feed decoder's loop over target steps as one call of tensors only (what a graph captures).

    forward(x (B, T, ...), enc_out (B, S, H), memory_info, h0, c0 (L, B, H), input_feed (B, H))
        -> (outputs (B, T, H), attention (stacked on ``attn_dim``), h_T, c_T)
    runs the toolkit's own loop ``run(decoder, x, enc_out, **{memory_kw: memory_info})`` (passed in, not
    copied) from that state: OpenNMT-py's takes target ids and ``src_len`` and stacks attention as
    (T, B, S); Eole's takes embeddings and ``src_pad_mask`` and stacks (B, T, S).
    """

    def __init__(self, decoder: nn.Module, run: Callable, memory_kw: str, attn_dim: int):
        super().__init__()
        self.decoder = decoder
        self._run, self.memory_kw, self.attn_dim = run, memory_kw, attn_dim

    def forward(self, x: Tensor, enc_out: Tensor, memory_info: Tensor, h0: Tensor, c0: Tensor,
                input_feed: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        d = self.decoder
        kept = d.state
        d.state = {"hidden": (h0, c0), "input_feed": input_feed.unsqueeze(0), "coverage": None}
        try:
            (h, c), outs, attns = self._run(d, x, enc_out, **{self.memory_kw: memory_info})
        finally:
            d.state = kept
        return torch.stack(outs, dim=1), torch.stack(attns["std"], dim=self.attn_dim), h, c


class DecoderGraphs:
    """One decoder's training steps through ``ShapeGraphs``, keyed by (batch, padded T, padded S).

    ``forward_pass(decoder, x, enc_out, memory_info)`` stands in for the toolkit's loop: in training on
    a GPU (``lstm_loop_trains_on_cuda``) it pads x with ``x_pad`` to a multiple of ``T_STEP`` steps and
    enc_out with zeros to a multiple of ``S_STEP`` positions (``pad_memory`` does the same to the
    source lengths or mask), replays, and slices the outputs and attention back; elsewhere, and for
    shapes beyond the cap, the toolkit's loop runs. Padded steps come after the real ones and padded
    source positions are masked (weight exactly 0), so the loss sees the same outputs, attention and
    gradients. The state left is that after the padded steps (the input feed, read from the sliced
    outputs, is exact): the toolkits read it again only under truncated BPTT, which the adapters
    refuse with graphs.
    """

    def __init__(self, decoder: nn.Module, run: Callable, memory_kw: str, attn_dim: int,
                 pad_memory: Callable[[Tensor], Tensor], x_pad: int = 0, log: logging.Logger = _log):
        self.run_eager, self.memory_kw, self.attn_dim = run, memory_kw, attn_dim
        self.pad_memory, self.x_pad = pad_memory, x_pad
        self.shapes = ShapeGraphs(lambda: InputFeedSteps(decoder, run, memory_kw, attn_dim),
                                  name="rnn_cuda_graphs", log=log)
        self.eager_batches = 0  # training batches that ran eagerly (shapes over the cap)

    def forward_pass(self, decoder: nn.Module, x: Tensor, enc_out: Tensor, memory_info: Optional[Tensor]):
        """(final state, outputs (B, T, H), {"std": attention}), as the toolkit's decoder ``forward``
        has them once stacked."""
        if memory_info is None or not lstm_loop_trains_on_cuda(decoder, enc_out):
            return self.run_eager(decoder, x, enc_out, **{self.memory_kw: memory_info})
        h0, c0 = decoder.state["hidden"]
        args = (pad_to(x, 1, T_STEP, self.x_pad), pad_to(enc_out, 1, S_STEP), self.pad_memory(memory_info),
                h0, c0, decoder.state["input_feed"].squeeze(0))
        graphed = self.shapes.get(args)
        if graphed is None:
            self.eager_batches += 1
            return self.run_eager(decoder, x, enc_out, **{self.memory_kw: memory_info})
        outs, attn, h, c = graphed(*args)
        steps, positions = x.size(1), enc_out.size(1)
        attn = attn[:steps, :, :positions] if self.attn_dim == 0 else attn[:, :steps, :positions]
        return (h, c), outs[:, :steps], {"std": attn}


def eager_loop(decoder: nn.Module) -> Callable:
    """The toolkit's own ``_run_forward_pass`` of ``decoder``'s class (the one ``graphed_loop`` wraps)."""
    run = type(decoder)._run_forward_pass
    return getattr(run, "__wrapped__", run)


def attach(decoder: nn.Module, graphs: DecoderGraphs, log: logging.Logger) -> None:
    """Give ``decoder`` its graphs (a plain attribute: not a submodule, not in the state dict)."""
    setattr(decoder, ATTR, graphs)
    on_gpu = next(decoder.parameters()).is_cuda
    log.info("rnn_cuda_graphs: the decoder's training steps run as CUDA graphs%s",
             "" if on_gpu else " (on a GPU only: eager here)")


def graphed_loop(upstream: Callable, memory_kw: str) -> Callable:
    """Wrapper of a toolkit's ``InputFeedRNNDecoder._run_forward_pass(x, enc_out, <memory_kw>=...)``
    (both toolkits call it with that keyword): through the decoder's graphs when it has them."""

    def _run_forward_pass(self, x, enc_out, **memory):
        graphs = self.__dict__.get(ATTR)
        if graphs is None:
            return upstream(self, x, enc_out, **memory)
        return graphs.forward_pass(self, x, enc_out, memory.get(memory_kw))

    return _run_forward_pass
