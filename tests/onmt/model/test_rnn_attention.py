"""OpenNMT-py's RNN global attention with our normalizers (onmt_entmax/onmt/model/rnn_attention.py),
checked against the attention written out from Luong et al. with the pypi ``entmax`` package's mappings:
the weights, the attentional hidden state and their gradients."""
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from onmt_entmax.onmt.model.surgery import install_rnn_attention

entmax = pytest.importorskip("entmax")

REFERENCE = {"sparsemax": entmax.sparsemax, "entmax15": entmax.entmax15,
             "entmax_bisect": lambda z, dim: entmax.entmax_bisect(z, 1.3, dim=dim, n_iter=100)}


def _rnn_attention(function: str, dim: int = 8):
    from onmt.modules.global_attention import GlobalAttention

    torch.manual_seed(0)
    model = nn.Module()
    model.decoder = nn.Module()
    model.decoder.attn = GlobalAttention(dim, attn_type="general").double()
    opt = SimpleNamespace(global_attention_function=function, global_attention_alpha=1.3, bisect_iter=100)
    assert install_rnn_attention(model, opt) == 1
    return model.decoder.attn


def _luong_general(attn, query, enc_out, src_len, normalize):
    """a_t = normalize(h_t^T W_a h_s) over the unpadded source, h~_t = tanh(W_c [c_t; h_t])."""
    scores = torch.einsum("btd,bsd->bts", attn.linear_in(query), enc_out)
    pad = torch.arange(enc_out.size(1))[None, None, :] >= src_len[:, None, None]
    weights = normalize(scores.masked_fill(pad, float("-inf")), dim=-1)
    context = torch.bmm(weights, enc_out)
    return torch.tanh(attn.linear_out(torch.cat([context, query], -1))), weights


@pytest.mark.parametrize("function", sorted(REFERENCE))
def test_global_attention_is_luongs_with_the_mapping_of_the_entmax_package(function):
    attn = _rnn_attention(function)
    torch.manual_seed(1)
    query = (torch.randn(3, 4, 8, dtype=torch.float64) * 2).requires_grad_()
    enc_out = (torch.randn(3, 6, 8, dtype=torch.float64) * 2).requires_grad_()
    src_len = torch.tensor([6, 4, 2])

    out, weights = attn(query, enc_out, src_len=src_len)
    ref_out, ref_weights = _luong_general(attn, query, enc_out, src_len, REFERENCE[function])

    assert torch.allclose(weights, ref_weights, atol=1e-10)
    assert torch.allclose(out, ref_out, atol=1e-10)
    assert (weights[1, :, 4:] == 0).all() and (weights[2, :, 2:] == 0).all()  # padding: exactly 0
    assert (weights[0] == 0).any()  # sparse inside the source too, not only on the padding
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, [query, enc_out, attn.linear_in.weight], grad)
    ref = torch.autograd.grad(ref_out, [query, enc_out, attn.linear_in.weight], grad)
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-8)


def test_one_decoding_step_takes_the_same_normalizer():
    attn = _rnn_attention("entmax15")
    torch.manual_seed(2)
    query = torch.randn(2, 8, dtype=torch.float64) * 2  # (batch, dim): the decoder's one-step call
    enc_out, src_len = torch.randn(2, 5, 8, dtype=torch.float64) * 2, torch.tensor([5, 3])
    _, weights = attn(query, enc_out, src_len=src_len)
    _, ref = _luong_general(attn, query[:, None], enc_out, src_len, entmax.entmax15)
    assert torch.allclose(weights, ref[:, 0], atol=1e-10)
