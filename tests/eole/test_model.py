"""Models that Eole builds from our options: the output layer, every attention on every path Eole takes,
learnable alphas, and the Fenchel-Young criterion (tiny models, built by Eole's own builder)."""
import pytest
import torch
from eole.config.training import TrainingConfig
from eole.modules import multi_headed_attn
from eole.modules.global_attention import GlobalAttention
from eole.utils.loss import LossCompute

from eole_testkit import RNN, TRANSFORMER, build, normalizers

from onmt_entmax import ops
from onmt_entmax.eole.model import attention
from onmt_entmax.eole.validation import flat_options
from onmt_entmax.modules import EntmaxGenerator, TransformationLoss
from onmt_entmax.modules.models import learned_alphas
from onmt_entmax.options.model import inapplicable_options


def test_every_transformer_attention_gets_its_kinds_normalizer_and_the_output_layer_its_mapping():
    net, _, _ = build({**TRANSFORMER, "generator_function": "sparsemax", "attention_function": "entmax15",
                       "context_attention_function": "entmax_bisect", "context_attention_alpha": 1.3})
    found = normalizers(net)
    assert {k: m.transformation.describe() for k, m in found.items()} == {
        "enc": "entmax15", "dec": "entmax15", "context": "entmax_bisect(alpha=1.3)"}
    assert isinstance(net.generator, EntmaxGenerator) and net.generator.transformation.name == "sparsemax"
    assert net.decoder.self_attn_backend == "pytorch"  # flash-attn's KV cache (softmax only) is off


def test_softmax_attention_stays_upstream_and_keeps_its_backend():
    net, _, _ = build({**TRANSFORMER, "generator_function": "entmax15"})
    assert normalizers(net) == {}
    assert net.decoder.self_attn_backend == TrainingConfig(param_init_method="uniform").self_attn_backend


def _attention_inputs(mha, b=3, t=5):
    torch.manual_seed(1)
    x = torch.randn(b, t, 16) * 3
    keep = torch.ones(b, 1, t, t, dtype=torch.bool)
    keep[0, :, :, 3:] = False  # a padded source
    return x, keep


def test_eager_branch_normalizes_with_the_modules_mapping_exact_zeros_included():
    net, _, _ = build({**TRANSFORMER, "attention_function": "sparsemax"})
    mha = net.encoder.transformer_layers[0].self_attn
    x, keep = _attention_inputs(mha)
    key, value, query = mha._prepare_inputs(x, x, x)
    _, weights = mha._compute_attention(key, value, query, attn_mask=keep, return_attn=True)
    scores = torch.matmul(query.transpose(1, 2), key.transpose(1, 2).transpose(2, 3)) * mha.dim_per_head ** -0.5
    expected = ops.sparsemax(scores.float().masked_fill(~keep, torch.finfo(torch.float32).min), dim=-1)
    assert torch.allclose(weights, expected, atol=1e-6)
    assert (weights == 0).any() and (weights[0, :, :, 3:] == 0).all()  # masked keys: exactly 0
    assert torch.allclose(weights.sum(-1), torch.ones(()))


@pytest.mark.parametrize("learn", [False, True])
def test_sdpa_branch_computes_what_the_eager_branch_computes(learn):
    """The branch Eole takes on CUDA (``_sdpa``) runs the module's normalizer in one call: same output
    as the eager branch (CPU here; tests/eole/test_eole_cuda.py takes the real branch on a GPU)."""
    model = {**TRANSFORMER, "attention_function": "entmax_bisect", "attention_alpha": 1.4, "learn_alpha": learn}
    net, _, _ = build(model, attention_dropout=[0.0])
    mha = net.encoder.transformer_layers[0].self_attn
    x, keep = _attention_inputs(mha)
    key, value, query = mha._prepare_inputs(x, x, x)
    eager, _ = mha._compute_attention(key, value, query, attn_mask=keep, return_attn=True)
    token = attention._ACTIVE.set(getattr(mha, attention.NORMALIZER))
    try:
        context = multi_headed_attn._sdpa(query, key, value, attn_mask=keep, dropout_p=0.0, scale=None)
    finally:
        attention._ACTIVE.reset(token)
    assert torch.allclose(mha.final_linear(multi_headed_attn.blhd_to_bld(context)), eager, atol=1e-5)
    plain = multi_headed_attn._sdpa(query, key, value, attn_mask=keep)  # no sparse module running: softmax
    assert not torch.allclose(plain, context, atol=1e-3)


def test_learnable_alphas_start_at_the_configured_alpha_despite_uniform_init():
    net, _, _ = build({**TRANSFORMER, "attention_function": "entmax_bisect", "attention_alpha": 1.3,
                       "learn_alpha": True}, param_init=0.5)
    alphas = learned_alphas(net)
    assert sorted(alphas) == ["decoder.transformer_layers.0.context_attn", "decoder.transformer_layers.0.self_attn",
                              "encoder.transformer_layers.0.self_attn"]
    assert all(a == pytest.approx([1.3, 1.3], abs=1e-4) for a in alphas.values())
    names = [n for n, _ in net.named_parameters() if n.endswith("alpha.a")]
    assert names == ["encoder.transformer_layers.0.self_attn.softmax.alpha.a",
                     "decoder.transformer_layers.0.self_attn.softmax.alpha.a",
                     "decoder.transformer_layers.0.context_attn.softmax.alpha.a"]


