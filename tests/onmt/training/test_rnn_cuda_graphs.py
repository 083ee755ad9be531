"""rnn_cuda_graphs: the input-feed decoder's training steps as CUDA graphs (onmt_entmax/training/cuda_graphs.py,
onmt_entmax/onmt/training/cuda_graphs.py).

What a user relies on: a batch padded to its graph's shape gives the loss the same outputs, attention
and gradients as the eager loop (checked on the CPU with the padded loop run eagerly, and on a GPU
with the captured graphs); options the graphs cannot replay are refused by name; on a CPU the option
changes nothing.
"""
from types import SimpleNamespace

import pytest
import torch

from onmt_testkit import build_vocab, train, yaml_config

from onmt_entmax.onmt.model.surgery import install_rnn_attention
from onmt_entmax.onmt.training import cuda_graphs
from onmt_entmax.training import cuda_graphs as graphs_core
from onmt_entmax.training.cuda_graphs import round_up

H, V, PAD = 16, 11, 1


def _decoder(function: str, dropout: float = 0.0, device: str = "cpu"):
    from onmt.decoders.decoder import InputFeedRNNDecoder
    from onmt.modules import Embeddings

    torch.manual_seed(0)
    emb = Embeddings(word_vec_size=8, word_vocab_size=V, word_padding_idx=PAD, dropout=dropout)
    decoder = InputFeedRNNDecoder("LSTM", True, 2, H, attn_type="general", attn_func="softmax",
                                  dropout=dropout, embeddings=emb)
    model = torch.nn.Module()
    model.decoder = decoder
    opt = SimpleNamespace(global_attention_function=function, global_attention_alpha=1.5, bisect_iter=50)
    if function != "softmax":
        assert install_rnn_attention(model, opt) == 1
    for p in decoder.parameters():  # (upstream leaves some uninitialised for its builder's param_init)
        torch.nn.init.uniform_(p, -0.1, 0.1)
    return decoder.to(device).train()


def _batch(batch: int, steps: int, src: int, device: str, seed: int):
    g = torch.Generator().manual_seed(seed)
    tgt = torch.randint(2, V, (batch, steps, 1), generator=g)
    src_len = torch.randint(1, src + 1, (batch,), generator=g)
    src_len[0] = src
    tgt[1, steps - 1:] = PAD  # a shorter target inside the batch, as batches have
    enc_out = torch.randn(batch, src, H, generator=g) * 2
    enc_out = enc_out.masked_fill(torch.arange(src)[None, :, None] >= src_len[:, None, None], 0)
    h0, c0 = torch.randn(2, 2, batch, H, generator=g)
    to = dict(device=device)
    return (tgt.to(**to), enc_out.to(**to).requires_grad_(), src_len.to(**to), h0.to(**to).requires_grad_(),
            c0.to(**to).requires_grad_())


def _run(decoder, tgt, enc_out, src_len, h0, c0):
    """One training forward and backward through decoder.forward (what NMTModel calls): outputs,
    attention and the gradients of every decoder parameter and input."""
    decoder.state = {"hidden": (h0, c0), "input_feed": torch.zeros(1, tgt.size(0), H, device=tgt.device),
                     "coverage": None}
    outs, attns = decoder(tgt, enc_out, src_len=src_len)
    weights = torch.linspace(-1, 1, outs.numel(), device=outs.device).view_as(outs)
    a_weights = torch.linspace(1, 2, attns["std"].numel(), device=outs.device).view_as(attns["std"])
    loss = (outs * weights).sum() + (attns["std"] * a_weights).sum()
    inputs = [enc_out, h0, c0, *decoder.parameters()]
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    state = {k: v if k != "hidden" else tuple(h.detach() for h in v) for k, v in decoder.state.items()}
    decoder.state = {}  # (what the trainer's detach_state does: no graph of this step stays alive)
    # (clones: a graph's outputs are its static buffers, which its next replay overwrites)
    return outs.detach().clone(), attns["std"].detach().clone(), [g.clone() for g in grads if g is not None], state


def _graphs(decoder):
    """The DecoderGraphs that -rnn_cuda_graphs gives an OpenNMT-py decoder (``install``)."""
    opt = SimpleNamespace(rnn_cuda_graphs=True)
    model = torch.nn.Module()
    model.decoder = decoder
    assert cuda_graphs.install(model, opt)
    return decoder.__dict__.pop(graphs_core.ATTR)


class _EagerSteps:
    """In place of ShapeGraphs: the padded loop run eagerly instead of captured (the CPU can check the
    padding)."""

    def __init__(self, shapes):
        self.seen = []  # (batch, padded T, padded S) of each call
        self.make_module = shapes.make_module

    def get(self, args):
        self.seen.append(tuple(args[0].shape[:2]) + (args[1].size(1),))
        return self.make_module()


