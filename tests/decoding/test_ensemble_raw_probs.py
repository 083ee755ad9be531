"""When an ensemble averages raw probabilities (onmt_entmax.decoding.ensemble.average_raw_probs): on
request (avg_raw_probs), and always when a member's output layer is sparse, since averaging sparse
members' logits (the toolkits' default) would give every token p > 0 and lose the union of supports."""
import torch
from torch import nn

from onmt_entmax.decoding.ensemble import average_raw_probs, averaging_forward, returns_log_probs
from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.registry import get_transformation


class _Generator(nn.Module):
    """The shape of both toolkits' EnsembleGenerator: the members' output layers, logits averaged upstream."""

    def __init__(self, members):
        super().__init__()
        self.model_generators = nn.ModuleList(members)

    def forward(self, hidden, attn=None, src_map=None):  # upstream: the members' averaged log-softmax
        return torch.stack([torch.log_softmax(g(h), -1) for g, h in zip(self.model_generators, hidden)]).mean(0)


class _Averaging(_Generator):
    forward = averaging_forward(_Generator.forward, ValueError)


class _Ensemble(nn.Module):
    def __init__(self, *functions):
        super().__init__()
        torch.manual_seed(0)
        self.generator = _Averaging([nn.Linear(4, 6) if f == "softmax" else EntmaxGenerator(4, 6, get_transformation(f))
                                     for f in functions])


def test_a_sparse_member_switches_on_raw_probability_averaging_and_keeps_the_union_of_supports():
    for functions in (("sparsemax", "sparsemax"), ("entmax15", "softmax"), ("softmax", "alpha_relu")):
        model = _Ensemble(*functions)
        assert average_raw_probs(model, asked=False) and returns_log_probs(model.generator), functions
    model = _Ensemble("sparsemax", "sparsemax")
    average_raw_probs(model, asked=False)
    hidden = [torch.randn(3, 4) * 20, torch.randn(3, 4) * 20]
    log_p = model.generator(hidden)
    ruled_out = torch.stack([g.log_probs(g(h)) == float("-inf")
                             for g, h in zip(model.generator.model_generators, hidden)]).all(0)
    assert ruled_out.any() and torch.equal(log_p == float("-inf"), ruled_out)  # zero only where all are zero
    assert torch.allclose(log_p.exp().sum(-1), torch.ones(3))


def test_dense_members_average_as_the_toolkit_does_unless_asked():
    model = _Ensemble("softmax", "softmax")
    assert not average_raw_probs(model, asked=False) and not returns_log_probs(model.generator)
    hidden = [torch.randn(3, 4), torch.randn(3, 4)]
    assert torch.equal(model.generator(hidden), _Generator.forward(model.generator, hidden))
    assert average_raw_probs(model, asked=True) and returns_log_probs(model.generator)
