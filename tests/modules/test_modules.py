"""Output layer, attention normalizer and criterion modules."""
import math

import pytest
import torch
from torch import nn

from onmt_entmax import ops
from onmt_entmax.modules import AttentionNormalizer, EntmaxGenerator, LearnableAlpha, TransformationLoss
from onmt_entmax.registry import get_transformation


def test_generator_keeps_the_linear_parameters_and_state_dict_keys():
    lin = nn.Linear(8, 12)
    gen = EntmaxGenerator.from_linear(lin, get_transformation("entmax15"))
    assert gen.weight is lin.weight and gen.bias is lin.bias
    assert list(gen.state_dict()) == list(lin.state_dict())  # stock checkpoints load into it
    h = torch.randn(3, 8)
    assert torch.equal(gen(h), lin(h))  # forward still returns logits


def test_alpha_relu_generator_stores_tau_as_a_buffer_that_drives_its_math():
    gen = EntmaxGenerator.from_linear(nn.Linear(4, 6), get_transformation("alpha_relu", alpha=1.5))
    assert gen.tau_pending() and "tau" in gen.state_dict()
    gen.set_tau(0.25)
    z = torch.randn(5, 6)
    assert torch.allclose(gen.probs(z), ops.alpha_relu(z, alpha=1.5, tau=0.25))
    state = gen.state_dict()
    other = EntmaxGenerator.from_linear(nn.Linear(4, 6), get_transformation("alpha_relu", alpha=1.5))
    other.load_state_dict(state)
    assert torch.allclose(other.log_probs(z), gen.log_probs(z))


def test_alpha_relu_generator_reads_tau_back_only_when_it_changes():
    """Decoding calls log_probs every step; reading tau from a GPU buffer each time would sync the
    device. The value is re-read after in-place writes (a loaded checkpoint), a replaced buffer or
    a new transformation object, and not otherwise."""
    gen = EntmaxGenerator.from_linear(nn.Linear(4, 6), get_transformation("alpha_relu", alpha=1.5))
    z = torch.randn(5, 6) * 3
    gen.set_tau(0.25)
    assert torch.equal(gen.log_probs(z), ops.alpha_relu_log(z, alpha=1.5, tau=0.25))
    gen.load_state_dict({**gen.state_dict(), "tau": torch.tensor([0.5])})  # copies into the buffer in place
    assert gen.transformation.tau == 0.25  # nothing read yet ...
    assert torch.equal(gen.log_probs(z), ops.alpha_relu_log(z, alpha=1.5, tau=0.5))  # ... read when used
    gen.transformation = get_transformation("alpha_relu", alpha=1.5)  # tau unset on the new object
    assert torch.equal(gen.probs(z), ops.alpha_relu(z, alpha=1.5, tau=0.5))
    gen.tau = torch.tensor([-0.1])
    assert torch.equal(gen.probs(z), ops.alpha_relu(z, alpha=1.5, tau=-0.1))
    gen.transformation.tau = 99.0  # only the buffer counts, but an unchanged one is not read again
    assert gen.transformation.tau == 99.0 and gen.log_probs(z) is not None


def test_alpha_relu_log_is_the_log_of_alpha_relu_without_underflow():
    z = torch.randn(7, 9, dtype=torch.float64) * 3
    for alpha, tau in ((1.5, 0.1), (2.0, -0.3), (1.2, 0.0)):
        p, lp = ops.alpha_relu(z, alpha=alpha, tau=tau), ops.alpha_relu_log(z, alpha=alpha, tau=tau)
        assert torch.equal(torch.isneginf(lp), p == 0)
        assert torch.allclose(lp[p > 0].exp(), p[p > 0])
    # alpha = 1.1 raises to the 10th power: p underflows to 0 in float32 where log p is finite
    small = torch.full((1, 2), 1e-4)
    assert ops.alpha_relu(small, alpha=1.1).eq(0).all()
    assert torch.isfinite(ops.alpha_relu_log(small, alpha=1.1)).all()
    assert ops.alpha_relu_log(z.half(), alpha=1.5, tau=0.1).dtype == torch.float16


