"""Eq. (3) against the first-batch estimate of a real untrained OpenNMT-py Transformer.

``generator_tau: auto`` resolves tau on the first training batch, before any update: the mean
1.5-entmax threshold of the untrained model's logits. With Glorot init and a final layer norm,
Lemma 3 says those logits are N(0, 2 d / (d + V)); eq. (3) then predicts tau. Small models add
the generator bias (variance 1/(3d), 5% of sigma^2 at d = 32), and V = 304 is far from the
asymptotic regime, hence the tolerance; at d = 512, V = 10k, the gap on exact normal draws is
< 0.01 (test_tau_estimate).
"""
import pytest

from onmt_entmax.ops.tau_estimate import tau_formula


@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("onmt")
    from tiny_transformers import trained

    return trained()


def test_auto_tau_of_the_untrained_model_agrees_with_the_formula(tiny):
    from tiny_transformers import D_MODEL

    from onmt_entmax.analysis.alphas import load_checkpoint

    tau = float(load_checkpoint(tiny["learned"])["generator"]["tau"])  # resolved before the first update
    assert tau == pytest.approx(tau_formula(D_MODEL, tiny["vocab"]), abs=0.02)
