"""Forced-decoding supports, empty-string check, sparsity statistics, heatmap, JSON report."""
import json
import math

import numpy as np
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
    suggestions,
    summarize,
    support_sets,
    write_jsonl,
)
from onmt_entmax.analysis.forced import StepSupport

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


def test_a_truncated_support_keeps_its_size_and_a_gold_beyond_the_shown_tokens_is_named():
    """A dense step (support V) listed with max_support 2: the size is still V, in the report and the log."""
    lp = torch.log_softmax(torch.arange(8.0), dim=0).view(1, 8)
    steps = support_sets(lp, target=[0], vocab=VOCAB, max_support=2)
    assert len(steps[0].support) == 2 and steps[0].size == 8
    assert StepSupport.from_dict(json.loads(json.dumps(steps[0].to_dict()))).size == 8
    line = format_support_sets(steps, width=2)
    assert "|   8|" in line and "+6 more" in line and f"*</s> {steps[0].gold_prob:.3f}" in line


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
    from matplotlib.patches import Rectangle

    from drawn import capture
    from test_alphas import _nontrivial_png

    attn = torch.tensor([[0.7, 0.3, 0.0], [0.0, 0.0, 1.0]])
    with capture() as figs:
        path = attention_heatmap(attn, ["a", "b", "c"], ["x", "</s>"], str(tmp_path / "h.png"), title="t")
    _nontrivial_png(path, min_bytes=2000)
    ax = figs[path].axes[0]
    assert torch.equal(torch.tensor(ax.images[0].get_array()), attn)  # the weights, unscaled
    frames = sorted((round(r.get_y() + 0.5), round(r.get_x() + 0.5)) for r in ax.patches if isinstance(r, Rectangle))
    assert frames == [(0, 0), (0, 1), (1, 2)] and outlined_cells(attn) == 3  # exactly the nonzero cells
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "</s>"] and ax.get_title() == "t"
    with pytest.raises(ValueError, match="len\\(tgt_tokens\\)"):
        attention_heatmap(attn, ["a"], ["x"], str(tmp_path / "bad.png"))


def test_a_heatmap_title_longer_than_the_figure_is_wrapped_inside_it(tmp_path):
    """A Transformer's title names the head and layer drawn; on a three-token source it is wider than the
    figure, which would cut it at both edges: it wraps, every word kept, and stays inside."""
    from drawn import capture, inside_figure

    title = "sentence 2: head 1 of 2 of the context attention of decoder layer 1 (the last)"
    with capture() as figs:
        path = attention_heatmap(torch.eye(3), ["a", "b", "c"], ["x", "y", "</s>"], str(tmp_path / "t.png"),
                                 title=title)
    ax = figs[path].axes[0]
    assert ax.get_title().split() == title.split() and inside_figure(ax.title)


def test_jsonl_writes_zero_probability_as_null_and_summary(tmp_path):
    recs = [
        {"id": 0, "n_best": 2, "n_hyps": 1, "certified": True, "optimal": True, "empty_log_prob": NEG_INF,
         "empty_wins": False, "target_tokens": 1, "output_support": 2.0, "attended": 1.0,
         "support": {"size": 1, "mass": 1.0}, "exact": {"agrees": True}},
        {"id": 1, "n_best": 2, "n_hyps": 2, "certified": False, "optimal": True, "empty_log_prob": -3.0,
         "empty_wins": True, "target_tokens": 1, "output_support": 4.0, "attended": 3.0,
         "support": {"error": "more than cap=2"}, "exact": {"agrees": False, "cause": "search"}},
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


def test_summaries_are_per_target_token_not_means_of_sentence_means():
    """A 1-token sentence with 4 nonzero probabilities and a 3-token one with 1 each: 7 / 4 = 1.75 per
    target token (the mean of the two sentence means would say 2.5)."""
    st = SparsityStats()
    one = st.add(_lp([[0.25, 0.25, 0.25, 0.25]]), torch.tensor([[0.5, 0.5, 0.0]]))
    three = st.add(_lp([[1.0, 0.0, 0.0, 0.0]] * 3), torch.tensor([[1.0, 0.0, 0.0]] * 3))
    assert (one["target_tokens"], three["target_tokens"]) == (1, 3)
    s = summarize([{"id": 1, **one}, {"id": 2, **three}])
    assert s["mean_output_support"] == 1.75 == st.summary()["mean_output_support"]
    assert s["mean_attended"] == 1.25 and s["output_support_tokens"] == 4
    text = format_summary(s, attention_of="head 1 of 8 of the context attention of decoder layer 6 (the last)")
    assert "nonzero output probabilities per target token: 1.75 (best hypotheses, 4 target tokens" in text
    assert "attended source tokens per target token: 1.25 (4 target tokens; head 1 of 8 of the context" in text


def test_one_definition_of_the_per_step_probability_sum():
    """alpha-ReLU's self-normalisation statistic: mean and std over every target token of the file,
    the same from the per-sentence records as from all the steps at once."""
    st = SparsityStats()
    recs = [{"id": i + 1, **st.add(torch.log(torch.tensor(rows)))} for i, rows in
            enumerate([[[0.6, 0.6, 0.0]], [[0.9, 0.1, 0.2], [1.5, 0.0, 0.0], [0.5, 0.2, 0.0]]])]
    s, whole = summarize(recs), st.summary()
    assert s["mean_prob_sum"] == pytest.approx(whole["prob_sum_mean"]) == pytest.approx((1.2 + 1.2 + 1.5 + 0.7) / 4)
    assert s["std_prob_sum"] == pytest.approx(whole["prob_sum_std"]) == pytest.approx(
        float(np.std([1.2, 1.2, 1.5, 0.7])))
    lines = [line for line in format_summary(s).splitlines() if "sum of output probabilities" in line]
    assert lines == [f"[entmax] per-step sum of output probabilities: mean {s['mean_prob_sum']:.4f}, std "
                     f"{s['std_prob_sum']:.4f} over 4 target tokens"]


def test_exact_search_disagreements_are_split_by_cause_and_cut_hypotheses_counted():
    recs = [{"id": i, "n_best": 1, "n_hyps": 1, "hypotheses": [{"text": "x", "score": -1.0, "cut": cut}],
             "exact": {"agrees": cause is None, "cause": cause}}
            for i, (cause, cut) in enumerate([(None, False), ("length_penalty", False), ("length_penalty", False),
                                              ("search", False), ("cut", True)])]
    recs.append({"id": 9, "n_best": 1, "n_hyps": 1, "hypotheses": [], "exact": {"error": "exceeded max_expansions"},
                 "gold_score": None})
    recs[0]["gold_score"] = -2.0
    s = summarize(recs)
    assert s["exact_compared"] == 5 and s["exact_agreement_rate"] == 0.2 and s["exact_failed"] == 1
    assert s["exact_mismatch_causes"] == {"length_penalty": 2, "search": 1, "cut": 1, "tie": 0, "unsplit": 0}
    assert (s["best_cut"], s["any_cut"], s["gold_zero"], s["gold_scored"]) == (1, 1, 1, 2)
    text = format_summary(s, length_penalty="avg")
    assert ("beam best == exact-search best (the most probable complete output, max log p(y|x) without length "
            "penalty): 1/5 = 20.0%; the 4 others: 2 the beam's ranking (-length_penalty avg) prefers its best, 1 "
            "search errors (a more probable output was pruned), 1 beam best cut at -max_length") in text
    assert "1 sentences have hypotheses cut at -max_length before EOS (the best one in 1)" in text
    assert "GOLD SCORE is -inf (GOLD PPL inf) because 1 of 2 references contain a token the model gives" in text
