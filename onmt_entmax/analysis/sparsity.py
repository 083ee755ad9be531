"""Sparsity statistics per target token (Table 3 of Peters et al. 2019) and the alpha-ReLU
self-normalisation statistic (Fig. 7 of "Speeding Up Entmax").

- output support: |{v : p(v | y_<t, x) > 0}| averaged over target tokens;
- attended source tokens: |{j <= |x| : a_tj > 0}| averaged over target tokens;
- probability sum: sum_v p_v per step; 1 for normalised mappings, a spread around ~1.1-1.2
  for alpha-ReLU, whose outputs are not normalised.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import Tensor


def output_support(log_probs: Tensor) -> Tensor:
    """(T, V) log-probs -> (T,) number of nonzero probabilities per step."""
    return torch.isfinite(log_probs).sum(-1)


def attended(attn: Tensor, src_len: Optional[int] = None) -> Tensor:
    """(T, S) attention -> (T,) number of source positions with nonzero weight (within src_len)."""
    a = attn if src_len is None else attn[..., :src_len]
    return (a > 0).sum(-1)


def probability_sums(log_probs: Tensor) -> Tensor:
    """(T, V) log-scores -> (T,) sum_v exp(score): the self-normalisation statistic."""
    return torch.logsumexp(log_probs.float(), -1).exp()


@dataclass
class SparsityStats:
    """Accumulates per-token statistics over a file."""

    tokens: int = 0
    support_total: int = 0
    attn_tokens: int = 0
    attended_total: int = 0
    sums: list = field(default_factory=list)

    def add(self, log_probs: Tensor, attn: Optional[Tensor] = None, src_len: Optional[int] = None) -> dict:
        """Add one sentence (T target steps); returns its own numbers: the number of steps
        ``target_tokens`` and, over them, the means and the (population) std of the sum, so that
        file-level numbers are per target token (``report.summarize``), not means of sentence means."""
        sup = output_support(log_probs)
        sums = probability_sums(log_probs).double()
        self.tokens += sup.numel()
        self.support_total += int(sup.sum())
        self.sums.extend(sums.tolist())
        out = {"target_tokens": sup.numel(),
               "output_support": sup.double().mean().item() if sup.numel() else 0.0,
               "prob_sum": sums.mean().item() if sums.numel() else 0.0,
               "prob_sum_std": sums.std(unbiased=False).item() if sums.numel() else 0.0}
        if attn is not None:
            att = attended(attn, src_len)
            self.attn_tokens += att.numel()
            self.attended_total += int(att.sum())
            out["attended"] = att.double().mean().item() if att.numel() else 0.0
        return out

    def summary(self) -> dict:
        n = len(self.sums)
        mean = sum(self.sums) / n if n else float("nan")
        std = math.sqrt(sum((s - mean) ** 2 for s in self.sums) / n) if n else float("nan")
        return {
            "target_tokens": self.tokens,
            "mean_output_support": self.support_total / self.tokens if self.tokens else float("nan"),
            "mean_attended": self.attended_total / self.attn_tokens if self.attn_tokens else None,
            "prob_sum_mean": mean,
            "prob_sum_std": std,
        }
