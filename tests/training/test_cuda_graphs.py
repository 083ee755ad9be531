"""onmt_entmax.training.cuda_graphs: what both adapters' decoder graphs rely on, without a toolkit or a GPU.
The graphs themselves are checked against the eager loops on a GPU (tests/onmt/training/test_rnn_cuda_graphs.py)."""
import re
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from onmt_entmax.errors import CaptureError
from onmt_entmax.training.cuda_graphs import ShapeGraphs, lstm_loop_trains_on_cuda, pad_to, round_up


def test_padding_reaches_the_next_multiple_at_the_end_of_the_axis_only():
    x = torch.arange(2 * 5 * 3).view(2, 5, 3)
    padded = pad_to(x, 1, 4, value=-1)
    assert padded.shape == (2, 8, 3) and torch.equal(padded[:, :5], x) and (padded[:, 5:] == -1).all()
    mask = torch.zeros(2, 1, 6, dtype=torch.bool)
    assert pad_to(mask, -1, 8, value=True)[..., 6:].all() and pad_to(mask, -1, 8, value=True).shape == (2, 1, 8)
    assert pad_to(x, 1, 5) is x  # already a multiple
    assert [round_up(n, 4) for n in (1, 4, 5, 8)] == [4, 4, 8, 8]


class _Decoder(nn.Module):
    """What the check reads of a toolkit's RNN decoder: its mode and its state dict."""

    def __init__(self, **state):
        super().__init__()
        self.state = {"hidden": (torch.zeros(1), torch.zeros(1)), "input_feed": None, "coverage": None, **state}


def test_graphs_run_only_in_training_with_gradients_on_a_gpu_from_a_plain_lstm_state():
    on_gpu, on_cpu = SimpleNamespace(is_cuda=True), torch.zeros(1)
    assert lstm_loop_trains_on_cuda(_Decoder(), on_gpu)
    assert not lstm_loop_trains_on_cuda(_Decoder(), on_cpu)
    assert not lstm_loop_trains_on_cuda(_Decoder().eval(), on_gpu)  # validation, decoding
    with torch.no_grad():
        assert not lstm_loop_trains_on_cuda(_Decoder(), on_gpu)
    assert not lstm_loop_trains_on_cuda(_Decoder(coverage=torch.zeros(1)), on_gpu)
    assert not lstm_loop_trains_on_cuda(_Decoder(hidden=(torch.zeros(1),)), on_gpu)  # a GRU's state


def test_a_failed_capture_ends_training_with_one_line_naming_the_option_and_its_first_error(monkeypatch):
    from onmt_entmax.onmt.errors import is_refusal, one_line

    def capture(*args, **kwargs):
        try:
            raise RuntimeError("operation not permitted when stream is capturing")
        except RuntimeError:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    monkeypatch.setattr(torch.cuda, "make_graphed_callables", capture)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", object)
    graphs = ShapeGraphs(lambda: nn.Linear(2, 2), name="rnn_cuda_graphs")
    with pytest.raises(CaptureError) as err:
        graphs.get((torch.zeros(3, 2),))
    assert is_refusal(err.value)
    line = one_line(err.value, "onmt_train")
    assert line.startswith("onmt_train: error: rnn_cuda_graphs: a CUDA graph capture failed") and "\n" not in line
    assert "operation not permitted when stream is capturing" in line and "-train_from" in line
    assert not graphs.graphs


def test_shapes_beyond_the_cap_are_not_captured_and_every_shape_captures_into_one_memory_pool(
        monkeypatch, caplog):
    caplog.set_level("INFO", logger="onmt_entmax.training.cuda_graphs")
    captured, pools = [], []
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", object)  # (a fresh handle at each call)
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", lambda module, sample, **kw: captured.append(
        sample[0].shape) or pools.append(kw["pool"]) or module)
    graphs = ShapeGraphs(lambda: nn.Linear(2, 2), max_graphs=2)
    assert graphs.get((torch.zeros(3, 2),)) is not None and graphs.get((torch.zeros(3, 2),)) is not None
    assert graphs.get((torch.zeros(4, 2),)) is not None and graphs.get((torch.zeros(5, 2),)) is None
    assert captured == [(3, 2), (4, 2)]  # each shape once, none beyond the cap
    assert pools[0] is not None and pools[1] is pools[0]  # memory held once, not once per shape
    # the log says what the captures hold
    assert re.search(r"cuda graphs: 1 shapes captured \(\d+\.\d s in all\); \d+\.\d\d GiB held by the CUDA allocator",
                     caplog.text)


def test_every_capture_of_the_process_runs_on_one_capture_stream():
    # (torch.cuda.graph makes its capture stream once per class: one class, one stream, so the blocks a
    # capture frees in the shared pool are free for the next one, which the allocator allows per stream)
    from onmt_entmax.training.cuda_graphs import thread_local_capture

    with thread_local_capture():
        first = torch.cuda.graph
    with thread_local_capture():
        assert torch.cuda.graph is first and first is not torch.cuda.graphs.graph
    assert torch.cuda.graph is torch.cuda.graphs.graph  # restored after each capture


class _Activations(nn.Module):
    """(rows, 1) -> (rows,) through four tanh(x * w) layers of width 512: each layer saves (rows, 512)
    activations for its backward, while what a graph keeps between replays (its input and output buffers,
    the gradient of the 512 weights) is small; its memory pool holds mostly activations."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 512, device="cuda"))

    def forward(self, x):
        for _ in range(4):
            x = torch.tanh(x * self.w)
        return x.sum(1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_graphs_of_several_shapes_hold_about_one_shapes_activations_not_one_set_each():
    graphs = ShapeGraphs(_Activations)
    torch.cuda.synchronize()
    start = torch.cuda.memory_reserved()
    graphs.get((torch.randn(4096, 1, device="cuda"),))
    first = torch.cuda.memory_reserved() - start  # its pool: ~60 MiB of activations
    for rows in (3584, 3072, 2560, 2048):  # a pool each would add ~50, 45, 35, 30 MiB
        graphs.get((torch.randn(rows, 1, device="cuda"),))
    total = torch.cuda.memory_reserved() - start
    assert len(graphs.graphs) == 5 and first > 0
    assert total < 1.5 * first, (first / 2**20, total / 2**20)