@pytest.mark.parametrize("function", ["softmax", "entmax15", "sparsemax"])
def test_a_batch_padded_to_its_graph_shape_gives_the_same_outputs_and_gradients(function, monkeypatch):
    monkeypatch.setattr(graphs_core, "lstm_loop_trains_on_cuda", lambda decoder, enc_out: True)  # on the CPU
    decoder = _decoder(function)
    batch = _batch(3, 6, 5, "cpu", seed=1)
    eager_outs, eager_attn, eager_grads, eager_state = _run(decoder, *batch)

    padded = _graphs(decoder)
    padded.shapes = eager = _EagerSteps(padded.shapes)
    decoder.__dict__[graphs_core.ATTR] = padded
    try:
        outs, attn, grads, state = _run(decoder, *batch)
    finally:
        del decoder.__dict__[graphs_core.ATTR]
    assert eager.seen == [(3, round_up(6, 4), round_up(5, 8))] == [(3, 8, 8)]  # padded, both axes
    assert outs.shape == eager_outs.shape and attn.shape == eager_attn.shape
    assert torch.allclose(outs, eager_outs, atol=1e-6) and torch.allclose(attn, eager_attn, atol=1e-6)
    if function != "softmax":
        assert (attn == 0).any()  # sparse: the zeros stay exact
    assert len(grads) == len(eager_grads)
    for a, b in zip(grads, eager_grads):
        assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(state["input_feed"], eager_state["input_feed"], atol=1e-6)


def _train_opt(*args: str):
    from onmt.bin.train import _get_parser

    return _get_parser().parse_known_args(["-data", "{}", "-src_vocab", "v", "-rnn_cuda_graphs", *args])[0]


@pytest.mark.parametrize("args, named", [
    (("-accum_count", "2"), "accum_count 2"),
    (("-truncated_decoder", "5"), "truncated_decoder 5"),
    (("-input_feed", "0"), "input_feed 0"),
    (("-decoder_type", "transformer"), "decoder_type transformer"),
    (("-coverage_attn",), "coverage_attn"),
    (("-model_dtype", "fp16"), "model_dtype fp16"),
])
def test_what_the_graphs_cannot_replay_is_refused_by_name(args, named):
    from onmt_entmax.errors import EntmaxOptionError

    with pytest.raises(EntmaxOptionError, match=f"rnn_cuda_graphs .* but {named} is set"):
        cuda_graphs.check_train_opts(_train_opt(*args))
    cuda_graphs.check_train_opts(_train_opt())


def test_onmt_train_takes_the_option_and_trains_the_same_on_a_cpu(toy):
    model = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8,
                 generator_function="entmax15", global_attention_function="entmax15")
    plain = yaml_config(toy, model, steps=4, name="plain")
    graphs = yaml_config(toy, model, steps=4, name="graphs", extra="rnn_cuda_graphs: true\n")
    build_vocab(plain)
    train(plain)
    train(graphs)
    a, b = (torch.load(toy / f"run/{name}_step_4.pt") for name in ("plain", "graphs"))
    assert b["opt"].rnn_cuda_graphs is True
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    with pytest.raises(ValueError, match="rnn_cuda_graphs .* accum_count"):
        train(graphs, "-accum_count", "2")


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@cuda
@pytest.mark.parametrize("function", ["softmax", "entmax15", "sparsemax"])
def test_the_captured_graphs_give_the_eager_loops_outputs_and_gradients(function):
    import copy

    decoder = _decoder(function, device="cuda")
    reference = copy.deepcopy(decoder)  # the eager loop runs on a copy: the graphed decoder trains graphed only
    graphs = _graphs(decoder)
    decoder.__dict__[graphs_core.ATTR] = graphs
    # shapes interleaved: each graph replays after the others were captured into the same memory pool
    for seed, shape in enumerate([(4, 6, 5), (3, 9, 11), (4, 7, 6), (5, 13, 17), (3, 9, 11), (4, 6, 5)]):
        batch = _batch(*shape, "cuda", seed=seed)
        graphed = _run(decoder, *batch)
        eager = _run(reference, *batch)
        assert torch.allclose(graphed[0], eager[0], atol=1e-5) and torch.allclose(graphed[1], eager[1], atol=1e-5)
        assert torch.equal(graphed[1] == 0, eager[1] == 0) or function == "softmax"
        for a, b in zip(graphed[2], eager[2]):
            assert torch.allclose(a, b, atol=1e-4, rtol=1e-4)
    # padded: (4, 8, 8) three times, (3, 12, 16) twice, (5, 16, 24)
    assert len(graphs.shapes.graphs) == 3 and graphs.eager_batches == 0


@cuda
def test_dropout_inside_a_graph_draws_new_numbers_at_each_replay():
    decoder = _decoder("entmax15", dropout=0.3, device="cuda")
    decoder.__dict__[graphs_core.ATTR] = _graphs(decoder)
    batch = _batch(4, 6, 5, "cuda", seed=0)
    first, second = _run(decoder, *batch)[0], _run(decoder, *batch)[0]
    assert len(decoder.__dict__[graphs_core.ATTR].shapes.graphs) == 1
    assert not torch.equal(first, second)
    assert 0.2 < (first == 0).float().mean() < 0.4  # the output dropout's zeros, at its rate
