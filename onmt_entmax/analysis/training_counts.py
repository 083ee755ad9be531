"""The sparsity numbers training reports (``out nnz``, ``attn nnz``), as sums carried by a toolkit's
statistics object (attribute ``entmax_sums``, which travels with it between GPUs) and its loss name.

``out nnz``  = mean number of nonzero output probabilities per target token,
``attn nnz`` = mean number of source tokens with nonzero attention per target token.
Counts stay on the device while a batch runs and are read back once (``settle``). No toolkit here:
each adapter calls these from its own loss and statistics hooks.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from onmt_entmax.modules import EntmaxGenerator, TransformationLoss


def attention_counts(attn: Tensor, keep: Tensor, time_first: bool = False) -> Optional[tuple[Tensor, Tensor]]:
    """(number of nonzero weights, rows) over the rows of non-pad target positions, as device
    counts (no boolean indexing: that would synchronise the host), or None if the shapes differ."""
    if time_first:
        attn = attn.transpose(0, 1)
    attn = attn.reshape(-1, attn.size(-1))
    if attn.size(0) != keep.numel():
        return None
    return ((attn > 0) & keep[:, None]).sum(), keep.sum()


def output_nonzeros(criterion, gen: EntmaxGenerator, scores: Tensor, target: Tensor, keep: Tensor,
                    padding_idx: int) -> Tensor:
    """Nonzero output probabilities over the non-pad rows: the support sizes the loss just computed
    for this target, else (another criterion) counted from pi(scores)."""
    support = criterion.support_of(target) if isinstance(criterion, TransformationLoss) \
        and criterion.ignore_index == padding_idx else None
    if support is not None:
        return support.sum()
    return ((gen.probs(scores.detach().float()) > 0) & keep[:, None]).sum()


def add_count(stats, name: str, count, rows) -> None:
    """Add ``count`` over ``rows`` target tokens to the sums ``name`` / its rows carried by ``stats``."""
    sums = stats.__dict__.setdefault("entmax_sums", {})
    sums[f"{name}_nnz"] = sums.get(f"{name}_nnz", 0.0) + count
    sums[f"{name}_rows"] = sums.get(f"{name}_rows", 0) + rows


def settle(sums: dict) -> None:
    """The counts this batch left on the device, read back in one transfer (one host sync a step,
    not one a count)."""
    pending = {k: v for k, v in sums.items() if isinstance(v, Tensor)}
    if pending:
        values = torch.stack([v.to(torch.float64) for v in pending.values()]).tolist()
        for name, value in zip(pending, values):
            sums[name] = value


def merge(into, other) -> None:
    """``into`` += ``other``: the sums and the loss name (statistics' ``update``)."""
    theirs = getattr(other, "entmax_sums", None)
    if theirs:
        mine = into.__dict__.setdefault("entmax_sums", {})
        for key, value in theirs.items():
            mine[key] = mine.get(key, 0) + value
    if getattr(other, "entmax_loss_name", None) is not None:
        into.entmax_loss_name = other.entmax_loss_name


def is_sparse_loss(stats) -> bool:
    name = getattr(stats, "entmax_loss_name", None)
    return name is not None and name != "xent"


def metrics(stats) -> dict[str, float]:
    """Mean sparsity numbers of ``stats`` (empty if nothing was counted)."""
    sums = getattr(stats, "entmax_sums", {})
    out = {}
    if sums.get("out_rows"):
        out["out nnz"] = sums["out_nnz"] / sums["out_rows"]
    if sums.get("attn_rows"):
        out["attn nnz"] = sums["attn_nnz"] / sums["attn_rows"]
    return out
