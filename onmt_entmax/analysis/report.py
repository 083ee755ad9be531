"""Per-sentence results as JSON lines, and the human summary printed at the end.

Each record is a plain dict (one JSON object per source sentence, in input order). Scores
are log-probabilities; a probability of exactly zero (log p = -inf) is written as null,
since JSON has no infinity. Known keys (all optional except "id"):

  id (the -src line number), n_best, n_hyps, hypotheses [{"text", "score", "cut"}] (cut: stopped by
  -max_length before EOS, so not a complete output), certified, optimal, pruned_steps, max_candidates,
  empty_log_prob, beam_log_prob, empty_wins, support {"size", "mass", "sequences"} or {"error"},
  exact {"text", "score", "agrees", "beam_log_prob", "cause"} or {"error"}, target_tokens,
  output_support, attended, prob_sum, prob_sum_std (over the sentence's target_tokens steps),
  gold_score, forced [{"gold", "gold_prob", "support", "size"}] (size: the step's number of nonzero
  probabilities, of which support lists at most -forced_max_support), gold_log_prob.

File-level numbers (``summarize``) are per target token where they say so: a sentence weighs by its
number of steps, never a mean of sentence means. docs/decoding.md defines each printed line.
"""
from __future__ import annotations

import json
import math
from typing import IO, Iterable, Sequence


