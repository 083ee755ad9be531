"""Sparse attention through OpenNMT-py's SDPA branch (onmt_entmax/onmt/model/fused_attention.py)."""
import pytest
import torch
from torch.nn import functional as F

from onmt_entmax.modules import AttentionNormalizer
from onmt_entmax.onmt.model import fused_attention
from onmt_entmax.ops.attention import SHORT_ROW_KEYS
from onmt_entmax.registry import get_transformation


def _attention(name="entmax15", learn=False, heads=4, dim=32):
    from onmt.modules.multi_headed_attn import MultiHeadedAttention

    module = MultiHeadedAttention(heads, dim, dropout=0.1, attn_type="context")
    module.softmax = AttentionNormalizer(get_transformation(name), heads=heads, learn_alpha=learn)
    module.self_attn_type = "scaled-dot"
    return module


def test_sparse_modules_are_fused_where_upstream_takes_its_sdpa_branch():
    module = _attention()
    assert fused_attention.fusable(module) is module.softmax  # training, with grad: one autograd node
    with torch.no_grad():
        assert fused_attention.fusable(module.eval()) is module.softmax
    module.max_relative_positions = 20  # upstream's SDPA branch does not handle them
    assert fused_attention.fusable(module) is None
    module.max_relative_positions = 0
    module.flash2 = True  # upstream would call flash-attn's softmax kernels
    assert fused_attention.fusable(module) is None
    stock = _attention()
    stock.softmax = torch.nn.Softmax(dim=-1)
    assert fused_attention.fusable(stock) is None


def test_eager_branch_block_sends_sparse_modules_down_upstreams_eager_branch_and_only_inside():
    module = _attention().eval()
    seen = []
    forward = fused_attention.wrap_forward(
        lambda self: seen.append((self.self_attn_type, fused_attention._SPARSE_CALL.get())) or (None, None))
    forward(module)
    with fused_attention.eager_branch():
        forward(module)
    forward(module)
    assert [kind for kind, _ in seen] == ["scaled-dot-flash", "scaled-dot", "scaled-dot-flash"]
    assert seen[0][1].norm is module.softmax and seen[1][1] is None


def test_sdpa_name_is_stock_outside_and_the_sparse_normalizer_inside_a_sparse_module():
    import onmt.modules.multi_headed_attn as mha

    sdpa = mha.scaled_dot_product_attention
    assert sdpa is not F.scaled_dot_product_attention and sdpa.__wrapped__ is F.scaled_dot_product_attention
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]]).view(2, 1, 1, 5)
    torch.testing.assert_close(sdpa(q, k, v, keep, 0.0, is_causal=False), F.scaled_dot_product_attention(q, k, v, keep))
    module = _attention().eval()
    call = fused_attention._Call(module, module.softmax)
    token = fused_attention._SPARSE_CALL.set(call)
    try:
        with torch.no_grad():
            out = sdpa(q, k, v, keep, 0.1, is_causal=False)  # (upstream passes its dropout in eval mode too)
            causal = sdpa(q, k, v, None, 0.0, is_causal=True)
        assert call.weights is None  # no gradient: nothing kept for the reports
        train_out = sdpa(q.requires_grad_(), k, v, keep, 0.0, is_causal=False)
    finally:
        fused_attention._SPARSE_CALL.reset(token)
    torch.testing.assert_close(out, module.softmax.attend(q, k, v, keep))
    torch.testing.assert_close(train_out, out)
    torch.testing.assert_close(call.weights,
                               module.softmax(torch.where(keep, q @ k.transpose(-1, -2) / 8 ** 0.5, -1e18)))
    assert out[1, ..., :].shape == (4, 3, 8)
    future = torch.ones(3, 5, dtype=torch.bool).tril(2)  # query t sees keys <= t + (Tk - Tq)
    torch.testing.assert_close(causal, module.softmax.attend(q, k, v, future))


