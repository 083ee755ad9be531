"""Head diversity per layer (Correia et al. 2019): mean Jensen-Shannon divergence between the heads.

For one query with head distributions p_1..p_H over the same keys (natural log, 0 log 0 = 0):

    JS(p_1, ..., p_H) = S(1/H sum_h p_h) - 1/H sum_h S(p_h),   S(p) = -sum_j p_j log p_j,

0 when all heads attend alike, at most log H. The diversity of a layer is the mean of JS over all
(non-padding) queries of a data set. Sparse heads give exact zeros, so disagreements count fully.
Capturing attention from a checkpoint is OpenNMT-py work: ``onmt_entmax.onmt.decoding.teacher_forcing``
feeds ``HeadDiversity.add`` and has the ``onmt-entmax-head-diversity`` command.
"""
from __future__ import annotations

from typing import Mapping, Optional

import torch
from torch import Tensor

from .alphas import KINDS, TITLES, Site, site_order
from .figures import pyplot, save_figure


def shannon_entropy(p: Tensor, dim: int = -1) -> Tensor:
    """S(p) = -sum p log p along ``dim`` with 0 log 0 = 0 (float64 inside)."""
    p = p.double()
    return -torch.where(p > 0, p * p.clamp_min(1e-300).log(), torch.zeros_like(p)).sum(dim)


def js_divergence(p: Tensor, head_dim: int = -2) -> Tensor:
    """Generalized Jensen-Shannon divergence among the distributions along ``head_dim`` (last dim = keys)."""
    if p.dim() < 2:
        raise ValueError(f"js_divergence: p must have a head and a key dimension, got shape {tuple(p.shape)}")
    p = p.double()
    mix = p.mean(head_dim, keepdim=True)
    # entropies drop the key dim; head_dim then indexes the entropy tensors (negative dims shift by one)
    hd = head_dim if head_dim >= 0 else head_dim + 1
    return shannon_entropy(mix).squeeze(hd) - shannon_entropy(p).mean(hd)


def per_query_js(attn: Tensor, query_mask: Optional[Tensor] = None) -> Tensor:
    """attn (B, H, T_q, T_k) -> JS of every kept query (1-D); ``query_mask`` (B, T_q), True = keep."""
    if attn.dim() != 4:
        raise ValueError(f"attn must be (batch, heads, queries, keys), got shape {tuple(attn.shape)}")
    js = js_divergence(attn.transpose(1, 2), head_dim=-2)  # (B, T_q)
    if query_mask is not None:
        if query_mask.shape != js.shape:
            raise ValueError(f"query_mask must be (batch, queries) = {tuple(js.shape)}, got {tuple(query_mask.shape)}")
        js = js[query_mask.bool()]
    return js.reshape(-1)


class HeadDiversity:
    """Accumulates the per-layer mean JS over batches: ``add(site, attn, query_mask)``, then ``result()``."""

    def __init__(self) -> None:
        self.sums: dict[Site, float] = {}
        self.counts: dict[Site, int] = {}

    def add(self, site: Site, attn: Tensor, query_mask: Optional[Tensor] = None) -> None:
        js = per_query_js(attn.detach(), query_mask)
        self.sums[site] = self.sums.get(site, 0.0) + float(js.sum())
        self.counts[site] = self.counts.get(site, 0) + js.numel()

    def result(self) -> dict[Site, float]:
        """{(kind, layer): mean JS over all queries seen}."""
        return {s: self.sums[s] / self.counts[s] for s in sorted(self.sums, key=site_order) if self.counts[s]}


def plot_head_diversity(models: Mapping[str, Mapping[Site, float]], path: str, title: Optional[str] = None) -> str:
    """One panel per attention kind: mean JS per layer, one line per model (e.g. softmax,
    1.5-entmax, learned alpha). Returns ``path``."""
    kinds = [k for k in KINDS if any(s[0] == k for res in models.values() for s in res)]
    if not kinds:
        raise ValueError("plot_head_diversity: nothing to plot")
    plt = pyplot()
    fig, axes = plt.subplots(1, len(kinds), figsize=(3.8 * len(kinds), 3.4), squeeze=False, sharey=True)
    for col, kind in enumerate(kinds):
        ax = axes[0][col]
        for name, res in models.items():
            sites = sorted((s for s in res if s[0] == kind), key=site_order)
            if sites:
                ax.plot([layer + 1 for _, layer in sites], [res[s] for s in sites], marker="o", label=name)
        ax.set_xticks(sorted({layer + 1 for res in models.values() for k, layer in res if k == kind}))
        ax.set_title(TITLES[kind])
        ax.set_xlabel("layer")
        if col == 0:
            ax.set_ylabel("mean JS divergence between heads")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


__all__ = ["shannon_entropy", "js_divergence", "per_query_js", "HeadDiversity", "plot_head_diversity"]
