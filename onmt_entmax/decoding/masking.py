"""-inf masking for decoding with sparse distributions.

A sparse output layer gives p_v = 0 exactly, i.e. log p_v = -inf. Any token that decoding
forbids (min length, banned unk, n-gram blocking, a forced prefix) must get the same score:
a finite stand-in such as -65504 or -1e20 *beats* -inf under ``topk`` and revives
zero-probability hypotheses. Everything here writes -inf and nothing else.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

NEG_INF = float("-inf")


def forbid_(log_probs: Tensor, mask: Tensor) -> Tensor:
    """In place: log_probs[mask] = -inf (probability exactly 0). Returns log_probs."""
    return log_probs.masked_fill_(mask, NEG_INF)


def penalty_mask(apply_penalty: Callable[[Tensor], object], like: Tensor) -> Tensor:
    """Boolean mask of the entries an upstream in-place penalty touches.

    ``apply_penalty(t)`` is an upstream routine that lowers some entries of ``t`` by a finite
    stand-in (e.g. ``t[:, eos] = -65504`` or ``t -= 10000 * dropdowns``). Running it on zeros
    and reading back which entries went negative recovers *where* it forbids tokens without
    copying its logic; the caller then writes -inf there.
    """
    probe = torch.zeros_like(like)
    apply_penalty(probe)
    return probe < 0


def support_size(log_probs: Tensor, dim: int = -1) -> Tensor:
    """Number of tokens with nonzero probability: |{v : log p_v > -inf}| along ``dim`` (NaN not counted;
    one comparison, where ``isfinite`` is four elementwise operations)."""
    return (log_probs > float("-inf")).sum(dim)


def is_sparse(log_probs: Tensor) -> bool:
    """True when some probability is exactly zero (some log p = -inf)."""
    return bool(torch.isneginf(log_probs).any())
