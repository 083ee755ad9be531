"""CUDA only (skipped without a GPU): on a GPU Eole's attention takes its SDPA branch (``_sdpa``,
softmax) unless attention weights are asked for; a sparse module's normalizer must answer that branch
too, in training (gradients, learned alphas) and without gradients (decoding)."""
import pytest
import torch
from eole.modules import multi_headed_attn

from eole_testkit import TRANSFORMER, build, normalizers

from onmt_entmax.modules import AttentionNormalizer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture
def fused_calls(monkeypatch):
    """Kinds (enc / dec / context) whose normalizer ran through ``attend``, the SDPA branch's call."""
    seen = []
    upstream = AttentionNormalizer.attend

    def attend(self, q, k, v, keep=None, dropout_p=0.0, return_weights=False, scale=None):
        seen.append((getattr(self, "kind", "?"), q.device.type))
        return upstream(self, q, k, v, keep, dropout_p, return_weights, scale)

    monkeypatch.setattr(AttentionNormalizer, "attend", attend)
    return seen


@pytest.mark.parametrize("learn", [False, True])
def test_training_forward_on_cuda_runs_every_sparse_normalizer_in_the_sdpa_branch(fused_calls, learn):
    net, _, _ = build({**TRANSFORMER, "generator_function": "entmax15", "attention_function": "entmax_bisect",
                       "learn_alpha": learn}, attention_dropout=[0.0])
    net = net.cuda().train()
    src = torch.randint(4, 12, (3, 7), device="cuda")
    tgt = torch.randint(4, 12, (3, 5), device="cuda")
    dec_out, _, _ = net(src, tgt, torch.tensor([7, 5, 6], device="cuda"))
    dec_out.sum().backward()
    assert {kind for kind, device in fused_calls if device == "cuda"} == {"enc", "dec", "context"}
    if learn:
        assert all(m.alpha.a.grad is not None for m in normalizers(net).values())


def test_the_sdpa_branch_equals_the_eager_branch_on_cuda():
    net, _, _ = build({**TRANSFORMER, "attention_function": "entmax15"}, attention_dropout=[0.0])
    mha = net.cuda().eval().encoder.transformer_layers[0].self_attn
    x = torch.randn(2, 6, 16, device="cuda") * 3
    keep = torch.ones(2, 1, 6, 6, dtype=torch.bool, device="cuda")
    keep[1, :, :, 4:] = False
    with torch.no_grad():
        key, value, query = mha._prepare_inputs(x, x, x)
        fused, none = mha._compute_attention(key, value, query, attn_mask=keep)  # SDPA branch: no weights
        eager, weights = mha._compute_attention(key, value, query, attn_mask=keep, return_attn=True)
    assert none is None and torch.allclose(fused, eager, atol=1e-4)
    assert (weights == 0).any() and multi_headed_attn._sdpa is not None
