"""Enumeration, exact search and the reference beam search on decoders with known answers."""
import math

import pytest
import torch

from onmt_entmax.decoding import SupportTooLarge, beam_search, enumerate_support, exact_search
from decoding_toys import DRAW_SUPPORT, EOS, RandomSparseModel, brute_force, draw_model, spell


def test_enumeration_finds_exactly_the_draw_support_figure1():
    support = enumerate_support(draw_model(), eos=EOS, max_length=10, cap=10)
    got = {spell(t): math.exp(s) for t, s in support.sequences}
    assert got.keys() == DRAW_SUPPORT.keys()
    for word, p in DRAW_SUPPORT.items():
        assert got[word] == pytest.approx(p, rel=1e-6)
    assert support.mass == pytest.approx(1.0, abs=1e-6)
    assert [spell(t) for t, _ in support.sequences] == ["drawn", "drawed", "drew"]  # most probable first


def test_enumeration_cap_exceeded_is_a_clear_error():
    with pytest.raises(SupportTooLarge, match="cap=2"):
        enumerate_support(draw_model(), eos=EOS, max_length=10, cap=2)


def test_enumeration_refuses_support_longer_than_max_length():
    with pytest.raises(SupportTooLarge, match="max_length=4"):
        enumerate_support(draw_model(), eos=EOS, max_length=4, cap=10)


@pytest.mark.parametrize("seed", range(6))
def test_enumeration_equals_brute_force_on_random_sparse_models(seed):
    model = RandomSparseModel(vocab_size=5, seed=seed, scale=1.5, stop=4)
    truth = brute_force(model, EOS, max_length=6, vocab_size=5)
    support = enumerate_support(model, eos=EOS, max_length=6, cap=10_000)
    got = dict(support.sequences)
    assert got.keys() == truth.keys()
    for k in truth:
        assert got[k] == pytest.approx(truth[k], abs=1e-5)
    assert support.mass == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("seed", range(6))
def test_exact_search_returns_the_true_n_best(seed):
    model = RandomSparseModel(vocab_size=5, seed=seed, scale=1.5, stop=4)
    truth = sorted(brute_force(model, EOS, 6, 5).items(), key=lambda x: -x[1])
    got = exact_search(model, eos=EOS, max_length=6, n_best=3)
    assert [s for _, s in got] == pytest.approx([s for _, s in truth[:3]], abs=1e-5)
    assert got[0][0] == truth[0][0]


def test_exact_search_prunes_rather_than_enumerates():
    model = RandomSparseModel(vocab_size=6, seed=3, scale=0.5, stop=6)
    full = enumerate_support(model, eos=EOS, max_length=8, cap=100_000)
    calls_before = model.calls
    best = exact_search(model, eos=EOS, max_length=8)
    assert best[0][1] == pytest.approx(full.sequences[0][1], abs=1e-5)
    assert model.calls - calls_before < full.expansions


def test_exact_search_refuses_unnormalised_scores():
    def alpha_relu_like(prefixes):
        return torch.log(torch.tensor([[0.5, 1.5, 0.0]] * len(prefixes)))

    with pytest.raises(ValueError, match="p > 1"):
        exact_search(alpha_relu_like, eos=0, max_length=3)


def test_beam_wider_than_support_is_certified_and_returns_the_support():
    res = beam_search(draw_model(), eos=EOS, beam_size=3, max_length=10, n_best=5)
    assert res.certificate.exhaustive
    assert [spell(t) for t, _ in res.hypotheses] == ["drawn", "drawed", "drew"]  # only 3, not n_best=5
    assert all(s > float("-inf") for _, s in res.hypotheses)


def test_narrow_beam_is_not_certified_when_it_prunes():
    res = beam_search(draw_model(), eos=EOS, beam_size=1, max_length=10, n_best=1)
    assert not res.certificate.exhaustive
    assert spell(res.hypotheses[0][0]) == "drawn"


@pytest.mark.parametrize("seed", range(8))
def test_certified_beam_equals_exact_search(seed):
    model = RandomSparseModel(vocab_size=5, seed=seed, scale=1.5, stop=4)
    exact = exact_search(model, eos=EOS, max_length=6)[0]
    support = enumerate_support(model, eos=EOS, max_length=6, cap=10_000)
    for beam in (1, 2, 4, 64):
        res = beam_search(model, eos=EOS, beam_size=beam, max_length=6, n_best=1)
        if res.certificate.exhaustive:
            assert res.hypotheses[0][0] == exact[0]
        if res.certificate.optimal(res.hypotheses[0][1]):
            assert res.hypotheses[0][1] == pytest.approx(exact[1], abs=1e-5)
    wide = beam_search(model, eos=EOS, beam_size=len(support) + 1, max_length=6, n_best=len(support))
    assert wide.certificate.exhaustive
    assert {t for t, _ in wide.hypotheses} == {t for t, _ in support.sequences}


@pytest.mark.parametrize("seed", range(8))
def test_certificate_is_the_same_for_every_n_best_and_means_the_whole_support(seed):
    """The search goes on past the n-best stop only to settle the certificate: every n_best gets the
    same certificate, the output is what the stop chose (the 1-best is the first of the 3-best), and
    a certified 1-best is the global best of the support."""
    model = RandomSparseModel(vocab_size=5, seed=seed, scale=1.5, stop=4)
    support = enumerate_support(model, eos=EOS, max_length=6, cap=10_000)
    for beam in (1, 2, 3, 5):
        runs = {n: beam_search(model, eos=EOS, beam_size=beam, max_length=6, n_best=n) for n in (1, 2, 3)}
        assert len({runs[n].certificate.exhaustive for n in runs}) == 1
        assert runs[1].hypotheses[0] == runs[3].hypotheses[0]
        if runs[1].certificate.exhaustive:
            assert runs[1].hypotheses[0][0] == max(support.sequences, key=lambda t: t[1])[0]
