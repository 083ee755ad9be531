"""The -inf beam-search hooks (``decoding.beam_hooks``) in each toolkit's own BeamSearch (OpenNMT-py
3.5.1 and Eole, whichever are installed), driven step by step by hand-built decoders as their
translators drive them."""
import contextlib
import importlib
import math

import pytest
import torch

from decoding_toys import EOS, RandomSparseModel, draw_model, spell

from onmt_entmax.decoding import CertificateTracker, beam_search, enumerate_support, exact_search
from onmt_entmax.decoding.beam_hooks import BeamRecord, rows

NEG_INF = float("-inf")
PAD, BOS, UNK = 97, 98, 99  # outside the toys' vocabularies except when padded below
ADAPTERS = {"onmt": ("onmt.translate", "onmt_entmax.onmt.patches"),
            "eole": ("eole.predict", "onmt_entmax.eole.patches")}


@pytest.fixture(params=sorted(ADAPTERS))
def toolkit(request):
    """The toolkit's beam search module and DecodeStrategy, with the hooks installed."""
    package, adapter = ADAPTERS[request.param]
    bs_module = pytest.importorskip(f"{package}.beam_search")
    ds_module = importlib.import_module(f"{package}.decode_strategy")
    patches = importlib.import_module(adapter)
    hooks = {name for name, *_ in rows("", "", "")}  # the beam_hooks rows of the adapter's table
    patches.apply_patches([p for p in patches.PATCHES if p.name in hooks])
    return bs_module, ds_module.DecodeStrategy


@contextlib.contextmanager
def stock(toolkit):
    """Temporarily restore upstream's methods (the wrappers keep them as __wrapped__)."""
    bs_module, strategy = toolkit
    patched = [(strategy, n) for n in ("ensure_min_length", "ensure_unk_removed", "block_ngram_repeats",
                                       "target_prefixing")] + \
              [(bs_module.BeamSearchBase, n) for n in ("_pick", "update_finished", "beams_non_finished")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in patched]
    for owner, name, fn in saved:
        setattr(owner, name, getattr(fn, "__wrapped__", fn))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def new_beam(toolkit, beam_size, batch_size, n_best, max_length, min_length=0, ban_unk=False, block_ngram=0,
             return_attention=False, length_penalty="none", alpha=0.0):
    bs_module, _ = toolkit
    scorer = bs_module.GNMTGlobalScorer(alpha, 0.0, length_penalty, "none")
    return bs_module.BeamSearch(beam_size, batch_size=batch_size, pad=PAD, bos=BOS, eos=EOS, unk=UNK, start=BOS,
                                n_best=n_best, global_scorer=scorer, min_length=min_length, max_length=max_length,
                                return_attention=return_attention, block_ngram_repeat=block_ngram,
                                exclusion_tokens=set(), stepwise_penalty=False, ratio=0.0, ban_unk_token=ban_unk)


