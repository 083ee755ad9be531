"""Forced-decoding supports, empty-string check, sparsity statistics, heatmap, JSON report."""
import json
import math

import pytest
import torch

from onmt_entmax.analysis import (
    SparsityStats,
    attention_heatmap,
    empty_beats_beam,
    empty_rate,
    format_summary,
    format_support_sets,
    outlined_cells,
    read_jsonl,
    summarize,
    suggestions,
    support_sets,
    write_jsonl,
)

NEG_INF = float("-inf")
VOCAB = ["</s>", "the", "tree", "of", "life", "view", "look", "glimpse"]


def _lp(rows):
    return torch.log(torch.tensor(rows))


def test_support_sets_list_exactly_the_nonzero_tokens_per_step():
    lp = _lp([[0, 0, 0, 0, 0, 0.5, 0.3, 0.2], [0, 1, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]])
    steps = support_sets(lp, target=[6, 1, 0], vocab=VOCAB)
    assert [s.size for s in steps] == [3, 1, 1]
    assert steps[0].support == [("view", pytest.approx(0.5)), ("look", pytest.approx(0.3)),
                                ("glimpse", pytest.approx(0.2))]
    assert steps[0].gold == "look" and steps[0].gold_prob == pytest.approx(0.3)
    text = format_support_sets(steps)
    assert "*look" in text and text.count("\n") == 2


def test_gold_outside_the_support_is_reported_with_probability_zero():
    steps = support_sets(_lp([[0.0, 1.0, 0, 0, 0, 0, 0, 0]]), target=[2], vocab=VOCAB)
    assert steps[0].gold_prob == 0.0
    assert "p = 0" in format_support_sets(steps)


def test_support_sets_rejects_misaligned_target():
    with pytest.raises(ValueError, match="len\\(target\\)"):
        support_sets(torch.zeros(2, 8), target=[1])


def test_suggestions_are_the_support_most_probable_first():
    got = suggestions(_lp([0, 0.1, 0, 0, 0, 0.6, 0.3, 0]), VOCAB)
    assert [w for w, _ in got] == ["view", "look", "the"]


def test_empty_string_check():
    assert empty_beats_beam(math.log(0.3), math.log(0.1))
    assert not empty_beats_beam(NEG_INF, math.log(1e-9))  # sparse: p(EOS first) = 0 never wins
    assert empty_rate([True, False, False, False]) == 0.25


def test_sparsity_statistics_count_nonzeros_per_target_token():
    st = SparsityStats()
    lp = _lp([[0.5, 0.5, 0, 0], [1.0, 0, 0, 0]])
    attn = torch.tensor([[0.7, 0.3, 0.0, 0.0], [1.0, 0.0, 0.0, 0.5]])  # column 3 is padding
    per = st.add(lp, attn, src_len=3)
    assert per["output_support"] == 1.5 and per["attended"] == 1.5
    st.add(_lp([[0.25, 0.25, 0.25, 0.25]]), torch.tensor([[0.2, 0.2, 0.6, 0.0]]), src_len=3)
    s = st.summary()
    assert s["mean_output_support"] == pytest.approx((2 + 1 + 4) / 3)
    assert s["mean_attended"] == pytest.approx((2 + 1 + 3) / 3)
    assert s["prob_sum_mean"] == pytest.approx(1.0)


def test_probability_sums_measure_alpha_relu_self_normalisation():
    st = SparsityStats()
    st.add(torch.log(torch.tensor([[0.6, 0.6, 0.0], [0.9, 0.1, 0.2]])))
    s = st.summary()
    assert s["prob_sum_mean"] == pytest.approx(1.2) and s["prob_sum_std"] == pytest.approx(0.0, abs=1e-6)


def test_heatmap_png_outlines_nonzero_cells(tmp_path):
    attn = torch.tensor([[0.7, 0.3, 0.0], [0.0, 0.0, 1.0]])
    path = attention_heatmap(attn, ["a", "b", "c"], ["x", "</s>"], str(tmp_path / "h.png"), title="t")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert outlined_cells(attn) == 3
    with pytest.raises(ValueError, match="len\\(tgt_tokens\\)"):
        attention_heatmap(attn, ["a"], ["x"], str(tmp_path / "bad.png"))


def test_jsonl_writes_zero_probability_as_null_and_summary(tmp_path):
    recs = [
        {"id": 0, "n_best": 2, "n_hyps": 1, "certified": True, "optimal": True, "empty_log_prob": NEG_INF,
         "empty_wins": False, "output_support": 2.0, "attended": 1.0,
         "support": {"size": 1, "mass": 1.0}, "exact": {"agrees": True}},
        {"id": 1, "n_best": 2, "n_hyps": 2, "certified": False, "optimal": True, "empty_log_prob": -3.0,
         "empty_wins": True, "output_support": 4.0, "attended": 3.0,
         "support": {"error": "more than cap=2"}, "exact": {"agrees": False}},
    ]
    path = tmp_path / "r.jsonl"
    write_jsonl(recs, str(path))
    back = read_jsonl(str(path))
    assert back[0]["empty_log_prob"] is None and back[1]["empty_log_prob"] == -3.0
    json.loads(path.read_text().splitlines()[0])  # strict JSON (no -Infinity)
    s = summarize(back)
    assert s["certified_rate"] == 0.5 and s["empty_wins_rate"] == 0.5 and s["fewer_than_n_best"] == 1
    assert s["mean_output_support"] == 3.0 and s["enumerated"] == 1 and s["enumeration_failed"] == 1
    assert s["exact_agreement_rate"] == 0.5
    # one single sequence among the enumerated supports, and among every sentence asked (the one
    # beyond the cap has more than one): Peters et al.'s share counts the latter
    assert s["single_sequence_rate"] == 1.0 and s["single_sequence_share"] == 0.5
    text = format_summary(s)
    assert "1/2 = 50.0%" in text and "fewer nonzero-probability hypotheses than n_best" in text