def _clean(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # 0-dim tensors
        return _clean(x.item())
    return x


def write_jsonl(records: Iterable[dict], out: IO[str] | str) -> None:
    """One JSON object per line; -inf / nan become null."""
    if isinstance(out, str):
        with open(out, "w", encoding="utf-8") as f:
            write_jsonl(records, f)
        return
    for r in records:
        out.write(json.dumps(_clean(r), ensure_ascii=False) + "\n")


def read_jsonl(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _mean(xs: Sequence[float]):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _per_token(recs: Sequence[dict], key: str):
    """(mean of ``key`` over all target tokens, number of tokens): each sentence's mean weighted by
    its ``target_tokens``."""
    pairs = [(r["target_tokens"], r[key]) for r in recs if r.get(key) is not None and r.get("target_tokens")]
    tokens = sum(t for t, _ in pairs)
    return (sum(t * v for t, v in pairs) / tokens, tokens) if tokens else (None, 0)


def _pooled_std(recs: Sequence[dict], mean: float) -> float:
    """Population std over all target tokens from each sentence's mean, std and count."""
    rows = [r for r in recs if r.get("prob_sum") is not None and r.get("target_tokens")]
    tokens = sum(r["target_tokens"] for r in rows)
    second = sum(r["target_tokens"] * (r.get("prob_sum_std", 0.0) ** 2 + r["prob_sum"] ** 2) for r in rows) / tokens
    return math.sqrt(max(second - mean * mean, 0.0))


EXACT_CAUSES = ("length_penalty", "search", "cut", "tie", "unsplit")


def summarize(records: Sequence[dict]) -> dict:
    """File-level numbers: certificate rate, empty-string rate, sparsity per target token,
    enumeration, exact search and the causes of its disagreements, cut hypotheses, gold scores."""
    recs = list(records)
    out: dict = {"sentences": len(recs)}
    certified = [r["certified"] for r in recs if r.get("certified") is not None]
    if certified:
        out["certified_rate"] = sum(certified) / len(certified)
        out["certified"] = sum(certified)
    optimal = [r["optimal"] for r in recs if r.get("optimal") is not None]
    if optimal:
        out["optimal_rate"] = sum(optimal) / len(optimal)
    short = [r for r in recs if r.get("n_hyps") is not None and r["n_hyps"] < r.get("n_best", 1)]
    out["fewer_than_n_best"] = len(short)
    out["no_hypothesis"] = sum(1 for r in recs if r.get("n_hyps") == 0)
    out["best_cut"] = sum(1 for r in recs if r.get("hypotheses") and r["hypotheses"][0].get("cut"))
    out["any_cut"] = sum(1 for r in recs if any(h.get("cut") for h in r.get("hypotheses", ())))
    empties = [r["empty_wins"] for r in recs if r.get("empty_wins") is not None]
    if empties:
        out["empty_wins_rate"] = sum(empties) / len(empties)
    for key in ("output_support", "attended", "prob_sum"):
        mean, tokens = _per_token(recs, key)
        if mean is not None:
            out[f"mean_{key}"] = mean
            out[f"{key}_tokens"] = tokens
    if "mean_prob_sum" in out:
        out["std_prob_sum"] = _pooled_std(recs, out["mean_prob_sum"])
    sup = [r["support"] for r in recs if isinstance(r.get("support"), dict)]
    if sup:
        ok = [s for s in sup if "size" in s]
        out["enumerated"] = len(ok)
        out["enumeration_failed"] = len(sup) - len(ok)
        if ok:
            out["mean_support_size"] = _mean([s["size"] for s in ok])
            out["single_sequence_rate"] = sum(s["size"] == 1 for s in ok) / len(ok)
            # over every sentence asked (a support beyond the cap is not a single sequence): the share
            # Peters et al. report (§4.1: "all probability mass into a single predicted sequence")
            out["single_sequence_share"] = sum(s["size"] == 1 for s in ok) / len(sup)
    ex = [r["exact"] for r in recs if isinstance(r.get("exact"), dict) and "agrees" in r["exact"]]
    if ex:
        out["exact_compared"] = len(ex)
        out["exact_agreement_rate"] = sum(e["agrees"] for e in ex) / len(ex)
        out["exact_mismatch_causes"] = {c: sum(1 for e in ex if not e["agrees"] and e.get("cause") == c)
                                        for c in EXACT_CAUSES}
        out["exact_failed"] = sum(1 for r in recs if isinstance(r.get("exact"), dict) and "error" in r["exact"])
    golds = [r["gold_score"] for r in recs if "gold_score" in r]
    if golds:
        out["gold_zero"] = sum(1 for g in golds if g is None or g == float("-inf"))
        out["gold_scored"] = len(golds)
    return out


def format_summary(summary: dict, attention_of: str | None = None, length_penalty: str | None = None) -> str:
    """Human-readable lines for the end of onmt_translate (docs/decoding.md defines each).
    ``attention_of``: which attention the attended-token count reads (e.g. a Transformer's head);
    ``length_penalty``: the -length_penalty the beam ranked with, named in the exact-search line."""
    n = summary.get("sentences", 0)
    lines = [f"[entmax] {n} sentences"]

    def pct(x):
        return f"{100 * x:.1f}%"

    if "certified_rate" in summary:
        lines.append(f"[entmax] exactness certificate (beam covered every nonzero-probability hypothesis): "
                     f"{summary['certified']}/{n} = {pct(summary['certified_rate'])}")
    if "optimal_rate" in summary:
        lines.append(f"[entmax] best hypothesis provably optimal: {pct(summary['optimal_rate'])}")
    if summary.get("fewer_than_n_best"):
        lines.append(f"[entmax] {summary['fewer_than_n_best']} sentences have fewer nonzero-probability "
                     f"hypotheses than n_best (only those are written)")
    if summary.get("no_hypothesis"):
        lines.append(f"[entmax] {summary['no_hypothesis']} sentences have no hypothesis with nonzero probability "
                     "under the decoding constraints (an empty line is written)")
    if summary.get("any_cut"):
        lines.append(f"[entmax] {summary['any_cut']} sentences have hypotheses cut at -max_length before EOS "
                     f"(the best one in {summary['best_cut']}): prefixes, not complete outputs ('cut' in the report)")
    if "empty_wins_rate" in summary:
        lines.append(f"[entmax] empty output more probable than the beam hypothesis: {pct(summary['empty_wins_rate'])}")
    if "mean_output_support" in summary:
        lines.append(f"[entmax] nonzero output probabilities per target token: {summary['mean_output_support']:.2f} "
                     f"(best hypotheses, {summary['output_support_tokens']} target tokens, EOS included)")
    if "mean_attended" in summary:
        which = f"; {attention_of}" if attention_of else ""
        lines.append(f"[entmax] attended source tokens per target token: {summary['mean_attended']:.2f} "
                     f"({summary['attended_tokens']} target tokens{which})")
    if "mean_prob_sum" in summary:
        lines.append(f"[entmax] per-step sum of output probabilities: mean {summary['mean_prob_sum']:.4f}, std "
                     f"{summary['std_prob_sum']:.4f} over {summary['prob_sum_tokens']} target tokens")
    if "enumerated" in summary:
        msg = f"[entmax] support enumerated for {summary['enumerated']} sentences"
        if summary.get("enumeration_failed"):
            msg += f" ({summary['enumeration_failed']} exceeded the cap)"
        if "mean_support_size" in summary:
            msg += (f"; mean size {summary['mean_support_size']:.2f}, one single sequence in "
                    f"{pct(summary['single_sequence_rate'])}")
        lines.append(msg)
    if "exact_agreement_rate" in summary:
        k = summary["exact_compared"]
        agree = round(summary["exact_agreement_rate"] * k)
        msg = (f"[entmax] beam best == exact-search best (the most probable complete output, max log p(y|x) "
               f"without length penalty): {agree}/{k} = {pct(summary['exact_agreement_rate'])}")
        causes = summary.get("exact_mismatch_causes", {})
        if k - agree:
            named = {"length_penalty": f"the beam's ranking (-length_penalty {length_penalty or '?'}) prefers its "
                                       "best", "search": "search errors (a more probable output was pruned)",
                     "cut": "beam best cut at -max_length", "tie": "equally probable outputs",
                     "unsplit": "not split (coverage penalty)"}
            msg += "; the " + str(k - agree) + " others: " + ", ".join(
                f"{causes[c]} {named[c]}" for c in EXACT_CAUSES if causes.get(c))
        if summary.get("exact_failed"):
            msg += f"; {summary['exact_failed']} sentences not compared (exact search gave up)"
        lines.append(msg)
    if summary.get("gold_zero"):
        lines.append(f"[entmax] GOLD SCORE is -inf (GOLD PPL inf) because {summary['gold_zero']} of "
                     f"{summary['gold_scored']} references contain a token the model gives probability exactly 0: a "
                     "sparse output layer rules those references out (log 0 = -inf); -forced_support shows the step")
    return "\n".join(lines)
