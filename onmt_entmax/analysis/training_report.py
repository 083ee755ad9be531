"""What training reports for sparse models: the loss by its name, sparsity numbers and learned alphas.

The numbers are sums carried by a toolkit's statistics object (attribute ``entmax_sums``, which
travels with it between GPUs) with its loss name (``entmax_loss_name``):
``out nnz``  = mean number of nonzero output probabilities per target token,
``attn nnz`` = mean number of source tokens with nonzero attention per target token.
Counts stay on the device while a batch runs and are read back once (``settle``). ``report_output``
is the statistics' ``output`` line of both toolkits (the OpenNMT family's ``Statistics``): for a
Fenchel-Young loss, ``entmax15 FY loss: 0.41`` instead of a perplexity. No toolkit is imported here:
each adapter calls these from its own loss and statistics hooks.
"""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional

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


def merge_after(upstream: Callable) -> Callable:
    """Wrapper of a ``Statistics.update(stat, ...)``: upstream's sums, then ours (``merge``)."""

    def update(self, stat, *args, **kwargs):
        upstream(self, stat, *args, **kwargs)
        merge(self, stat)

    return update


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


_ATTENTION_KINDS = (("encoder.", "self_attn", "enc"), ("decoder.", "self_attn", "dec self"),
                    ("decoder.", "context_attn", "ctx"))


def _layer_order(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in name.split("."))  # layer 10 after layer 9


def alphas_line(alphas: dict) -> str:
    """{attention layer: [alpha per head]} as one line: per kind of attention (encoder self, decoder
    self, context), the heads of each layer, layers in order separated by "/"; e.g.
    ``learned alpha enc: 1.52 1.48 / 1.50 1.47 | dec self: 1.49 1.51 / … | ctx: …`` (every digit
    is in OpenNMT-py's ``<save_model>_alphas.csv``)."""
    groups: dict[str, list[str]] = {}
    for layer in sorted(alphas, key=_layer_order):
        label = next((lab for start, end, lab in _ATTENTION_KINDS if layer.startswith(start) and layer.endswith(end)),
                     layer)
        groups.setdefault(label, []).append(" ".join(f"{a:.2f}" for a in alphas[layer]))
    order = [lab for _, _, lab in _ATTENTION_KINDS] + sorted(set(groups) - {lab for _, _, lab in _ATTENTION_KINDS})
    return "learned alpha " + " | ".join(f"{lab}: {' / '.join(groups[lab])}" for lab in order if lab in groups)


def report_output(upstream: Callable, logger: Callable, alphas: Callable[[], dict],
                  tokens: tuple[str, str] = ("n_src_words", "n_words"), lr_format: str = "7.5f") -> Callable:
    """Wrapper of a ``Statistics.output(step, num_steps, learning_rate, start)``: upstream's line with the
    sparsity numbers for a softmax output, else the FY loss's own line; then the learned alphas on one
    line (``alphas_line``). ``tokens``: the statistics' source / target token counts (OpenNMT-py
    ``n_src_words`` / ``n_words``, Eole ``n_src_tokens`` / ``n_tokens``); ``logger()``: the toolkit's logger."""

    def output(self, step, num_steps, learning_rate, start):
        extra = metrics(self)
        if not is_sparse_loss(self):
            saved = self.computed_metrics
            self.computed_metrics = {**saved, **extra}
            try:
                upstream(self, step, num_steps, learning_rate, start)
            finally:
                self.computed_metrics = saved
        else:
            t = self.elapsed_time()
            src, tgt = (getattr(self, name) for name in tokens)
            step_fmt = f"{step:2d}/{num_steps:5d}" if num_steps > 0 else f"{step:2d}"
            n_batchs = max(self.n_batchs, 1)
            parts = [f"Step {step_fmt}", f"acc: {self.accuracy():2.1f}", f"{self.entmax_loss_name}: {self.xent():.4f}"]
            parts += [f"{k}: {v:.2f}" for k, v in extra.items()]
            parts += [f"lr: {learning_rate:{lr_format}}", f"sents: {self.n_sents:7.0f}",
                      f"bsz: {src / n_batchs:4.0f}/{tgt / n_batchs:4.0f}/{self.n_sents / n_batchs:2.0f}",
                      f"{src / (t + 1e-5):3.0f}/{tgt / (t + 1e-5):3.0f} tok/s", f"{time.time() - start:6.0f} sec"]
            parts += [f"{k}: {round(v, 2)}" for k, v in self.computed_metrics.items()]
            logger().info("; ".join(parts))
        learned = alphas()
        if learned:
            logger().info(alphas_line(learned))
        sys.stdout.flush()

    return output
