"""The translator scores with the model's own mapping: log p with -inf for zeros."""
import types

import torch
from onmt.translate.translator import Inference
from torch import nn

from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.onmt import generator_log_probs, transformation_of
from onmt_entmax.registry import get_transformation


class _Decoder(nn.Module):
    def __init__(self, out):
        super().__init__()
        self.out = out

    def forward(self, *args, **kwargs):
        return self.out, {}


def _fake_translator(generator, dec_out):
    model = types.SimpleNamespace(decoder=_Decoder(dec_out), generator=generator)
    return types.SimpleNamespace(model=model, copy_attn=False, global_scorer=types.SimpleNamespace(has_cov_pen=False))


def test_decode_and_generate_uses_the_generators_mapping():
    torch.manual_seed(0)
    dec_out = torch.randn(6, 1, 8) * 3
    for name, params in [("sparsemax", {}), ("entmax15", {}), ("entmax_bisect", dict(alpha=1.7))]:
        t = get_transformation(name, **params)
        gen = EntmaxGenerator.from_linear(nn.Linear(8, 20), t)
        log_probs, _ = Inference._decode_and_generate(_fake_translator(gen, dec_out), None, None, None, None)
        expected = torch.log(t.mapping(gen(dec_out.squeeze(1))))
        assert torch.equal(torch.isneginf(log_probs), torch.isneginf(expected))
        assert torch.isneginf(log_probs).any()
        assert torch.allclose(log_probs.exp().sum(-1), torch.ones(6), atol=1e-5)


def test_stock_generator_still_gets_log_softmax():
    gen = nn.Linear(8, 20)
    dec_out = torch.randn(4, 1, 8)
    log_probs, _ = Inference._decode_and_generate(_fake_translator(gen, dec_out), None, None, None, None)
    assert torch.allclose(log_probs, torch.log_softmax(gen(dec_out.squeeze(1)), -1))
    assert transformation_of(gen) is None


def test_alpha_relu_decodes_with_log_of_its_unnormalized_scores():
    t = get_transformation("alpha_relu", alpha=1.5, tau=0.2)
    gen = EntmaxGenerator.from_linear(nn.Linear(8, 20), t)
    z = torch.randn(3, 20) * 2
    assert torch.allclose(generator_log_probs(gen, z).exp(), t.mapping(z))


def test_hypothesis_text_reads_the_target_vocabulary_once_per_translator():
    """pyonmttok's ids_to_tokens builds a list of the whole vocabulary at every access: once per
    sentence was a third of a sparse model's decoding time (10k-word vocabulary, H100 host)."""
    from types import SimpleNamespace

    from onmt_entmax.onmt.decoding.translator import _text

    class Vocab:
        reads = 0

        @property
        def ids_to_tokens(self):
            Vocab.reads += 1
            return ["<unk>", "<blank>", "<s>", "</s>", "a", "b"]

    translator = SimpleNamespace(_tgt_vocab=Vocab(), _tgt_eos_idx=3)
    assert [_text(translator, [4, 5, 3]) for _ in range(5)] == ["a b"] * 5
    assert Vocab.reads == 1


def test_translator_build_warms_the_kernels_of_a_sparse_model_only(monkeypatch):
    """Triton's once-a-process set-up (~0.5 s) runs when a sparse model is loaded, on the model's
    device, not in the first beam step; a softmax model (stock or ours) never starts Triton."""
    from onmt_entmax import ops
    from onmt_entmax.onmt.decoding import translator as translator_hooks

    devices = []
    monkeypatch.setattr(ops, "warm_up_kernels", lambda device: devices.append(device) or True)
    entmax = EntmaxGenerator.from_linear(nn.Linear(8, 20), get_transformation("entmax15"))
    sparse = nn.Sequential(nn.Linear(8, 8), entmax)
    assert translator_hooks.warm_up_kernels_of(sparse)
    assert devices == [torch.device("cpu")]
    assert not translator_hooks.warm_up_kernels_of(nn.Sequential(nn.Linear(8, 20)))
    softmax = EntmaxGenerator.from_linear(nn.Linear(8, 20), get_transformation("softmax"))
    assert not translator_hooks.warm_up_kernels_of(nn.Sequential(nn.Linear(8, 8), softmax))
    assert devices == [torch.device("cpu")]


def test_a_first_run_on_a_gpu_says_that_the_kernels_compile(monkeypatch, caplog):
    """Once a process and only where Triton has not compiled them for this GPU: the first batches
    of that run are slower, and the log says why (mocked: no CUDA here)."""
    import logging

    from onmt_entmax import ops
    from onmt_entmax.onmt.decoding import translator as translator_hooks

    monkeypatch.setattr(ops, "warm_up_kernels", lambda device: True)
    sparse = nn.Sequential(nn.Linear(8, 8), EntmaxGenerator.from_linear(nn.Linear(8, 20),
                                                                        get_transformation("entmax15")))
    for cache in ("/cold/triton/cache", None):
        monkeypatch.setattr(ops, "cold_kernel_cache", lambda device: cache)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="onmt"):
            assert translator_hooks.warm_up_kernels_of(sparse)
        said = [r.getMessage() for r in caplog.records if "compiling the sparse kernels" in r.getMessage()]
        assert said == ([f"compiling the sparse kernels for this GPU as decoding first meets them (once: Triton "
                         f"caches them in {cache}); the first batches take longer"] if cache else [])


def test_kernel_warm_up_runs_only_where_kernels_would():
    from onmt_entmax import ops

    assert not ops.warm_up_kernels(torch.device("cpu"))
    if torch.cuda.is_available():
        from onmt_entmax.ops.triton import HAVE_TRITON

        assert ops.warm_up_kernels("cuda") == HAVE_TRITON


def test_translator_from_opt_warms_the_kernels_once_the_model_is_built(monkeypatch):
    """The wiring: the patched Translator.from_opt warms the kernels of the model it was given,
    after upstream built the translator."""
    from onmt.bin.translate import _get_parser
    from onmt.translate.translator import Translator

    from onmt_entmax import ops

    order = []
    monkeypatch.setattr(ops, "warm_up_kernels", lambda device: order.append("warm-up") or True)

    def upstream(cls, model, vocabs, opt, model_opt, *args, **kwargs):
        order.append("built")
        return types.SimpleNamespace()

    from onmt_entmax.onmt.decoding import translator as translator_hooks

    from_opt = translator_hooks._from_opt(upstream)  # (the patch row hands it the classmethod's function)
    model = nn.Module()
    model.generator = EntmaxGenerator.from_linear(nn.Linear(8, 20), get_transformation("entmax15"))
    opt = _get_parser().parse_args(["-model", "m.pt", "-src", "s.txt"])
    from_opt(Translator, model, None, opt, None)
    assert order == ["built", "warm-up"]