def run_beam(toolkit, models, beam_size, n_best, max_length, vocab, min_length=0, ban_unk=False,
             block_ngram=0, certify=True, length_penalty="none", alpha=0.0):
    """Drive upstream BeamSearch as the translators' ``_translate/_predict_batch_with_strategy`` do."""
    V = max(vocab, 100)
    bs = new_beam(toolkit, beam_size, len(models), n_best, max_length, min_length, ban_unk, block_ngram,
                  length_penalty=length_penalty, alpha=alpha)
    rec = BeamRecord(CertificateTracker(len(models)) if certify else None, n_best)
    bs._entmax = rec
    bs.initialize(torch.zeros(len(models), 3, 4), torch.full((len(models),), 3))
    for _ in range(bs.max_length):
        rows = bs.alive_seq.size(0) // beam_size
        lp = torch.full((rows * beam_size, V), NEG_INF)
        for r in range(rows * beam_size):
            b = int(bs._batch_offset[r // beam_size])
            prefix = tuple(bs.alive_seq[r, 1:].tolist())
            if all(t < vocab for t in prefix):
                lp[r, :vocab] = models[b]([prefix])[0]
            else:  # a junk prefix (stock search only): give it some finite distribution
                lp[r, :vocab] = models[b]([()])[0]
        bs.advance(lp, None)
        if any(any(f) for f in bs.is_finished_list):
            bs.update_finished()
            if bs.done:
                break
    hyps = [[(tuple(p.tolist())[:-1] if int(p[-1]) == EOS else tuple(p.tolist()), float(s))
             for p, s in zip(bs.predictions[b], bs.scores[b])] for b in range(len(models))]
    global _last_beam
    _last_beam = bs
    return hyps, rec


_last_beam = None  # the BeamSearch object of the latest run_beam call


def test_stock_beam_returns_junk_zero_probability_hypotheses(toolkit):
    with stock(toolkit):
        hyps, _ = run_beam(toolkit, [draw_model()], beam_size=5, n_best=5, max_length=10, vocab=7)
    assert len(hyps[0]) == 5 and min(s for _, s in hyps[0]) <= -65504  # the upstream bug


def test_patched_beam_returns_exactly_the_support_with_certificate(toolkit):
    hyps, rec = run_beam(toolkit, [draw_model()], beam_size=5, n_best=5, max_length=10, vocab=7)
    assert [spell(t) for t, _ in hyps[0]] == ["drawn", "drawed", "drew"]
    assert [math.exp(s) for _, s in hyps[0]] == pytest.approx([0.6375, 0.2125, 0.15])
    assert rec.found[0] == 3 and rec.tracker[0].exhaustive


@pytest.mark.parametrize("beam", [1, 2, 3, 6])
def test_patched_beam_matches_reference_beam_and_certificate(toolkit, beam):
    models = [RandomSparseModel(5, seed=s, scale=1.5, stop=4) for s in range(6)]
    hyps, rec = run_beam(toolkit, models, beam_size=beam, n_best=2, max_length=7, vocab=5)
    for b, m in enumerate(models):
        ref = beam_search(m, eos=EOS, beam_size=beam, max_length=7, n_best=2)
        assert [t for t, _ in hyps[b]] == [t for t, _ in ref.hypotheses]
        assert [s for _, s in hyps[b]] == pytest.approx([s for _, s in ref.hypotheses], abs=1e-5)
        assert rec.tracker[b].exhaustive == ref.certificate.exhaustive
        assert all(s > NEG_INF for _, s in hyps[b])
        if rec.tracker[b].exhaustive:
            assert hyps[b][0][0] == exact_search(m, eos=EOS, max_length=7)[0][0]


def test_wide_beam_enumerates_the_support(toolkit):
    models = [RandomSparseModel(5, seed=s, scale=1.5, stop=3) for s in range(3)]
    supports = [enumerate_support(m, eos=EOS, max_length=6, cap=1000) for m in models]
    cap = max(len(s) for s in supports)
    hyps, rec = run_beam(toolkit, models, beam_size=cap, n_best=cap, max_length=6, vocab=5)
    for b, s in enumerate(supports):
        assert rec.tracker[b].exhaustive
        assert dict(hyps[b]).keys() == dict(s.sequences).keys()


def test_min_length_forbids_eos_with_minus_inf(toolkit):
    hyps, _ = run_beam(toolkit, [draw_model()], beam_size=5, n_best=5, max_length=10, vocab=7, min_length=6)
    assert [spell(t) for t, _ in hyps[0]] == ["drawed"]  # min_length counts tokens before EOS: only "drawed" has 6
    assert hyps[0][0][1] == pytest.approx(math.log(0.2125))


def test_no_hypothesis_when_constraints_remove_the_whole_support(toolkit):
    hyps, rec = run_beam(toolkit, [draw_model()], beam_size=5, n_best=2, max_length=10, vocab=7, min_length=7)
    assert hyps[0] == [] and rec.found[0] == 0


def test_scores_are_tensors_so_with_score_works(toolkit):
    """-with_score calls .item() on every stored score (upstream #2583: a float crashed there)."""
    hyps, _ = run_beam(toolkit, [draw_model()], beam_size=2, n_best=2, max_length=10, vocab=7)
    # (run_beam reads them back with float(); here the objects themselves)
    bs_scores = _last_beam.scores[0]
    assert len(bs_scores) == 2 and all(torch.is_tensor(x) and x.dim() == 0 for x in bs_scores)
    assert [x.item() for x in bs_scores] == [s for _, s in hyps[0]]
    assert [spell(t) for t, _ in hyps[0]] == ["drawn", "drawed"]


def test_a_hypothesis_cut_at_max_length_is_never_certified(toolkit):
    hyps, rec = run_beam(toolkit, [draw_model()], beam_size=5, n_best=5, max_length=5, vocab=7)
    cut = [spell(t) for t, _ in hyps[0] if len(t) == 5]  # no EOS: a prefix of drawn / drawed
    assert cut and not rec.tracker[0].exhaustive and rec.tracker[0].truncated == len(cut)
    assert not rec.tracker[0].optimal(hyps[0][0][1])
    _, wide = run_beam(toolkit, [draw_model()], beam_size=5, n_best=5, max_length=10, vocab=7)
    assert wide.tracker[0].exhaustive


def test_the_best_tied_with_the_best_pruned_is_provably_optimal(toolkit):
    from decoding_toys import TrieModel

    tie = TrieModel({(): {1: 0.5, 2: 0.5}, (1,): {EOS: 1.0}, (2,): {EOS: 1.0}}, vocab_size=3)
    hyps, rec = run_beam(toolkit, [tie], beam_size=1, n_best=1, max_length=5, vocab=3)
    cert = rec.tracker[0]
    assert not cert.exhaustive and hyps[0][0][1] == cert.best_pruned == pytest.approx(math.log(0.5))
    assert cert.optimal(hyps[0][0][1])


@pytest.mark.parametrize("options", [dict(), dict(min_length=2), dict(block_ngram=2),
                                     dict(length_penalty="avg", alpha=1.0), dict(length_penalty="wu", alpha=0.6)])
def test_dense_models_decode_exactly_as_stock(toolkit, options):
    class Dense:
        def __init__(self, seed):
            self.m = RandomSparseModel(6, seed=seed, stop=5)

        def __call__(self, prefixes):
            return torch.log_softmax(torch.stack([self.m.logits(p) for p in prefixes]), -1)

    models = [Dense(s) for s in range(4)]
    with stock(toolkit):
        ref, _ = run_beam(toolkit, models, beam_size=3, n_best=3, max_length=8, vocab=6, certify=False, **options)
    got, _ = run_beam(toolkit, models, beam_size=3, n_best=3, max_length=8, vocab=6, certify=False, **options)
    assert got == ref


def test_stored_attention_is_cut_at_each_sentences_own_source_length(toolkit):
    # upstream indexes the beam-tiled src_len with the sentence index: sentence 1 got sentence 0's length
    beam, lengths = 3, [2, 5]
    bs = new_beam(toolkit, beam, 2, n_best=1, max_length=10, return_attention=True)
    bs.initialize(torch.zeros(2, 5, 4), torch.tensor(lengths))
    model = draw_model()
    while not bs.done:
        rows = bs.alive_seq.size(0)
        lp = torch.full((rows, 100), NEG_INF)
        for r in range(rows):
            prefix = tuple(bs.alive_seq[r, 1:].tolist())
            lp[r, :7] = model([prefix])[0] if all(t < 7 for t in prefix) else model([()])[0]
        bs.advance(lp, torch.rand(rows, 1, 5))
        if any(any(f) for f in bs.is_finished_list):
            bs.update_finished()
    assert [bs.attention[b][0].shape[-1] for b in range(2)] == lengths
