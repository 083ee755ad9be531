"""Enumeration, exact search and the reference beam search on decoders with known answers."""
import math

import pytest
import torch

from decoding_toys import DRAW_SUPPORT, EOS, RandomSparseModel, brute_force, draw_model, spell

from onmt_entmax.decoding import beam_search, enumerate_support, exact_search
from onmt_entmax.decoding.search import PrefixSteps
from onmt_entmax.errors import SupportTooLarge


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


def test_enumeration_of_a_support_exactly_the_size_of_the_cap():
    support = enumerate_support(draw_model(), eos=EOS, max_length=10, cap=3)  # |support| = 3 = cap: listed
    assert sorted(spell(t) for t, _ in support.sequences) == sorted(DRAW_SUPPORT)
    with pytest.raises(SupportTooLarge, match="more than cap=2"):
        enumerate_support(draw_model(), eos=EOS, max_length=10, cap=2)


@pytest.mark.parametrize("max_length,expected", [(4, []), (5, ["drew"]), (6, ["drawn", "drew"]),
                                                 (7, ["drawn", "drawed", "drew"])])
def test_exact_search_with_a_binding_max_length(max_length, expected):
    """max_length counts EOS: drew (4 letters) needs 5, drawn 6, drawed 7. A binding limit leaves the
    most probable output that fits, never one that does not."""
    got = exact_search(draw_model(), eos=EOS, max_length=max_length, n_best=3)
    assert [spell(t) for t, _ in got] == expected
    truth = sorted(brute_force(draw_model(), EOS, max_length, 7).items(), key=lambda x: -x[1])
    assert [t for t, _ in got] == [t for t, _ in truth[:3]]


@pytest.mark.parametrize("seed", range(4))
def test_exact_search_under_a_binding_max_length_equals_brute_force(seed):
    model = RandomSparseModel(vocab_size=5, seed=seed, scale=1.5, stop=6)  # outputs up to 6 tokens
    for max_length in (3, 4, 5):
        truth = sorted(brute_force(model, EOS, max_length, 5).items(), key=lambda x: -x[1])
        got = exact_search(model, eos=EOS, max_length=max_length, n_best=2)
        assert [t for t, _ in got] == [t for t, _ in truth[:2]]
        assert all(len(t) < max_length for t, _ in got)


def _tie_model():
    """Two first tokens of equal probability 1/2, each followed by EOS: both outputs have p = 1/2."""
    from decoding_toys import TrieModel

    return TrieModel({(): {1: 0.5, 2: 0.5}, (1,): {EOS: 1.0}, (2,): {EOS: 1.0}}, vocab_size=3)


def test_optimality_holds_when_the_best_score_ties_the_best_pruned_one():
    """Beam 1 keeps one of two equally probable prefixes: the best finished score equals the best
    pruned one, whose completions cannot exceed it, so the best hypothesis is provably optimal
    (though the beam was not exhaustive)."""
    res = beam_search(_tie_model(), eos=EOS, beam_size=1, max_length=5, n_best=1)
    cert, (_, score) = res.certificate, res.hypotheses[0]
    assert not cert.exhaustive and cert.pruned_steps == 1
    assert score == cert.best_pruned == pytest.approx(math.log(0.5))
    assert cert.optimal(score)
    assert score == pytest.approx(exact_search(_tie_model(), eos=EOS, max_length=5)[0][1])
    assert not cert.optimal(math.nextafter(score, -math.inf))  # anything below the pruned score: no claim


def test_a_hypothesis_cut_at_max_length_is_not_exhaustive():
    """draw: drawn and drawed need more than max_length 5; the beam returns their cut prefixes, which
    are not outputs, so the beam did not see the whole support (and nothing is claimed optimal)."""
    res = beam_search(draw_model(), eos=EOS, beam_size=5, max_length=5, n_best=5)
    assert res.certificate.truncated > 0 and not res.certificate.exhaustive
    assert not res.certificate.optimal(res.hypotheses[0][1])
    assert beam_search(draw_model(), eos=EOS, beam_size=5, max_length=10, n_best=5).certificate.exhaustive


class _CountedSteps(PrefixSteps):
    """A scorer with start/advance of its own (as the adapters' are), counting the rows it scores."""

    def __init__(self, model):
        super().__init__(model)
        self.rows = 0

    def _rows(self):
        self.rows += len(self.prefixes)
        return super()._rows()


@pytest.mark.parametrize("seed", [0, 1, 3, 4, 5])  # (seed 2: the greedy path alone gives the bound)
def test_exact_search_seeded_with_the_beams_outputs_finds_the_same_n_best_in_fewer_rows(seed):
    model = RandomSparseModel(vocab_size=6, seed=seed, scale=0.7, stop=5)
    truth = sorted(brute_force(model, EOS, 7, 6).items(), key=lambda x: -x[1])
    beam = beam_search(model, eos=EOS, beam_size=2, max_length=7, n_best=2).hypotheses
    plain, seeded = _CountedSteps(model), _CountedSteps(model)
    got = exact_search(plain, eos=EOS, max_length=7, n_best=2)
    with_beam = exact_search(seeded, eos=EOS, max_length=7, n_best=2, known=beam)
    for found in (got, with_beam):
        assert [s for _, s in found] == pytest.approx([s for _, s in truth[:2]], abs=1e-5)
    assert seeded.rows < plain.rows
    worse = [((1, 1, 1), -50.0)]  # a known sequence far below the best changes nothing
    assert [t for t, _ in exact_search(model, eos=EOS, max_length=7, n_best=2, known=worse)] == \
        [t for t, _ in got]


def test_exact_search_steps_a_scorer_that_keeps_its_state_one_row_a_prefix():
    """With start/advance, the search asks the scorer for each expanded prefix as one row of a depth
    (an adapter's scorer steps it from its parent's decoder state), never the model directly."""
    model = RandomSparseModel(vocab_size=6, seed=3, scale=0.5, stop=6)
    steps = _CountedSteps(model)
    best = exact_search(steps, eos=EOS, max_length=8)
    assert model.calls == steps.rows  # every row through start/advance
    full = enumerate_support(model, eos=EOS, max_length=8, cap=100_000)
    assert best[0][1] == pytest.approx(full.sequences[0][1], abs=1e-5)
    assert steps.rows < full.expansions
