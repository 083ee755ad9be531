"""Exactness certificates for beam search (Peters et al. 2019, Sec. 4.1).

With a sparse output layer most continuations have probability exactly 0. Beam search is
*exhaustive* for a sentence when, at every step, the number of candidates with nonzero
probability did not exceed the free beam slots and no live hypothesis was left when the
search stopped: then the finished hypotheses are the whole support {y : p(y|x) > 0}, and the
best of them is the global optimum under any rescoring. This is Peters et al.'s certificate.

A weaker *optimality* certificate also holds when scores are log-probabilities without
length or coverage penalties: a prefix's log-probability upper-bounds that of all its
completions (log p <= 0 per step), so if the best finished score >= the best score ever
pruned or abandoned, the best hypothesis is the global optimum even though the beam did not
see everything.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
from torch import Tensor

from onmt_entmax.ops import beam_stats
from onmt_entmax.ops.beam_stats import stats_rows

from .masking import support_size

NEG_INF = float("-inf")


@dataclass
class SentenceCertificate:
    """Per-sentence record: was anything with nonzero probability left unexplored?"""

    pruned_steps: int = 0  # steps at which finite candidates exceeded the free slots
    abandoned: int = 0  # live finite hypotheses dropped when the search stopped
    truncated: int = 0  # hypotheses cut by max_length without EOS
    best_pruned: float = NEG_INF  # highest score among everything not followed
    max_support: int = 0  # most finite candidates seen at one step
    steps: int = 0

    @property
    def exhaustive(self) -> bool:
        """Peters et al.'s certificate: the beam covered every nonzero-probability hypothesis."""
        return self.pruned_steps == 0 and self.abandoned == 0 and self.truncated == 0

    def optimal(self, best_score: float) -> bool:
        """Best hypothesis provably optimal (valid only for plain summed log-probs)."""
        return self.exhaustive or (self.truncated == 0 and best_score >= self.best_pruned)


class CertificateTracker:
    """Collects certificates for a batch of sentences while a beam search runs.

    A step costs the host one operation (`ops.beam_stats`: count the finite candidates and take the
    best pruned one, one kernel on CUDA; or none: `observe_stats` takes them from the search's own
    top-k, `ops.beam_topk`) and remembering both with the step's sentence ids: decoding is
    host-bound, and the per-sentence bookkeeping (scatters by sentence id) is done for all steps at
    once, on the device, when a certificate is first asked for after new steps (typically once per
    batch, one transfer back).
    """

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self._certs = [SentenceCertificate() for _ in range(batch_size)]
        self._stop_best = [NEG_INF] * batch_size  # best live score abandoned at a stop
        self._pending: list = []  # (sentence ids, (rows, 2) float64: finite candidates, best not kept; slots)

    def observe_step(self, sentence_ids, candidate_scores: Tensor, slots: int, kept: Tensor | None = None) -> None:
        """One expansion step.

        sentence_ids: the (distinct) sentences of the rows, a list or an int tensor (kept as given:
        OpenNMT-py replaces its ``_batch_offset`` rather than changing it in place);
        candidate_scores: (B_alive, N) scores of every (hypothesis, token) candidate of the alive
        sentences, -inf where the probability is zero; ``slots`` of them are kept;
        kept: optionally the (B_alive, slots) positions the search kept (its top-k), which saves a
        second top-k here (a top-k on CUDA is some ten kernel launches; this is one).
        """
        scores = candidate_scores.detach()
        # the best candidate not kept, i.e. the (slots+1)-th score; it counts only where pruning happened
        if slots >= scores.size(-1):
            n_finite, best_left = support_size(scores), torch.full(scores.shape[:1], NEG_INF, device=scores.device)
        elif kept is not None:
            n_finite, best_left = beam_stats(scores, kept)  # (one kernel on CUDA)
        else:
            n_finite = support_size(scores)
            best_left = torch.topk(scores, slots + 1, dim=-1).values[:, slots]
        self.observe_stats(sentence_ids, stats_rows(n_finite, best_left), slots)

    def observe_stats(self, sentence_ids, stats: Tensor, slots: int) -> None:
        """One expansion step whose statistics are known: ``stats`` (B_alive, 2) float64 holds each
        row's number of finite candidates and its best candidate not kept (`ops.beam_topk`)."""
        self._pending.append((sentence_ids, stats, slots))

    def observe_stop(self, sentence_id: int, live_scores: Iterable[float], truncated: int = 0) -> None:
        """The search stopped for a sentence; ``live_scores`` are the unfinished hypotheses left."""
        b = int(sentence_id)
        live = [float(s) for s in live_scores if s != NEG_INF]
        cert = self._certs[b]
        cert.abandoned += len(live)
        if live:
            self._stop_best[b] = max(self._stop_best[b], max(live))
            cert.best_pruned = max(cert.best_pruned, self._stop_best[b])
        cert.truncated += truncated

    def _sync(self) -> None:
        """Fold the pending steps into the certificates: per sentence, steps += 1 per step,
        max_support = max n_finite, pruned_steps += [n_finite > slots], best_pruned = max best_left
        over pruned steps (scatters over all pending rows at once; one transfer back)."""
        if not self._pending:
            return
        step = torch.cat([s for _, s, _ in self._pending])
        dev = step.device
        n_finite, best_left = step[:, 0], step[:, 1]
        ids = torch.cat([torch.as_tensor(i).reshape(-1) for i, _, _ in self._pending]).long().to(dev)
        slots = torch.cat([torch.full((len(s),), n, dtype=torch.float64, device=dev) for _, s, n in self._pending])
        pruned = n_finite > slots
        zeros = torch.zeros(self.batch_size, dtype=torch.float64, device=dev)
        stats = torch.stack([
            zeros.index_add(0, ids, torch.ones_like(ids, dtype=zeros.dtype)),
            zeros.scatter_reduce(0, ids, n_finite, "amax", include_self=True),
            zeros.index_add(0, ids, pruned.to(zeros.dtype)),
            torch.full_like(zeros, NEG_INF).scatter_reduce(
                0, ids, torch.where(pruned, best_left, NEG_INF), "amax", include_self=True),
        ]).tolist()
        self._pending.clear()
        for b, cert in enumerate(self._certs):
            cert.steps += int(stats[0][b])
            cert.max_support = max(cert.max_support, int(stats[1][b]))
            cert.pruned_steps += int(stats[2][b])
            cert.best_pruned = max(cert.best_pruned, stats[3][b], self._stop_best[b])

    @property
    def sentences(self) -> list:
        self._sync()
        return self._certs

    def __getitem__(self, b: int) -> SentenceCertificate:
        return self.sentences[b]


def certificate_rate(certificates: Iterable[SentenceCertificate]) -> float:
    """Share of sentences whose beam search was exhaustive (their 87% / 79%)."""
    certs = list(certificates)
    if not certs:
        raise ValueError("certificate_rate needs at least one sentence")
    return sum(c.exhaustive for c in certs) / len(certs)


def require_sparse(log_probs: Tensor, what: str = "an exactness certificate") -> None:
    """Refuse certificates / enumeration for a distribution without exact zeros.

    With softmax every sequence has p > 0, so the support is never finite and no beam is ever
    exhaustive; asking for one is a configuration error, not a negative result.
    """
    if not bool(torch.isneginf(log_probs).any()):
        raise ValueError(
            f"{what} needs a sparse output layer (some probabilities exactly 0); this model gave "
            f"every one of the {log_probs.size(-1)} tokens nonzero probability (a dense model, e.g. softmax). "
            "Train with a sparse generator (sparsemax, entmax15, entmax_bisect, alpha_relu)."
        )
