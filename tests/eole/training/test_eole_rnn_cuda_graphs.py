"""training.rnn_cuda_graphs in Eole (onmt_entmax/eole/training/cuda_graphs.py): a batch padded to its graph's shape
gives the eager loop's outputs, attention and gradients (checked on the CPU with the padded loop run
eagerly, and on a GPU with the captured graphs); what the graphs cannot replay is refused by name."""
import copy
from types import SimpleNamespace

import pytest
import torch
import yaml
from eole.config.run import TrainConfig

from eole_testkit import RNN, build, sample_vocabs, small_config

from onmt_entmax.eole.training import cuda_graphs
from onmt_entmax.errors import ConfigError
from onmt_entmax.training import cuda_graphs as graphs_core


def _decoder(function: str, device: str = "cpu"):
    net, _, _ = build({**RNN, "layers": 2, "global_attention_function": function}, dropout=[0.0])
    return net.decoder.to(device).train()


def _batch(decoder, batch: int, steps: int, src: int, device: str, seed: int):
    g = torch.Generator().manual_seed(seed)
    hidden = decoder.hidden_size
    emb = torch.randn(batch, steps, decoder.rnn.layers[0].input_size - hidden, generator=g)
    src_len = torch.randint(1, src + 1, (batch,), generator=g)
    src_len[0] = src
    mask = (torch.arange(src)[None, :] >= src_len[:, None]).unsqueeze(1)  # [B, 1, S], True: padding
    enc_out = (torch.randn(batch, src, hidden, generator=g) * 2).masked_fill(mask.transpose(1, 2), 0)
    h0, c0 = torch.randn(2, decoder.num_layers, batch, hidden, generator=g)
    return tuple(t.to(device) for t in (emb, enc_out, mask, h0, c0))


def _run(decoder, emb, enc_out, mask, h0, c0):
    """One training forward and backward through decoder.forward (as the model calls it)."""
    emb, enc_out, h0, c0 = (t.clone().requires_grad_() for t in (emb, enc_out, h0, c0))
    decoder.state = {"hidden": (h0, c0), "input_feed": torch.zeros(1, emb.size(0), decoder.hidden_size,
                                                                    device=emb.device), "coverage": None}
    outs, attns = decoder(emb, enc_out=enc_out, src_pad_mask=mask)
    weights = torch.linspace(-1, 1, outs.numel(), device=outs.device).view_as(outs)
    a_weights = torch.linspace(1, 2, attns["std"].numel(), device=outs.device).view_as(attns["std"])
    loss = (outs * weights).sum() + (attns["std"] * a_weights).sum()
    grads = torch.autograd.grad(loss, [emb, enc_out, h0, c0, *decoder.parameters()], allow_unused=True)
    decoder.state = {}
    return outs.detach().clone(), attns["std"].detach().clone(), [g.clone() for g in grads if g is not None]


def _graphs(decoder):
    model = torch.nn.Module()
    model.decoder = decoder
    assert cuda_graphs.install(model, SimpleNamespace(training=SimpleNamespace(rnn_cuda_graphs=True)))
    return decoder.__dict__.pop(graphs_core.ATTR)


@pytest.mark.parametrize("function", ["softmax", "entmax15"])
def test_a_batch_padded_to_its_graph_shape_gives_the_same_outputs_and_gradients(function, monkeypatch):
    monkeypatch.setattr(graphs_core, "lstm_loop_trains_on_cuda", lambda decoder, enc_out: True)  # on the CPU
    decoder = _decoder(function)
    batch = _batch(decoder, 3, 6, 5, "cpu", seed=1)
    eager = _run(decoder, *batch)
    padded = _graphs(decoder)
    seen, make = [], padded.shapes.make_module
    padded.shapes = SimpleNamespace(get=lambda args: seen.append((args[0].size(1), args[1].size(1), args[2].size(-1)))
                                    or make())  # the padded loop, run eagerly
    decoder.__dict__[graphs_core.ATTR] = padded
    outs, attn, grads = _run(decoder, *batch)
    assert seen == [(8, 8, 8)]  # 6 steps, 5 positions and the mask padded
    assert outs.shape == eager[0].shape and attn.shape == eager[1].shape == (3, 6, 5)
    assert torch.allclose(outs, eager[0], atol=1e-6) and torch.allclose(attn, eager[1], atol=1e-6)
    assert len(grads) == len(eager[2]) and all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, eager[2]))


@pytest.mark.parametrize("training, named", [
    ({"accum_count": [2]}, "training.accum_count 2"),
    ({"compute_dtype": "fp16"}, "training.compute_dtype torch.float16"),
])
def test_what_the_graphs_cannot_replay_is_refused_by_name(tmp_path, training, named):
    sample_vocabs(tmp_path)
    path = small_config("rnn-entmax15", tmp_path, steps=2, rnn_cuda_graphs=True, **training)
    with pytest.raises(ConfigError, match=f"rnn_cuda_graphs .* but {named} is set"):
        cuda_graphs.check(TrainConfig(**yaml.safe_load(path.read_text())))
    cuda_graphs.check(TrainConfig(**yaml.safe_load(small_config("rnn-entmax15", tmp_path, steps=2,
                                                                 rnn_cuda_graphs=True).read_text())))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("function", ["softmax", "entmax15"])
def test_the_captured_graphs_give_the_eager_loops_outputs_and_gradients(function):
    decoder = _decoder(function, device="cuda")
    reference = copy.deepcopy(decoder)
    graphs = _graphs(decoder)
    decoder.__dict__[graphs_core.ATTR] = graphs
    for seed, shape in enumerate([(4, 6, 5), (3, 9, 11), (4, 7, 6)]):  # A, B, A: replays after another capture
        batch = _batch(decoder, *shape, "cuda", seed=seed)
        graphed, eager = _run(decoder, *batch), _run(reference, *batch)
        assert torch.allclose(graphed[0], eager[0], atol=1e-5) and torch.allclose(graphed[1], eager[1], atol=1e-5)
        assert all(torch.allclose(a, b, atol=1e-4, rtol=1e-4) for a, b in zip(graphed[2], eager[2]))
    assert len(graphs.shapes.graphs) == 2 and graphs.eager_batches == 0
