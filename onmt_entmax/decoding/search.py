"""Search over the nonzero support of a sparse sequence model.

A model is seen through one callable, ``next_log_probs(prefixes) -> (N, V) tensor``: for each
prefix (a tuple of token ids, BOS excluded) the log-probabilities of the next token, with
-inf for probability exactly 0. A sequence y = (y_1, .., y_T, EOS) has
log p(y) = sum_t log p(y_t | y_<t), and p(y) > 0 iff every factor is nonzero.

Lengths: ``max_length`` counts generated tokens *including* EOS (as OpenNMT-py's
``max_length``), so a hypothesis has at most ``max_length - 1`` tokens before EOS.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import Tensor

from onmt_entmax.errors import SupportTooLarge

from .certificate import CertificateTracker, SentenceCertificate

NEG_INF = float("-inf")
Prefix = tuple
NextLogProbs = Callable[[Sequence[Prefix]], Tensor]


class PrefixSteps:
    """Breadth-first steps over a ``NextLogProbs``: the rows of one depth are the children of rows of
    the previous one. A scorer with ``start``/``advance`` of its own (an adapter keeping the decoder's
    state per row, one decoder step a depth) replaces this one, which scores every prefix from BOS:
    O(length) decoder steps a row instead of O(1)."""

    def __init__(self, next_log_probs: NextLogProbs, batch_size: int = 64):
        self.next_log_probs, self.batch_size, self.prefixes = next_log_probs, batch_size, [()]

    def _rows(self) -> Tensor:
        out = []
        for start in range(0, len(self.prefixes), self.batch_size):
            chunk = self.prefixes[start : start + self.batch_size]
            out.append(_check_rows(self.next_log_probs(chunk), len(chunk)))
        return torch.cat(out)

    def start(self) -> Tensor:
        """(1, V): log p(. | BOS, x)."""
        self.prefixes = [()]
        return self._rows()

    def advance(self, parents: Sequence[int], tokens: Sequence[int]) -> Tensor:
        """(N, V): row i is log p(. | prefix of the last call's row ``parents[i]`` + ``tokens[i]``, x)."""
        self.prefixes = [self.prefixes[p] + (t,) for p, t in zip(parents, tokens)]
        return self._rows()


def stepped(next_log_probs, batch_size: int = 64):
    """What the searches score one depth at a time through: the scorer itself when it has
    ``start``/``advance`` of its own (an adapter's, stepping the decoder), else ``PrefixSteps`` over it."""
    return next_log_probs if hasattr(next_log_probs, "advance") else PrefixSteps(next_log_probs, batch_size)


@dataclass
class Support:
    """Every sequence with nonzero probability, most probable first."""

    sequences: list  # [(tokens without EOS, log p)]
    expansions: int = 0  # model calls' rows spent

    @property
    def mass(self) -> float:
        """Total probability covered, sum_y p(y); 1 up to rounding for a normalised model."""
        return float(sum(math.exp(s) for _, s in self.sequences))

    def __len__(self) -> int:
        return len(self.sequences)


def _check_rows(log_probs: Tensor, n: int) -> Tensor:
    if not isinstance(log_probs, Tensor) or log_probs.dim() != 2 or log_probs.size(0) != n:
        shape = tuple(log_probs.shape) if isinstance(log_probs, Tensor) else type(log_probs).__name__
        raise ValueError(f"next_log_probs must return a (N={n}, V) tensor of log-probabilities, got {shape}")
    if torch.isnan(log_probs).any():
        raise ValueError("next_log_probs returned NaN; zero probabilities must be -inf")
    return log_probs.detach().float().cpu()


def enumerate_support(
    next_log_probs: NextLogProbs,
    eos: int,
    max_length: int,
    cap: int = 100,
    batch_size: int = 64,
) -> Support:
    """All sequences y with p(y) > 0, breadth first, or SupportTooLarge.

    Each live prefix has p > 0, so (for a normalised model) it has at least one completion
    with p > 0: finished + live is a lower bound on |support|, and exceeding ``cap`` proves
    the support is larger than the cap. A live prefix at ``max_length`` means the support
    is longer than allowed (possibly infinite): also SupportTooLarge.

    ``next_log_probs`` is scored one depth at a time through its ``start``/``advance`` when it has
    them (``PrefixSteps`` says what they return), else through ``PrefixSteps``.
    """
    if cap < 1:
        raise ValueError(f"enumeration cap must be >= 1, got {cap}")
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    steps = stepped(next_log_probs, batch_size)
    live: list = [((), 0.0)]
    done: list = []
    lp = _check_rows(steps.start(), 1)
    rows = 1
    for depth in range(max_length):
        nxt: list = []
        parents: list = []
        for i, ((prefix, score), row) in enumerate(zip(live, lp)):
            for v in torch.nonzero(torch.isfinite(row)).flatten().tolist():
                s = score + float(row[v])
                if v == eos:
                    done.append((prefix, s))
                else:
                    nxt.append((prefix + (v,), s))
                    parents.append(i)
            if len(done) + len(nxt) > cap:
                raise SupportTooLarge(
                    f"more than cap={cap} sequences have nonzero probability "
                    f"(found {len(done)} finished and {len(nxt)} live at length {depth + 1}); "
                    "raise the enumeration cap or use beam search"
                )
        live = nxt
        if not live or depth == max_length - 1:
            break
        lp = _check_rows(steps.advance(parents, [p[-1] for p, _ in live]), len(live))
        rows += len(live)
    if live:
        raise SupportTooLarge(
            f"{len(live)} prefixes still have nonzero probability at max_length={max_length}; "
            "the support is longer than max_length (it may be infinite)"
        )
    done.sort(key=lambda x: -x[1])
    return Support(done, rows)


def _normalised(rows: Tensor) -> Tensor:
    """``rows`` unchanged, or ValueError where some p > 1: there a prefix's score no longer bounds its
    completions (an unnormalised alpha-ReLU output)."""
    if (rows > 1e-6).any():
        raise ValueError(
            "exact search needs normalised probabilities (every p <= 1) so that prefix scores bound "
            "their completions; this step has p > 1 (an unnormalised alpha-ReLU output?)"
        )
    return rows


def greedy_path(steps, eos: int, max_length: int) -> list:
    """The sequence that takes the most probable token at every step, [(tokens, log p)] if it ends with
    EOS within ``max_length`` tokens, else []: one row a step, a first lower bound for exact search."""
    row, prefix, score = _normalised(_check_rows(steps.start(), 1))[0], (), 0.0
    for _ in range(max_length):
        v = int(row.argmax())
        if not math.isfinite(float(row[v])):
            return []
        score += float(row[v])
        if v == eos:
            return [(prefix, score)]
        prefix += (v,)
        if len(prefix) == max_length:
            return []
        row = _normalised(_check_rows(steps.advance([0], [v]), 1))[0]
    return []


def exact_search(
    next_log_probs: NextLogProbs,
    eos: int,
    max_length: int,
    n_best: int = 1,
    max_expansions: int = 100_000,
    known: Sequence[tuple] = (),
    batch_size: int = 64,
) -> list:
    """The n_best most probable sequences, exactly: breadth first over the nonzero support, pruned.

    Pruning is sound because log p(y_<=t) is non-increasing in t (each factor p <= 1): a prefix whose
    score is at most the n-th best complete sequence found so far can only lead to worse sequences,
    and is dropped. The n best start from ``known`` complete sequences with their exact log p (the
    beam search's outputs, say) and from the greedy path (``greedy_path``), so that from the first
    depth on only prefixes more probable than those are expanded. Zero-probability tokens are never
    expanded, which is what makes this tractable for sparse models. One depth at a time: through the
    scorer's ``start``/``advance`` when it has them (one decoder step a row, from its parent's state),
    else through ``PrefixSteps``.
    Raises ValueError for an unnormalised step (some p > 1, e.g. alpha-ReLU), where the bound fails,
    and SupportTooLarge after ``max_expansions`` rows of the breadth-first search (the greedy path's
    at most ``max_length`` rows come on top).
    Returns [(tokens without EOS, log p)], best first (fewer if the support is smaller).
    """
    if n_best < 1:
        raise ValueError(f"n_best must be >= 1, got {n_best}")
    steps = stepped(next_log_probs, batch_size)
    best: dict = {}  # tokens -> log p, the n best complete sequences so far

    def bound() -> float:
        return min(best.values()) if len(best) == n_best else NEG_INF

    def offer(tokens: tuple, score: float) -> None:
        if math.isfinite(score) and score > bound() and tokens not in best:
            best[tokens] = score
            if len(best) > n_best:
                del best[min(best, key=best.get)]

    for tokens, score in [*known, *greedy_path(steps, eos, max_length)]:
        offer(tuple(tokens), float(score))
    live: list = [((), 0.0)]
    rows = _normalised(_check_rows(steps.start(), 1))
    expansions = 1
    for depth in range(max_length):
        nxt, parents = [], []
        for i, ((prefix, score), row) in enumerate(zip(live, rows)):
            for v in torch.nonzero(torch.isfinite(row)).flatten().tolist():
                s = score + float(row[v])
                if s <= bound():
                    continue
                if v == eos:
                    offer(prefix, s)
                elif depth + 1 < max_length:  # (room for EOS after it)
                    nxt.append((prefix + (v,), s))
                    parents.append(i)
        keep = [k for k, (_, s) in enumerate(nxt) if s > bound()]  # (the bound rose during this depth)
        live, parents = [nxt[k] for k in keep], [parents[k] for k in keep]
        if not live:
            break
        expansions += len(live)
        if expansions > max_expansions:
            raise SupportTooLarge(
                f"exact search exceeded max_expansions={max_expansions}; the problem is too large for exact search"
            )
        rows = _normalised(_check_rows(steps.advance(parents, [p[-1] for p, _ in live]), len(live)))
    return sorted(best.items(), key=lambda x: -x[1])


@dataclass
class BeamResult:
    hypotheses: list  # [(tokens without EOS, score)], best first
    certificate: SentenceCertificate


def beam_search(
    next_log_probs: NextLogProbs,
    eos: int,
    beam_size: int,
    max_length: int,
    n_best: int = 1,
) -> BeamResult:
    """Reference beam search with -inf semantics and Peters et al.'s certificate.

    Same rules as OpenNMT-py's BeamSearch (ratio 0, no penalties), kept small so the patched
    upstream search can be checked against it: the ``beam_size`` best finite candidates are
    kept; those ending in EOS move to the finished list and free their slot; the output is fixed
    when the best candidate of a step ends in EOS and >= n_best hypotheses are finished, or when
    nothing finite is left. Zero-probability hypotheses are never returned; at ``max_length``
    unfinished hypotheses are returned truncated (as upstream does).

    The certificate does not depend on ``n_best``: once the output is fixed, the search goes on
    (its output unchanged) while no step has pruned a finite candidate, until no live hypothesis is
    left (certified: the beam saw the whole support) or a step prunes one, or max_length cuts one.
    """
    tracker = CertificateTracker(1)
    live: list = [((), 0.0)]
    finished: list = []
    answer = None  # the output, once fixed

    def certifiable() -> bool:
        cert = tracker[0]
        return cert.pruned_steps == 0 and cert.truncated == 0

    for step in range(max_length):
        lp = _check_rows(next_log_probs([p for p, _ in live]), len(live))
        scores = torch.tensor([s for _, s in live]).unsqueeze(1) + lp
        flat = scores.flatten()
        tracker.observe_step([0], flat.unsqueeze(0), beam_size)
        k = min(beam_size, flat.numel())
        top_s, top_i = torch.topk(flat, k)
        picked = [(live[i // lp.size(1)][0], i % lp.size(1), s)
                  for s, i in zip(top_s.tolist(), top_i.tolist()) if s != NEG_INF]
        if not picked:
            break
        new_live = []
        for prefix, v, s in picked:
            if v == eos:
                finished.append((prefix, s))
            else:
                new_live.append((prefix + (v,), s))
        if step == max_length - 1:
            finished.extend(new_live)
            tracker.observe_stop(0, [], truncated=len(new_live))
            new_live = []
        if answer is None and ((picked[0][1] == eos and len(finished) >= n_best) or not new_live):
            answer = sorted(finished, key=lambda x: -x[1])[:n_best]
        if answer is not None and (not new_live or not certifiable()):
            tracker.observe_stop(0, [s for _, s in new_live])
            break
        live = new_live
    if answer is None:  # (nothing finite at all, or max_length reached before any stop)
        answer = sorted(finished, key=lambda x: -x[1])[:n_best]
    return BeamResult(answer, tracker[0])