@pytest.mark.parametrize("function", ["sparsemax", "entmax15", "entmax_bisect"])
def test_rnn_global_attention_takes_every_registered_normalizer(function):
    net, _, _ = build({**RNN, "generator_function": "entmax15", "global_attention_function": function})
    attn = next(m for m in net.modules() if isinstance(m, GlobalAttention))
    assert getattr(attn, attention.RNN_NORMALIZER).transformation.name == function
    torch.manual_seed(2)
    enc = torch.randn(2, 6, 16) * 3
    pad = torch.zeros(2, 1, 6, dtype=torch.bool)
    pad[1, :, 4:] = True
    _, weights = attn(torch.randn(2, 3, 16) * 3, enc, src_pad_mask=pad)
    assert (weights[1, :, 4:] == 0).all() and (weights == 0).sum() > 4
    assert torch.allclose(weights.sum(-1), torch.ones(()))


def test_global_attention_function_given_in_the_decoder_section_reaches_the_checks_and_the_rnn_attention():
    """Eole also takes the RNN attention's function in ``decoder:``; there it counts as in ``model:``."""
    net, config, _ = build({**RNN, "generator_function": "entmax15", "global_attention_alpha": 1.3,
                            "decoder": {"decoder_type": "rnn", "global_attention_function": "entmax_bisect"}})
    attn = next(m for m in net.modules() if isinstance(m, GlobalAttention))
    assert getattr(attn, attention.RNN_NORMALIZER).transformation.describe() == "entmax_bisect(alpha=1.3)"
    errors, warnings = inapplicable_options(flat_options(config))
    assert errors == [] and not [w for w in warnings if w], warnings  # (its alpha is used, not ignored)


def _loss_compute(model, **training):
    from eole.config.run import TrainConfig

    net, config, vocabs = build(model)
    cfg = TrainConfig(src_vocab="v", tgt_vocab="v", data={}, model=model, training=training)
    return net, LossCompute.from_config(cfg, net, vocabs)


@pytest.mark.parametrize("function", ["sparsemax", "entmax15", "alpha_relu"])
def test_the_loss_is_the_fenchel_young_loss_of_the_models_generator(function):
    """Upstream's sparsemax criterion calls LogSparsemax with the scores and fails on its first step."""
    model = {**RNN, "generator_function": function, **({"generator_tau": 0.0} if function == "alpha_relu" else {})}
    net, compute = _loss_compute(model)
    assert isinstance(compute.criterion, TransformationLoss) and compute.criterion.generator is net.generator
    torch.manual_seed(3)
    hidden, target = torch.randn(2, 4, 16, requires_grad=True), torch.tensor([[2, 5, 6, 3, 1], [2, 7, 3, 1, 1]])
    batch = {"tgt": target, "src": target, "srclen": torch.tensor([5, 3]), "cid": ["c", "c"],
             "cid_line_number": [0, 1]}
    loss, stats, _ = compute(batch, hidden, {})
    logits = net.generator(hidden.reshape(-1, 16))
    expected = net.generator.loss(logits, target[:, 1:].reshape(-1), ignore_index=1)
    assert torch.allclose(loss, expected) and loss.requires_grad
    assert stats.entmax_loss_name == net.generator.transformation.loss_name


def test_generator_tau_auto_is_resolved_on_the_first_batch_and_kept_in_the_state_dict():
    net, compute = _loss_compute({**RNN, "generator_function": "alpha_relu", "generator_tau": "auto"})
    assert net.generator.tau_pending() and torch.isnan(net.state_dict()["generator.tau"]).all()
    target = torch.tensor([[2, 5, 6, 3, 1]])
    compute({"tgt": target, "src": target, "srclen": torch.tensor([5]), "cid": ["c"], "cid_line_number": [0]},
            torch.randn(1, 4, 16), {})
    assert not net.generator.tau_pending() and torch.isfinite(net.state_dict()["generator.tau"]).all()


def test_rl_log_probs_of_a_sparse_output_layer_are_refused_not_taken_by_log_softmax():
    from onmt_entmax.errors import ConfigError

    tgt = torch.tensor([[2, 5, 6, 3]])
    with pytest.raises(ConfigError, match="compute_log_probs"):
        build({**TRANSFORMER, "generator_function": "entmax15"})[0].compute_log_probs(tgt, tgt, torch.tensor([4]))
    out = build(TRANSFORMER)[0].compute_log_probs(tgt, tgt, torch.tensor([4]))  # softmax: upstream's
    assert torch.allclose(out["log_probs"].exp().sum(-1), torch.ones(()))