def test_criterion_is_the_summed_fy_loss_with_pads_ignored():
    gen = EntmaxGenerator.from_linear(nn.Linear(4, 6), get_transformation("entmax_bisect", alpha=1.3))
    crit = TransformationLoss(gen, ignore_index=1, label_smoothing=0.1)
    z, y = torch.randn(7, 6), torch.tensor([0, 1, 2, 3, 1, 5, 4])
    expected = ops.entmax_bisect_loss(z, y, alpha=1.3, ignore_index=1, reduction="sum", label_smoothing=0.1)
    assert crit.ignore_index == 1
    assert torch.allclose(crit(z, y), expected)


def test_attention_rows_sum_to_one_and_masked_keys_get_exactly_zero():
    norm = AttentionNormalizer(get_transformation("sparsemax"))
    scores = torch.randn(2, 4, 3, 6).masked_fill(torch.arange(6) >= 4, -1e18)  # Transformer's finite mask
    p = norm(scores)
    assert torch.allclose(p.sum(-1), torch.ones(2, 4, 3))
    assert (p[..., 4:] == 0).all()
    rnn = AttentionNormalizer(get_transformation("entmax15"))(torch.tensor([[1.0, 0.5, -math.inf]]))
    assert rnn[0, 2] == 0 and torch.isclose(rnn.sum(), torch.tensor(1.0))


def test_learnable_alpha_starts_at_the_configured_alpha_stays_in_range_and_gets_gradient():
    alpha = LearnableAlpha(heads=3, init_alpha=1.5)
    assert torch.allclose(alpha(), torch.full((3,), 1.5)) and torch.equal(alpha.a.detach(), torch.zeros(3))
    with torch.no_grad():
        alpha.a.copy_(torch.tensor([-50.0, 0.0, 50.0]))
    a = alpha()
    assert a.min() >= 1.01 and a.max() <= 2.0
    norm = AttentionNormalizer(get_transformation("entmax15"), heads=3, learn_alpha=True)
    scores = torch.randn(2, 3, 4, 5)
    out = norm(scores)
    (out * torch.randn_like(out)).sum().backward()
    assert norm.alpha.a.grad is not None and (norm.alpha.a.grad != 0).all()
    # head h uses alpha_h: compare one head with the functional op
    for h in range(3):
        ref = ops.entmax_bisect(scores[:, h], alpha=float(norm.current_alpha()[h]))
        assert torch.allclose(out[:, h], ref, atol=1e-5)


def test_learnable_alpha_is_computed_once_while_decoding_and_follows_updates():
    """Decoding calls it once per attention layer and step: without grad the alphas are computed
    once and reused until `a` changes (an optimizer step or a loaded checkpoint)."""
    alpha = LearnableAlpha(heads=2, init_alpha=1.5)
    with torch.no_grad():
        first = alpha()
        assert alpha() is first and not first.requires_grad
        alpha.a.add_(torch.tensor([1.0, -1.0]))  # in place, as an optimizer step
        moved = alpha()
        alpha.load_state_dict({"a": torch.tensor([3.0, 0.0])})
        loaded = alpha()
    assert torch.allclose(moved, 1 + torch.sigmoid(torch.tensor([1.0, -1.0])))
    assert torch.allclose(loaded, 1 + torch.sigmoid(torch.tensor([3.0, 0.0])))
    assert alpha().requires_grad  # training: a fresh, differentiable computation


