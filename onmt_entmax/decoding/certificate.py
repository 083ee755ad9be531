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

from dataclasses import dataclass, field
from typing import Iterable

import torch
from torch import Tensor

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


@dataclass
class CertificateTracker:
    """Collects certificates for a batch of sentences while a beam search runs."""

    batch_size: int
    sentences: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sentences = [SentenceCertificate() for _ in range(self.batch_size)]

    def observe_step(self, sentence_ids: Iterable[int], candidate_scores: Tensor, slots: int) -> None:
        """One expansion step.

        candidate_scores: (B_alive, N) scores of every (hypothesis, token) candidate of the
        alive sentences, -inf where the probability is zero; ``slots`` of them are kept.
        """
        scores = candidate_scores.detach()
        n_finite = torch.isfinite(scores).sum(-1).tolist()  # one device sync per step, not per row
        pruned_best = [NEG_INF] * len(n_finite)
        if slots < scores.size(-1) and max(n_finite, default=0) > slots:
            pruned_best = torch.topk(scores.float(), slots + 1, dim=-1).values[:, slots].tolist()
        for row, b in enumerate(sentence_ids):
            cert = self.sentences[int(b)]
            n = n_finite[row]
            cert.steps += 1
            cert.max_support = max(cert.max_support, n)
            if n > slots:
                cert.pruned_steps += 1
                cert.best_pruned = max(cert.best_pruned, pruned_best[row])

    def observe_stop(self, sentence_id: int, live_scores: Iterable[float], truncated: int = 0) -> None:
        """The search stopped for a sentence; ``live_scores`` are the unfinished hypotheses left."""
        cert = self.sentences[int(sentence_id)]
        live = [float(s) for s in live_scores if s != NEG_INF]
        cert.abandoned += len(live)
        if live:
            cert.best_pruned = max(cert.best_pruned, max(live))
        cert.truncated += truncated

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