@pytest.mark.parametrize("keys,wanted", [(SHORT_ROW_KEYS, True), (SHORT_ROW_KEYS + 1, False)])
def test_training_asks_for_the_weights_of_short_rows_only(keys, wanted, monkeypatch):
    """With a gradient, a call over more than SHORT_ROW_KEYS keys asks the normalizer for no weights (a Tq x Tk
    matrix, which would send it to the materialized path, O(T^2) memory, instead of the tiled kernels); the
    module then returns none, as upstream's SDPA branch does."""
    import onmt.modules.multi_headed_attn as mha

    module = _attention()
    asked = []
    attend = module.softmax.attend
    monkeypatch.setattr(module.softmax, "attend",
                        lambda *a, **kw: asked.append(kw.get("return_weights", False)) or attend(*a, **kw))
    call = fused_attention._Call(module, module.softmax)
    token = fused_attention._SPARSE_CALL.set(call)
    try:
        q = torch.randn(1, 4, 3, 8, requires_grad=True)
        k, v = torch.randn(1, 4, keys, 8), torch.randn(1, 4, keys, 8)
        out = mha.scaled_dot_product_attention(q, k, v, None, 0.0, is_causal=False)
    finally:
        fused_attention._SPARSE_CALL.reset(token)
    assert asked == [wanted] and (call.weights is not None) == wanted
    torch.testing.assert_close(out, attend(q, k, v))
    out.sum().backward()
    assert q.grad is not None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (upstream's SDPA branch is GPU-only)")
@pytest.mark.parametrize("name,learn", [("entmax15", False), ("sparsemax", False), ("entmax_bisect", True)])
def test_fused_decoding_attention_equals_the_eager_branch(name, learn, monkeypatch):
    """Eval without grad: the one-launch decoding kernel."""
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
        with fused_attention.eager_branch():
            eager, attn = module(key, key, query, mask=pad, return_attn=True)
    assert calls == [1] and module.self_attn_type == "scaled-dot"
    assert (attn[2, :, :, 7:] == 0).all() and (attn == 0).any()
    torch.testing.assert_close(fused, eager, atol=1e-5, rtol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (upstream's SDPA branch is GPU-only)")
@pytest.mark.parametrize("name,learn", [("entmax15", False), ("sparsemax", False), ("entmax_bisect", True)])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_training_attention_equals_the_eager_branch(name, learn, causal, monkeypatch):
    """Training without dropout: output, returned weights and every parameter gradient as upstream's
    eager branch computes them with the same normalizer."""
    module = _attention(name, learn).cuda()
    if causal:
        module.attn_type, module.is_decoder = "self", True
    module.update_dropout(0.0)
    torch.manual_seed(0)
    with torch.no_grad():
        for param in module.parameters():
            param.normal_(0, 0.3)
    key = torch.randn(6, 11, 32, device="cuda")
    query = key if causal else torch.randn(6, 9, 32, device="cuda")
    mask = torch.zeros(6, 1, 1, 11, dtype=torch.bool, device="cuda")
    mask[2, ..., 7:] = True
    if causal:
        mask = mask | torch.ones(11, 11, dtype=torch.bool, device="cuda").triu(1)
    grad = torch.randn(6, query.shape[1], 32, device="cuda")

    def run():
        module.zero_grad()
        out, attn = module(key, key, query, mask=mask)
        out.backward(grad)
        return out.detach(), attn, {n: p.grad.clone() for n, p in module.named_parameters()}

    calls = []
    attend = module.softmax.attend
    monkeypatch.setattr(module.softmax, "attend", lambda *a, **kw: calls.append(1) or attend(*a, **kw))
    fused, fused_attn, fused_grads = run()
    with fused_attention.eager_branch():
        eager, eager_attn, eager_grads = run()
    assert calls == [1] and module.self_attn_type == "scaled-dot"
    torch.testing.assert_close(fused, eager, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fused_attn, eager_attn.float(), atol=1e-6, rtol=1e-5)
    assert fused_grads.keys() == eager_grads.keys() and (not learn or "softmax.alpha.a" in fused_grads)
    for n in eager_grads:
        torch.testing.assert_close(fused_grads[n], eager_grads[n], atol=1e-4, rtol=1e-3, msg=n)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (upstream's SDPA branch is GPU-only)")
def test_fused_training_attention_drops_out_in_training_mode_only():
    module = _attention().cuda()  # attention dropout 0.1
    with torch.no_grad():
        for param in module.parameters():  # upstream builds its linears with skip_init
            param.normal_(0, 0.3)
    key = torch.randn(4, 30, 32, device="cuda")
    query = torch.randn(4, 20, 32, device="cuda")
    with torch.no_grad():
        evaluated = module.eval()(key, key, query)[0]
    module.train()
    trained = [module(key, key, query)[0] for _ in range(2)]
    assert torch.isfinite(trained[0]).all() and not torch.equal(trained[0], trained[1])  # a new draw each call
    with torch.enable_grad():
        torch.testing.assert_close(module.eval()(key, key, query)[0].detach(), evaluated, atol=1e-5, rtol=1e-4)
