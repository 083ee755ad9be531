"""Training-side hooks: the Fenchel-Young criterion, ``generator_tau: auto`` and sparsity statistics."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor

from onmt_entmax.analysis.training_report import add_count, attention_counts, output_nonzeros, settle
from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.modules.loss import criterion_for, label_smoothing_warning
from onmt_entmax.modules.models import learned_alphas


def _logger():
    """OpenNMT-py's logger, imported late: importing this module must not import ``onmt`` (the
    import hook would then activate the plugin while this module is half-initialised)."""
    from onmt.utils.logging import logger

    return logger



@dataclass
class StatsContext:
    """What ``LossCompute`` needs beyond upstream state to report sparsity (attached as ``_entmax``)."""

    attn_time_first: bool = False  # InputFeedRNNDecoder stacks attention (T, B, S)


# Learned alphas are read from the model at report time only (no per-step device sync), and not
# carried in Statistics: OpenNMT-py gathers those across GPUs in a 4096-byte buffer. Every rank
# holds the same parameters, so the reporting rank's model is the one to read.
_alpha_source: Callable[[], dict] = dict


def current_alphas() -> dict:
    """{attention layer: [alpha per head]} of the model being trained in this process."""
    return _alpha_source()


def wrap_from_opts(upstream: Callable) -> Callable:
    """``LossCompute.from_opts``: criterion from the *model's* generator (so ``-train_from`` keeps it)."""

    def from_opts(cls, opt, model, vocab, train=True):
        compute = upstream(cls, opt, model, vocab, train)
        gen = getattr(model, "generator", None)
        if isinstance(gen, EntmaxGenerator) and not getattr(opt, "copy_attn", False):
            compute.criterion = criterion_for(gen, compute.criterion.ignore_index, float(opt.label_smoothing))
            if train and (warning := label_smoothing_warning(gen, float(opt.label_smoothing))):
                _logger().warning(warning)
        global _alpha_source
        decoder = getattr(model, "decoder", None)
        compute._entmax = StatsContext(attn_time_first=type(decoder).__name__ == "InputFeedRNNDecoder")
        _alpha_source = functools.partial(learned_alphas, model)
        return compute

    return from_opts


def resolve_auto_tau(compute, batch: dict, output: Tensor) -> float:
    """``generator_tau: auto`` from the first batch's non-pad target positions
    (``EntmaxGenerator.resolve_auto_tau``)."""
    gen: EntmaxGenerator = compute.generator
    tgt = batch["tgt"][:, compute.tgt_shift_index:, 0]
    out = output[:, : tgt.size(1)]
    keep = tgt.reshape(-1).ne(compute.padding_idx)
    tau, rows = gen.resolve_auto_tau(out.reshape(-1, out.size(-1))[keep])
    _logger().info("generator_tau auto: tau = %.6g (mean 1.5-entmax threshold over %d target positions)", tau, rows)
    return tau


def wrap_forward(upstream: Callable) -> Callable:
    """``LossCompute.forward``: resolve ``generator_tau: auto`` first; count attended source tokens."""

    def forward(self, batch, output, attns, trunc_start=0, trunc_size=None):
        gen = self.generator
        if isinstance(gen, EntmaxGenerator) and gen.tau_pending():
            resolve_auto_tau(self, batch, output)
        loss, stats = upstream(self, batch, output, attns, trunc_start, trunc_size)
        ctx: Optional[StatsContext] = getattr(self, "_entmax", None)
        attn = attns.get("std") if isinstance(attns, dict) else None
        if ctx is not None and isinstance(attn, Tensor):
            start = trunc_start + self.tgt_shift_index
            stop = trunc_start + (trunc_size if trunc_size is not None else batch["tgt"].size(1) - trunc_start)
            keep = batch["tgt"][:, start:stop, 0].reshape(-1).ne(self.padding_idx)
            with torch.no_grad():
                counts = attention_counts(attn.detach(), keep, ctx.attn_time_first)
            if counts is not None:
                add_count(stats, "attn", *counts)
        settle(getattr(stats, "entmax_sums", {}))  # (with the output counts of _stats)
        return loss, stats

    return forward


def wrap_stats(upstream: Callable) -> Callable:
    """``LossCompute._stats``: name the loss; count nonzero output probabilities of sparse generators."""

    def _stats(self, bsz, loss, scores, target):
        stats = upstream(self, bsz, loss, scores, target)
        gen = self.generator
        if isinstance(gen, EntmaxGenerator) and not self.copy_attn:
            t = gen.transformation
            stats.entmax_loss_name = t.loss_name
            if t.sparse:  # device counts, read back with the attention counts (wrap_forward's _settle)
                keep = target.ne(self.padding_idx)
                with torch.no_grad():
                    nnz = output_nonzeros(self.criterion, gen, scores, target, keep, self.padding_idx)
                add_count(stats, "out", nnz, keep.sum())
        return stats

    return _stats
