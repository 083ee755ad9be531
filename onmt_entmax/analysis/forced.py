"""Forced decoding: the nonzero support at every step of a given target (Peters et al. 2019,
Figure 2), and next-word suggestions that are exactly the plausible candidates.

Input is the teacher-forced log-probability matrix of one sentence, log p(v | y_<t, x) for
t = 1..T (T rows, V columns, -inf for probability 0), as any decoder produces in one pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor


@dataclass
class StepSupport:
    """One forced step: the gold token and every token with nonzero probability."""

    gold: str
    gold_prob: float
    support: list  # [(token, prob)], most probable first (at most max_support of them)
    nonzero: int | None = None  # |{v : p_v > 0}|, which a truncated support list undercounts

    @property
    def size(self) -> int:
        return len(self.support) if self.nonzero is None else self.nonzero

    def to_dict(self) -> dict:
        return {"gold": self.gold, "gold_prob": self.gold_prob, "support": [[w, p] for w, p in self.support],
                "size": self.size}

    @classmethod
    def from_dict(cls, d: dict) -> "StepSupport":
        """The inverse of ``to_dict`` (a record's ``forced`` entry; a null gold_prob is p = 0)."""
        return cls(gold=d["gold"], gold_prob=d["gold_prob"] or 0.0, support=[tuple(x) for x in d["support"]],
                   nonzero=d.get("size"))


def _tokens(ids: Sequence[int], vocab: Sequence[str] | None) -> list:
    return [vocab[i] if vocab is not None else int(i) for i in ids]


def support_sets(
    log_probs: Tensor,
    target: Sequence[int],
    vocab: Sequence[str] | None = None,
    max_support: int | None = None,
) -> list:
    """Per step t: the gold token y_t, p(y_t | y_<t) and {(v, p_v) : p_v > 0} sorted by p.

    log_probs: (T, V) teacher-forced log-probabilities; target: the T gold ids (EOS last).
    ``max_support`` truncates each listed support (for dense models, whose support is V).
    A gold token outside the support has gold_prob 0: the model rules the reference out.
    """
    if log_probs.dim() != 2 or log_probs.size(0) != len(target):
        raise ValueError(
            f"support_sets: log_probs must be (T, V) with T = len(target) = {len(target)}, got {tuple(log_probs.shape)}"
        )
    lp = log_probs.detach().float().cpu()
    steps = []
    for t, gold in enumerate(target):
        row = lp[t]
        ids = torch.nonzero(torch.isfinite(row)).flatten()
        order = torch.argsort(row[ids], descending=True)
        ids = ids[order]
        nonzero = ids.numel()
        if max_support is not None:
            ids = ids[:max_support]
        probs = row[ids].exp().tolist()
        steps.append(StepSupport(
            gold=_tokens([gold], vocab)[0],
            gold_prob=math.exp(float(row[gold])),
            support=list(zip(_tokens(ids.tolist(), vocab), probs)),
            nonzero=nonzero,
        ))
    return steps


def suggestions(next_log_probs: Tensor, vocab: Sequence[str] | None = None) -> list:
    """Next-word suggestions: exactly the tokens with nonzero probability, most probable first.

    next_log_probs: (V,) log p(. | prefix, x). For a sparse model this is a short list whose
    size adapts to the uncertainty (one word inside "the tree of life", several for synonyms).
    """
    if next_log_probs.dim() != 1:
        raise ValueError(f"suggestions expects one (V,) row of log-probabilities, got {tuple(next_log_probs.shape)}")
    row = next_log_probs.detach().float().cpu()
    ids = torch.nonzero(torch.isfinite(row)).flatten()
    ids = ids[torch.argsort(row[ids], descending=True)]
    return list(zip(_tokens(ids.tolist(), vocab), row[ids].exp().tolist()))


def format_support_sets(steps: Sequence[StepSupport], width: int = 6) -> str:
    """Text rendering of Figure 2: one line per step (its number, the support size, the ``width`` most
    probable tokens), the gold token marked with *; a gold token not among those shown is named at the end."""
    lines = []
    for t, s in enumerate(steps, 1):
        shown = s.support[:width]
        cells = [f"{'*' if w == s.gold else ''}{w} {p:.3f}" for w, p in shown]
        more = f" (+{s.size - len(shown)} more)" if s.size > len(shown) else ""
        if s.gold_prob <= 0:
            gold = f"  [gold {s.gold!r} has p = 0]"
        else:
            gold = "" if any(w == s.gold for w, _ in shown) else f"  [gold *{s.gold} {s.gold_prob:.3f}]"
        lines.append(f"{t:3d} |{s.size:4d}| " + " | ".join(cells) + more + gold)
    return "\n".join(lines)


def format_forced_record(record: dict, width: int = 6) -> str:
    """The log block of one sentence's forced decoding (``-forced_support``): a header with the
    reference's log p(y | x) = sum_t log p(y_t | y_<t, x), then ``format_support_sets``' lines.
    ``record``: a decoding record with ``id``, ``forced`` (``StepSupport.to_dict`` rows) and ``gold_log_prob``."""
    steps = [StepSupport.from_dict(d) for d in record["forced"]]
    lp = record.get("gold_log_prob")
    zero = [t for t, s in enumerate(steps, 1) if s.gold_prob <= 0]
    if zero:
        total = f"log p = -inf: step {zero[0]} gives its token probability 0"
    else:
        total = f"log p = {lp:.3f}" if lp is not None else "log p unknown"
    return (f"[entmax] forced decoding of the reference of sentence {record['id']} ({total}); per step: "
            f"|support|, the most probable tokens, * the reference's\n" + format_support_sets(steps, width))
