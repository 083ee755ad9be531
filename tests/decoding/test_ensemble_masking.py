"""Raw-probability ensembles, -inf masks and certificate bookkeeping."""

import pytest
import torch

from onmt_entmax import ops
from onmt_entmax.decoding import (
    CertificateTracker,
    average_probs,
    certificate_rate,
    check_same_vocab,
    penalty_mask,
    require_sparse,
    support_size,
)

NEG_INF = float("-inf")


def test_average_probs_is_the_mean_of_raw_probabilities_with_union_support():
    p1 = torch.tensor([[0.5, 0.5, 0.0, 0.0]])
    p2 = torch.tensor([[0.0, 0.25, 0.75, 0.0]])
    out = average_probs([p1.log(), p2.log()])
    assert torch.allclose(out.exp(), (p1 + p2) / 2)
    assert out[0, 3] == NEG_INF  # zero in every member stays exactly zero
    assert not torch.isnan(out).any()
    assert support_size(out).item() == 3


def test_average_probs_weights_and_half_precision():
    p1 = torch.tensor([[1.0, 0.0]])
    p2 = torch.tensor([[0.0, 1.0]])
    out = average_probs(torch.stack([p1.log(), p2.log()]).half(), weights=[3, 1])
    assert out.dtype == torch.float16
    assert torch.allclose(out.float().exp(), torch.tensor([[0.75, 0.25]]), atol=1e-3)
    with pytest.raises(ValueError, match="weights"):
        average_probs([p1.log(), p2.log()], weights=[1, 0])


def test_all_zero_rows_stay_minus_inf_not_nan():
    out = average_probs([torch.full((2, 3), NEG_INF), torch.full((2, 3), NEG_INF)])
    assert torch.isneginf(out).all()


def test_ensemble_of_models_with_different_vocabularies_is_refused():
    check_same_vocab([["a", "b"], ["a", "b"]])
    with pytest.raises(ValueError, match="token 1 is 'b' in m1 but 'c' in m2"):
        check_same_vocab([["a", "b"], ["a", "c"]], names=["m1", "m2"])
    with pytest.raises(ValueError, match="2 vs 3 tokens"):
        check_same_vocab([["a", "b"], ["a", "b", "c"]])


def test_penalty_mask_recovers_where_an_upstream_stand_in_forbids():
    lp = torch.log(torch.tensor([[0.5, 0.5, 0.0]]))

    def upstream_min_length(t):
        t[:, 1] = -65504  # what OpenNMT-py writes: a finite stand-in that beats -inf

    mask = penalty_mask(upstream_min_length, lp)
    assert mask.tolist() == [[False, True, False]]
    lp.masked_fill_(mask, NEG_INF)
    assert torch.topk(lp, 2).values[0, 1] == NEG_INF  # nothing is revived


def test_certificate_tracker_counts_pruned_and_abandoned():
    tr = CertificateTracker(2)
    scores = torch.tensor([[-0.1, -0.2, NEG_INF, NEG_INF], [-0.1, -0.2, -0.3, NEG_INF]])
    tr.observe_step([0, 1], scores, slots=2)
    assert tr[0].exhaustive and not tr[1].exhaustive
    assert tr[1].best_pruned == pytest.approx(-0.3)
    assert tr[1].optimal(-0.25) and not tr[1].optimal(-0.35)
    tr.observe_stop(0, [-0.5, NEG_INF])
    assert not tr[0].exhaustive and tr[0].abandoned == 1
    assert certificate_rate(tr.sentences) == 0.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_certificate_tracker_does_not_sync_the_gpu_per_step():
    """Watching a GPU beam search must not stall it: steps only queue device work; the counts
    come back once, when a certificate is read."""
    tr = CertificateTracker(3)
    scores = torch.tensor([[-0.1, -0.2, NEG_INF], [-0.1, -0.2, -0.3], [0.0, NEG_INF, NEG_INF]]).cuda()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            tr.observe_step(torch.tensor([2, 0, 1]), scores, slots=2)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert [c.steps for c in tr.sentences] == [3, 3, 3]
    assert [c.exhaustive for c in tr.sentences] == [False, True, True]  # row 1 (3 finite > 2) is sentence 0
    assert tr[0].pruned_steps == 3 and tr[0].best_pruned == pytest.approx(-0.3)
    assert [c.max_support for c in tr.sentences] == [3, 1, 2]
    tr = CertificateTracker(3)
    torch.cuda.set_sync_debug_mode("error")
    try:  # the search's own pick, with the statistics (what the patched beam search does)
        for _ in range(3):
            tr.observe_stats(torch.tensor([2, 0, 1]), ops.beam_topk(scores, 2)[2], slots=2)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert [c.exhaustive for c in tr.sentences] == [False, True, True]
    assert tr[0].best_pruned == pytest.approx(-0.3) and [c.max_support for c in tr.sentences] == [3, 1, 2]


def test_certificates_from_the_picks_statistics_equal_those_from_the_scores():
    gen = torch.Generator().manual_seed(3)
    a, b = CertificateTracker(5), CertificateTracker(5)
    for step in range(4):
        scores = torch.randn(3, 12, generator=gen)
        scores[scores < 0.3 * step] = NEG_INF
        ids = torch.randperm(5, generator=gen)[:3]
        _, kept, stats = ops.beam_topk(scores, 2)
        a.observe_step(ids, scores, slots=2, kept=kept)
        b.observe_stats(ids, stats, slots=2)
    assert a.sentences == b.sentences


def test_certificate_rate():
    tr = CertificateTracker(4)
    tr.observe_step([0, 1, 2, 3], torch.tensor([[0.0, NEG_INF]] * 3 + [[-1.0, -1.0]]), slots=1)
    assert certificate_rate(tr.sentences) == pytest.approx(0.75)


def test_certificate_of_a_dense_model_is_a_clear_error():
    with pytest.raises(ValueError, match="sparse output layer"):
        require_sparse(torch.log_softmax(torch.randn(2, 5), -1))
    require_sparse(torch.log(torch.tensor([[1.0, 0.0]])))


def test_certificate_tracker_gives_the_same_answer_from_the_beam_top_k():
    """Given the positions the beam kept, the best pruned candidate is the best of the others."""
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 12, generator=g)
    scores[scores < -0.3] = NEG_INF
    scores[2, 5:] = NEG_INF
    a, b = CertificateTracker(6), CertificateTracker(6)
    ids = torch.tensor([5, 0, 3, 1])
    a.observe_step(ids, scores, slots=3)
    b.observe_step(ids, scores, slots=3, kept=torch.topk(scores, 3, dim=-1).indices)
    for x, y in zip(a.sentences, b.sentences):
        assert (x.best_pruned, x.pruned_steps, x.max_support, x.steps) == (y.best_pruned, y.pruned_steps,
                                                                          y.max_support, y.steps)
    assert any(c.pruned_steps for c in a.sentences) and a[4].steps == 0