def test_normalizer_reuses_its_per_head_alphas_while_decoding_until_they_change():
    norm = AttentionNormalizer(get_transformation("entmax_bisect"), heads=2, learn_alpha=True)
    with torch.no_grad():
        first = norm._alpha_per_head()
        assert norm._alpha_per_head() is first and first.shape == (2, 1, 1)
        norm.alpha.a.add_(torch.tensor([1.0, -1.0]))  # an optimizer step
        moved = norm._alpha_per_head()
        norm.load_state_dict({"alpha.a": torch.tensor([3.0, 0.0])})
        loaded = norm._alpha_per_head()
    torch.testing.assert_close(moved.flatten(), 1 + torch.sigmoid(torch.tensor([1.0, -1.0])))
    torch.testing.assert_close(loaded.flatten(), 1 + torch.sigmoid(torch.tensor([3.0, 0.0])))


def test_learn_alpha_refuses_softmax_and_sparsemax():
    for name in ("softmax", "sparsemax"):
        with pytest.raises(ValueError, match="learn_alpha"):
            AttentionNormalizer(get_transformation(name), heads=2, learn_alpha=True)


@pytest.mark.parametrize("name,learn", [("entmax15", False), ("sparsemax", False), ("entmax_bisect", True)])
def test_attend_is_the_normalizer_between_the_two_attention_matmuls(name, learn):
    """What OpenNMT-py's eager branch computes around `self.softmax`, in one call."""
    norm = AttentionNormalizer(get_transformation(name), heads=4, learn_alpha=learn)
    if learn:
        with torch.no_grad():
            norm.alpha.a.copy_(torch.tensor([-2.0, 0.0, 1.0, 3.0]))
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 5)
    keep = torch.tensor([[True] * 6, [True] * 4 + [False] * 2]).view(2, 1, 1, 6)
    scores = (q / math.sqrt(8)) @ k.transpose(-1, -2)
    expected = norm(scores.masked_fill(~keep, -1e18)) @ v
    torch.testing.assert_close(norm.attend(q, k, v, keep), expected)
    with torch.no_grad():
        torch.testing.assert_close(norm.attend(q, k, v, keep), expected)


def test_alpha_tensor_is_checked_once_until_it_changes(monkeypatch):
    """A learned alpha is in [1.01, 2] by construction and never checked; another alpha tensor (decoding
    passes the same one every step) once until it changes (three device operations on CUDA), a
    failing one every time."""
    from onmt_entmax.ops import _common

    checks = []
    real = _common._checked_before
    monkeypatch.setattr(_common, "_checked_before", lambda *args: real(*args) or checks.append(1))
    norm = AttentionNormalizer(get_transformation("entmax15"), heads=2, learn_alpha=True).eval()
    scores = torch.randn(3, 2, 1, 7)
    with torch.no_grad():
        for _ in range(3):
            norm(scores)
        norm.alpha.a.add_(0.5)  # an optimizer step or a loaded checkpoint
        norm(scores)
    norm.train()(scores.requires_grad_()).sum().backward()
    assert checks == []
    given = torch.tensor([1.2, 1.5]).view(2, 1, 1)
    for _ in range(3):
        ops.entmax_bisect(scores, given, -1)
    assert len(checks) == 1
    given.mul_(1.0)
    ops.entmax_bisect(scores, given, -1)
    assert len(checks) == 2
    bad = torch.tensor([0.5, 1.5]).view(2, 1, 1)
    for _ in range(2):
        with pytest.raises(ValueError, match="alpha"):
            ops.entmax_bisect(scores, bad, -1)


def test_criterion_keeps_the_support_sizes_of_its_last_target_for_the_reports():
    gen = EntmaxGenerator.from_linear(nn.Linear(4, 6), get_transformation("entmax15"))
    crit = TransformationLoss(gen, ignore_index=1)
    z, y = torch.randn(7, 6) * 3, torch.tensor([0, 1, 2, 3, 1, 5, 4])
    crit(z, y)
    expected = (ops.entmax15(z, -1) > 0).sum(-1).float() * (y != 1)
    assert torch.equal(crit.support_of(y), expected)
    assert crit.support_of(y.clone()) is None  # another target tensor: not this call's rows
