"""tau of alpha-ReLU without data (eq. (3) of "Speeding Up Entmax") and from a first batch."""
import math

import pytest
import torch

from onmt_entmax.ops.tau_estimate import logit_sigma, support_fraction, tau_first_batch, tau_formula

scipy = pytest.importorskip("scipy")
from scipy import integrate, optimize, stats  # noqa: E402


@pytest.mark.parametrize("vocab,p_star,tau", [(10_000, .0184, .33), (40_000, .0171, .17), (60_000, .0169, .14)])
def test_table3_of_the_paper(vocab, p_star, tau):
    assert round(tau_formula(512, vocab), 2) == tau
    assert support_fraction(logit_sigma(512, vocab), vocab) == pytest.approx(p_star, abs=1.5e-4)


def _tau_scipy(d_model, vocab, alpha):
    """Independent solution of the order-statistics equation with scipy quad + brentq.

    Support fraction p: k * mean_{x in [1/V, p]} [(a-1) s (q(x) - q(p))]^{1/(a-1)} = 1, k = p V.
    """
    s = math.sqrt(2 * d_model / (d_model + vocab))
    eps = 1 / vocab
    q = lambda x: stats.norm.isf(x)  # noqa: E731

    def excess(log_p):
        p = math.exp(log_p)
        mass, _ = integrate.quad(lambda x: ((alpha - 1) * s * (q(x) - q(p))) ** (1 / (alpha - 1)), eps, p,
                                 epsabs=1e-13, limit=200)
        return vocab * p / (p - eps) * mass - 1

    p = math.exp(optimize.brentq(excess, math.log(eps * 1.0001), math.log(0.999), xtol=1e-13))
    return (alpha - 1) * s * q(p)


@pytest.mark.parametrize("alpha,d_model,vocab",
                         [(1.5, 512, 10_000), (1.5, 64, 800), (1.3, 64, 800), (2.0, 512, 10_000)])
def test_formula_matches_an_independent_solver(alpha, d_model, vocab):
    assert tau_formula(d_model, vocab, alpha) == pytest.approx(_tau_scipy(d_model, vocab, alpha), abs=2e-5)


@pytest.mark.parametrize("alpha,tol", [(1.5, 0.01), (1.25, 0.01), (1.1, 0.01), (2.0, 0.03)])
def test_formula_agrees_with_first_batch_on_normal_logits(alpha, tol):
    d, vocab = 512, 10_000
    g = torch.Generator().manual_seed(0)
    rows = 64 if alpha in (1.5, 2.0) else 8  # other alphas bisect: fewer rows keep the test fast
    logits = torch.randn(rows, vocab, generator=g) * logit_sigma(d, vocab)
    assert tau_formula(d, vocab, alpha) == pytest.approx(tau_first_batch(logits, alpha), abs=tol)


def test_first_batch_is_the_mean_threshold_of_non_padding_rows():
    # sparsemax frame p = [z - tau]_+: [2, 0] -> tau 1; [1, 1] -> tau 1/2
    z = torch.tensor([[2.0, 0.0], [1.0, 1.0], [9.0, -9.0]])
    keep = torch.tensor([True, True, False])
    assert tau_first_batch(z, alpha=2.0, mask=keep) == pytest.approx(0.75)
    # 1.5-entmax frame p = [z/2 - tau]_+^2: two equal scores 0 -> p = 1/2 -> tau = -sqrt(1/2)
    assert tau_first_batch(torch.zeros(3, 2)) == pytest.approx(-math.sqrt(0.5))
    # the threshold reproduces 1.5-entmax of each row: sum_j [z_j/2 - tau]_+^2 = 1
    x = torch.randn(1, 50, dtype=torch.float64)
    tau = tau_first_batch(x)
    assert float(((x / 2 - tau).clamp(min=0) ** 2).sum()) == pytest.approx(1.0, abs=1e-9)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="vocab_size"):
        tau_formula(512, 1)
    with pytest.raises(ValueError, match="d_model"):
        tau_formula(0, 100)
    with pytest.raises(ValueError, match="alpha"):
        tau_formula(512, 100, alpha=2.5)
    with pytest.raises(ValueError, match="logits"):
        tau_first_batch(torch.full((2, 3), float("-inf")))
    with pytest.raises(ValueError, match="mask"):
        tau_first_batch(torch.zeros(2, 3), mask=torch.ones(3, dtype=torch.bool))


@pytest.mark.parametrize("d_model", [1, 8, 512])
def test_a_vocabulary_of_two_has_no_support_fraction_and_is_refused_naming_it(d_model):
    """p* lies in (1/V, 1 - 1/V], empty for V = 2: a ValueError naming vocab_size (it used to divide by zero);
    from V = 3 on the formula gives a finite threshold, at every alpha of (1, 2]."""
    with pytest.raises(ValueError, match="vocab_size"):
        tau_formula(d_model, 2)
    with pytest.raises(ValueError, match="vocab_size"):
        support_fraction(logit_sigma(d_model, 2), 2)
    for alpha in (1.5, 1.3, 2.0):
        assert math.isfinite(tau_formula(d_model, 3, alpha))
