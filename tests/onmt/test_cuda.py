"""CUDA only (skipped without a GPU): sparse attention is really used on GPU, and AMP training works.

OpenNMT-py's decoder calls ``scaled_dot_product_attention`` (softmax) on CUDA and never its
``self.softmax``; the plugin routes that call to the sparse normalizer's fused attention, in training
(one autograd node) and in decoding (one kernel).
"""
import pytest
import torch

from onmt_testkit import build_vocab, train, translate, yaml_config

from onmt_entmax.modules import AttentionNormalizer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

MODEL = dict(encoder_type="transformer", decoder_type="transformer", position_encoding=True, layers=2,
             hidden_size=64, word_vec_size=64, transformer_ff=128, heads=4, generator_function="entmax15",
             attention_function="entmax15")


@pytest.fixture
def calls(monkeypatch):
    """Every sparse attention call by kind (enc / dec / context): (device, weights or None)."""
    seen = {"enc": [], "dec": [], "context": []}
    upstream = AttentionNormalizer.forward

    def forward(self, scores):  # the eager branch
        out = upstream(self, scores)
        seen[getattr(self, "kind", "enc")].append((scores.device.type, out.detach()))
        return out

    def attend(self, q, k, v, keep=None, dropout_p=0.0, return_weights=False):
        # the fused path: training gets the weights back, decoding never materialises them
        out = upstream_attend(self, q, k, v, keep, dropout_p, return_weights)
        weights = out[1] if return_weights else None
        seen[getattr(self, "kind", "enc")].append((q.device.type + "-fused", weights))
        return out

    upstream_attend = AttentionNormalizer.attend
    monkeypatch.setattr(AttentionNormalizer, "forward", forward)
    monkeypatch.setattr(AttentionNormalizer, "attend", attend)
    return seen


def test_cuda_transformer_attention_rows_contain_exact_zeros(toy, calls):
    config = yaml_config(toy, MODEL, steps=30)
    build_vocab(config)
    train(config, "-gpu_ranks", "0", "-world_size", "1")
    for kind in ("enc", "dec", "context"):  # training: one fused call (one autograd node) a module
        assert all(dev == "cuda-fused" for dev, _ in calls[kind]), f"{kind} attention took the eager branch"
        on_gpu = [out for _, out in calls[kind] if out is not None]  # (validation: no weights)
        assert on_gpu, f"{kind} attention never ran our normalizer on CUDA during training"
        assert any((out == 0).any() for out in on_gpu), f"no exact zero in {kind} attention"
        assert all(torch.isfinite(out).all() for out in on_gpu)
    for kind in calls:
        calls[kind].clear()
    out = translate(toy / "run/model_step_30.pt", toy / "src-test.txt", toy / "pred.txt", "-gpu", "0",
                    "-beam_size", "3")
    assert len(out) == 20
    # decoding runs each sparse attention as one fused call (onmt_entmax/onmt/model/fused_attention.py)
    assert all(dev == "cuda-fused" for k in ("enc", "dec", "context") for dev, _ in calls[k])
    assert calls["enc"] and calls["dec"] and calls["context"]
    half = translate(toy / "run/model_step_30.pt", toy / "src-test.txt", toy / "pred16.txt", "-gpu", "0",
                     "-beam_size", "3", "-precision", "fp16")
    assert len(half) == 20


@pytest.mark.parametrize("gen", ["entmax15", "entmax_bisect", "alpha_relu"])
def test_fp16_amp_training(toy, gen):
    extra = dict(generator_tau="auto") if gen == "alpha_relu" else {}
    config = yaml_config(toy, dict(MODEL, generator_function=gen, attention_function="entmax_bisect",
                                   learn_alpha=True, model_dtype="fp16", **extra), steps=20)
    build_vocab(config)
    train(config, "-gpu_ranks", "0", "-world_size", "1")
    ckpt = torch.load(toy / "run/model_step_20.pt")
    assert all(torch.isfinite(v.float()).all() for v in ckpt["model"].values())
    assert all(torch.isfinite(v.float()).all() for v in ckpt["generator"].values())


def test_fp32_learn_alpha_training_stays_finite(toy):
    """Without AMP nothing skips a step with NaN gradients: every learned alpha must stay a number.

    On 2026-11-26 this failed on an H200 with the Triton kernels (device assert "alpha must be >= 1
    everywhere" within 20 steps, i.e. a NaN alpha) and passed with ONMT_ENTMAX_NO_TRITON=1.
    """
    config = yaml_config(toy, dict(MODEL, attention_function="entmax_bisect", learn_alpha=True), steps=60)
    build_vocab(config)
    train(config, "-gpu_ranks", "0", "-world_size", "1")
    ckpt = torch.load(toy / "run/model_step_60.pt")
    alphas = [v for k, v in ckpt["model"].items() if k.endswith("alpha.a")]
    assert alphas and all(torch.isfinite(a).all() for a in alphas)
    assert all(torch.isfinite(v.float()).all() for v in ckpt["model"].values())
