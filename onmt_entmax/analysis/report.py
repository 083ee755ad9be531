"""Per-sentence results as JSON lines, and the human summary printed at the end.

Each record is a plain dict (one JSON object per source sentence, in input order). Scores
are log-probabilities; a probability of exactly zero (log p = -inf) is written as null,
since JSON has no infinity. Known keys (all optional except "id"):

  id, n_best, n_hyps, hypotheses [{"text", "score"}], certified, optimal, pruned_steps,
  max_candidates, empty_log_prob, empty_wins, support {"size", "mass", "sequences"} or
  {"error"}, exact {"text", "score", "agrees"} or {"error"}, output_support, attended,
  prob_sum, forced [{"gold", "gold_prob", "support"}].
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


def summarize(records: Sequence[dict]) -> dict:
    """File-level numbers: certificate rate, empty-string rate, sparsity, enumeration, exact search."""
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
    empties = [r["empty_wins"] for r in recs if r.get("empty_wins") is not None]
    if empties:
        out["empty_wins_rate"] = sum(empties) / len(empties)
    for key in ("output_support", "attended", "prob_sum"):
        m = _mean([r.get(key) for r in recs])
        if m is not None:
            out[f"mean_{key}"] = m
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
        out["exact_agreement_rate"] = sum(e["agrees"] for e in ex) / len(ex)
    return out


def format_summary(summary: dict) -> str:
    """Human-readable lines for the end of onmt_translate."""
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
    if "empty_wins_rate" in summary:
        lines.append(f"[entmax] empty output more probable than the beam hypothesis: {pct(summary['empty_wins_rate'])}")
    if "mean_output_support" in summary:
        lines.append(f"[entmax] nonzero output probabilities per target token: {summary['mean_output_support']:.2f}")
    if "mean_attended" in summary:
        lines.append(f"[entmax] attended source tokens per target token: {summary['mean_attended']:.2f}")
    if "mean_prob_sum" in summary:
        lines.append(f"[entmax] mean per-step sum of output probabilities: {summary['mean_prob_sum']:.4f}")
    if "enumerated" in summary:
        msg = f"[entmax] support enumerated for {summary['enumerated']} sentences"
        if summary.get("enumeration_failed"):
            msg += f" ({summary['enumeration_failed']} exceeded the cap)"
        if "mean_support_size" in summary:
            msg += (f"; mean size {summary['mean_support_size']:.2f}, one single sequence in "
                    f"{pct(summary['single_sequence_rate'])}")
        lines.append(msg)
    if "exact_agreement_rate" in summary:
        lines.append(f"[entmax] beam best == exact search best: {pct(summary['exact_agreement_rate'])}")
    return "\n".join(lines)
