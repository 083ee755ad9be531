"""The input-feed RNN decoder's training steps as CUDA graphs, one per shape.

A 2-layer LSTM decoder with input feeding (Luong et al. 2015; the SIGMORPHON models of Peters et al.
2019) runs one small step per target position: at batch 64 a training step is ~5 ms of GPU kernels
against 25-40 ms of host time, 1,100-1,300 kernel launches (docs/benchmarks.md). Replaying the whole
decoder loop, forward and backward, as two captured CUDA graphs (``torch.cuda.make_graphed_callables``)
takes that launch work off the host.

A graph has fixed shapes, so a batch is padded to a shape bucket: its target steps T to a multiple of
``T_STEP`` and its source positions S to a multiple of ``S_STEP``. Nothing the loss sees changes:

* the outputs and attention of steps t < T do not depend on later steps, and are sliced back to T;
* padded source positions get zero vectors and are masked by the source lengths (-inf, weight
  exactly 0), as the batch's own padding already is;
* the padded steps' outputs are cut away, so their gradient is zero.

The decoder state left after a graphed forward is the state after the padded steps (the input feed,
read from the sliced outputs, is exact): the toolkits read it again only under truncated BPTT, which
the adapters refuse with graphs. Dropout inside a graph draws new numbers at every replay (the CUDA
generator's offset advances), but not the same numbers an eager step would draw.

This module imports neither toolkit: the decoder is driven through what OpenNMT-py's and Eole's
``InputFeedRNNDecoder`` share (a ``state`` dict of ``hidden`` (h, c), ``input_feed`` (1, B, H) and
``coverage``; ``_run_forward_pass(tgt, enc_out, src_len)`` returning per-step lists).
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

T_STEP = 4  # target steps padded to a multiple of this
S_STEP = 8  # source positions padded to a multiple of this
MAX_GRAPHS = 96  # shapes captured at most; a batch of another shape then runs eagerly

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


class InputFeedSteps(nn.Module):
    """The decoder's loop over target steps as one call of tensors only (what a graph captures).

    forward(tgt (B, T, 1), enc_out (B, S, H), src_len (B,), h0, c0 (L, B, H), input_feed (B, H))
        -> (outputs (B, T, H), attention (T, B, S), h_T, c_T)
    runs the toolkit's own ``_run_forward_pass`` (passed in, not copied) from that state.
    """

    def __init__(self, decoder: nn.Module, run_forward_pass: Callable):
        super().__init__()
        self.decoder = decoder
        self._run = run_forward_pass

    def forward(self, tgt: Tensor, enc_out: Tensor, src_len: Tensor, h0: Tensor, c0: Tensor,
                input_feed: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        d = self.decoder
        kept = d.state
        d.state = {"hidden": (h0, c0), "input_feed": input_feed.unsqueeze(0), "coverage": None}
        try:
            (h, c), outs, attns = self._run(d, tgt, enc_out, src_len=src_len)
        finally:
            d.state = kept
        return torch.stack(outs, dim=1), torch.stack(attns["std"]), h, c


class DecoderGraphs:
    """The CUDA graphs of one decoder's training steps, one per (batch, padded T, padded S) shape.

    ``forward_pass(tgt, enc_out, src_len)`` stands in for the decoder's ``_run_forward_pass`` in
    training: the first batch of a shape captures its graphs (three warm-up steps, then the capture;
    a fraction of a second), every later one replays them. After ``MAX_GRAPHS`` shapes, batches of
    new shapes run the toolkit's eager loop. A capture that fails raises ``CaptureError``.

    Not for gradient accumulation: a replay overwrites the activations the previous replay of the
    same graph saved for its backward, so each forward must be followed by its backward (the
    adapters refuse accum_count > 1 with graphs).
    """

    def __init__(self, decoder: nn.Module, run_forward_pass: Callable, pad_index: int,
                 max_graphs: int = MAX_GRAPHS, log: logging.Logger = _log):
        self.decoder = decoder
        self.run_eager = run_forward_pass
        self.pad_index = int(pad_index)
        self.max_graphs = max_graphs
        self.graphs: dict[tuple, Callable] = {}
        self.eager_batches = 0  # batches that ran eagerly (shapes over the cap)
        self.capture_seconds = 0.0
        self.log = log  # (the toolkit's logger: its lines go to the training log)

    def applies(self, decoder: nn.Module, enc_out: Tensor, src_len: Optional[Tensor]) -> bool:
        """Graphs run in training, with gradients, on CUDA, from a plain LSTM state, never under
        autocast (a graph would keep autocast's cached casts)."""
        state = decoder.state
        return (decoder.training and torch.is_grad_enabled() and enc_out.is_cuda and src_len is not None
                and not torch.is_autocast_enabled()
                and state.get("coverage") is None and isinstance(state.get("hidden"), tuple)
                and len(state["hidden"]) == 2)

    def forward_pass(self, decoder: nn.Module, tgt: Tensor, enc_out: Tensor, src_len: Optional[Tensor]):
        """(final state, outputs (B, T, H), {"std": attention (T, B, S)}), as the eager loop returns
        them once stacked."""
        if not self.applies(decoder, enc_out, src_len):
            return self.run_eager(decoder, tgt, enc_out, src_len=src_len)
        h0, c0 = decoder.state["hidden"]
        feed = decoder.state["input_feed"].squeeze(0)
        batch, steps, _ = tgt.shape
        src_positions = enc_out.size(1)
        t_pad, s_pad = round_up(steps, T_STEP), round_up(src_positions, S_STEP)
        args = (F.pad(tgt, (0, 0, 0, t_pad - steps), value=self.pad_index),
                F.pad(enc_out, (0, 0, 0, s_pad - src_positions)), src_len, h0, c0, feed)
        graphed = self._graphed(args)
        if graphed is None:
            self.eager_batches += 1
            return self.run_eager(decoder, tgt, enc_out, src_len=src_len)
        outs, attn, h, c = graphed(*args)
        return (h, c), outs[:, :steps], {"std": attn[:steps, :, :src_positions]}

    def _graphed(self, args: tuple) -> Optional[Callable]:
        key = tuple((tuple(a.shape), a.dtype, a.requires_grad) for a in args)
        if key in self.graphs:
            return self.graphs[key]
        if len(self.graphs) >= self.max_graphs:
            return None
        # the graphs read their inputs from these buffers (each replay copies the batch into them)
        sample = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)
        # a module of its own per shape: make_graphed_callables replaces the forward of the module it gets
        steps = InputFeedSteps(self.decoder, self.run_eager)
        start = time.perf_counter()
        try:
            with thread_local_capture():
                graphed = torch.cuda.make_graphed_callables(steps, sample, allow_unused_input=True)
        except Exception as err:  # a kernel that syncs with the host, an op graphs do not take
            raise CaptureError(f"rnn_cuda_graphs: capturing the decoder's steps failed ({first_error(err)}); this "
                               "process cannot continue: train without rnn_cuda_graphs (-train_from the last "
                               "checkpoint resumes the run)") from err
        self.graphs[key] = graphed
        self.capture_seconds += time.perf_counter() - start
        if len(self.graphs) in (1, 8, 16, 32, 64):
            self.log.info("rnn_cuda_graphs: %d shapes captured (%.1f s in all)", len(self.graphs), self.capture_seconds)
        if len(self.graphs) == self.max_graphs:
            self.log.info("rnn_cuda_graphs: %d shapes captured; batches of other shapes run eagerly",
                      self.max_graphs)
        return graphed
