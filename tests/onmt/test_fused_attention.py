"""Decoding-time sparse attention through OpenNMT-py's SDPA branch (onmt_entmax/onmt/fused_attention.py)."""
import pytest
import torch
from torch.nn import functional as F

from onmt_entmax.modules import AttentionNormalizer
from onmt_entmax.onmt import fused_attention
from onmt_entmax.registry import get_transformation


def _attention(name="entmax15", learn=False, heads=4, dim=32):
    from onmt.modules.multi_headed_attn import MultiHeadedAttention

    module = MultiHeadedAttention(heads, dim, dropout=0.1, attn_type="context")
    module.softmax = AttentionNormalizer(get_transformation(name), heads=heads, learn_alpha=learn)
    module.self_attn_type = "scaled-dot"
    return module


def test_only_eval_calls_without_grad_are_fused():
    module = _attention()
    assert not fused_attention.fusable(module)  # training mode, grad enabled
    module.eval()
    assert not fused_attention.fusable(module)  # grad enabled (e.g. forced decoding with grad)
    with torch.no_grad():
        assert fused_attention.fusable(module)
        module.train()
        assert not fused_attention.fusable(module)  # attention dropout would be skipped
        module.eval()
        module.max_relative_positions = 20  # upstream's SDPA branch does not handle them
        assert not fused_attention.fusable(module)


def test_sdpa_name_is_stock_outside_and_the_sparse_normalizer_inside_a_sparse_module():
    import onmt.modules.multi_headed_attn as mha

    sdpa = mha.scaled_dot_product_attention
    assert sdpa is not F.scaled_dot_product_attention and sdpa.__wrapped__ is F.scaled_dot_product_attention
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]]).view(2, 1, 1, 5)
    torch.testing.assert_close(sdpa(q, k, v, keep, 0.0, is_causal=False), F.scaled_dot_product_attention(q, k, v, keep))
    module = _attention().eval()
    token = fused_attention._SPARSE_MODULE.set(module)
    try:
        with torch.no_grad():
            out = sdpa(q, k, v, keep, 0.0, is_causal=False)
            causal = sdpa(q, k, v, None, 0.0, is_causal=True)
    finally:
        fused_attention._SPARSE_MODULE.reset(token)
    torch.testing.assert_close(out, module.softmax.attend(q, k, v, keep))
    assert out[1, ..., :].shape == (4, 3, 8)
    future = torch.ones(3, 5, dtype=torch.bool).tril(2)  # query t sees keys <= t + (Tk - Tq)
    torch.testing.assert_close(causal, module.softmax.attend(q, k, v, future))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (upstream's SDPA branch is GPU-only)")
@pytest.mark.parametrize("name,learn", [("entmax15", False), ("sparsemax", False), ("entmax_bisect", True)])
def test_fused_decoding_attention_equals_the_eager_branch(name, learn, monkeypatch):
    module = _attention(name, learn).cuda().eval()
    torch.manual_seed(0)
    with torch.no_grad():
        for param in module.parameters():  # upstream builds its linears with skip_init
            param.normal_(0, 0.3)
    key = torch.randn(6, 11, 32, device="cuda")
    query = torch.randn(6, 1, 32, device="cuda")
    pad = torch.zeros(6, 1, 1, 11, dtype=torch.bool, device="cuda")
    pad[2, ..., 7:] = True
    calls = []
    attend = module.softmax.attend
    monkeypatch.setattr(module.softmax, "attend", lambda *a: calls.append(1) or attend(*a))
    with torch.no_grad():
        fused, _ = module(key, key, query, mask=pad)
        monkeypatch.setattr(fused_attention, "fusable", lambda m: False)
        eager, attn = module(key, key, query, mask=pad, return_attn=True)
    assert calls == [1] and module.self_attn_type == "scaled-dot"
    assert (attn[2, :, :, 7:] == 0).all() and (attn == 0).any()
    torch.testing.assert_close(fused, eager, atol=1e-5, rtol=1e-4)
