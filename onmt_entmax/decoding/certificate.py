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

    The per-step statistics stay on the device of the scores (index updates, no host sync), so
    watching a GPU beam search costs no extra sync per step; they are read back once, when a
    certificate is first asked for after new steps (typically once per batch).
    """

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self._certs = [SentenceCertificate() for _ in range(batch_size)]
        self._stop_best = [NEG_INF] * batch_size  # best live score abandoned at a stop
        self._dev: dict | None = None  # steps, max_support, pruned_steps, best_pruned per sentence
        self._stale = False

    def observe_step(self, sentence_ids, candidate_scores: Tensor, slots: int) -> None:
        """One expansion step.

        sentence_ids: the (distinct) sentences of the rows, a list or an int tensor;
        candidate_scores: (B_alive, N) scores of every (hypothesis, token) candidate of the alive
        sentences, -inf where the probability is zero; ``slots`` of them are kept.
        """
        scores = candidate_scores.detach()
        dev = scores.device
        # OpenNMT-py keeps the sentence ids on the CPU: a non-blocking copy, no stream sync
        ids = torch.as_tensor(sentence_ids).long().to(dev, non_blocking=True)
        if self._dev is None:
            zeros = torch.zeros(self.batch_size, dtype=torch.long, device=dev)
            self._dev = {"steps": zeros, "max_support": zeros.clone(), "pruned_steps": zeros.clone(),
                         "best_pruned": torch.full((self.batch_size,), NEG_INF, device=dev)}
        d = self._dev
        n_finite = torch.isfinite(scores).sum(-1)
        pruned = n_finite > slots
        d["steps"][ids] += 1
        d["max_support"][ids] = torch.maximum(d["max_support"][ids], n_finite)
        d["pruned_steps"][ids] += pruned.long()
        if slots < scores.size(-1):  # best candidate not kept: the (slots+1)-th score
            kth = torch.topk(scores.float(), slots + 1, dim=-1).values[:, slots]
            kth = torch.where(pruned, kth, torch.full_like(kth, NEG_INF))
            d["best_pruned"][ids] = torch.maximum(d["best_pruned"][ids], kth)
        self._stale = True

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
        """Read the step statistics back (one transfer per statistic) into the certificates."""
        if not self._stale:
            return
        vals = {k: v.tolist() for k, v in self._dev.items()}
        for b, cert in enumerate(self._certs):
            cert.steps, cert.max_support = vals["steps"][b], vals["max_support"][b]
            cert.pruned_steps = vals["pruned_steps"][b]
            cert.best_pruned = max(vals["best_pruned"][b], self._stop_best[b])
        self._stale = False

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
