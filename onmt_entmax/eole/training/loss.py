"""Training in Eole: the Fenchel-Young criterion, ``generator_tau: auto`` and sparsity statistics.

``LossCompute.from_config`` builds ``nn.CrossEntropyLoss`` (or, for ``sparsemax``, ``SparsemaxLoss``
fed with ``LogSparsemax(scores)``, which calls the autograd class with the scores and crashes on its
first step, as OpenNMT-py 3.5.1's did). The wrapper replaces the criterion with the summed FY loss of
the model's own generator (``TransformationLoss``; softmax keeps cross-entropy), so a model resumed
with ``train_from`` keeps its loss. ``LossCompute.forward`` resolves ``generator_tau: auto`` on the
first batch (before any update: the untrained model's mean 1.5-entmax threshold) and counts attended
source tokens; ``_stats`` names the loss and counts nonzero output probabilities (the reports:
``reporting``).
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

from onmt_entmax.analysis.training_report import add_count, attention_counts, output_nonzeros, settle
from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.modules.loss import criterion_for, label_smoothing_warning
from onmt_entmax.modules.models import learned_alphas


def eole_logger():
    """Eole's logger (imported when first used: this module loads before Eole does)."""
    from eole.utils.logging import logger

    return logger


# learned alphas are read from the model at report time (every rank holds the same parameters)
_alpha_source: Callable[[], dict] = dict


def current_alphas() -> dict:
    """{attention layer: [alpha per head]} of the model being trained in this process."""
    return _alpha_source()


def wrap_from_config(upstream: Callable) -> Callable:
    """``LossCompute.from_config`` (classmethod): the FY criterion of the model's generator."""

    def from_config(cls, config, model, vocabs, train=True):
        compute = upstream(cls, config, model, vocabs, train)
        gen = getattr(model, "generator", None)
        if isinstance(gen, EntmaxGenerator):
            smoothing = float(getattr(config.training, "label_smoothing", 0.0) or 0.0)
            compute.criterion = criterion_for(gen, compute.criterion.ignore_index, smoothing)
            if train and (warning := label_smoothing_warning(gen, smoothing)):
                eole_logger().warning(warning)
        global _alpha_source
        _alpha_source = functools.partial(learned_alphas, model)
        return compute

    return from_config


def resolve_auto_tau(compute, batch: dict, output) -> float:
    """``generator_tau: auto`` from the batch's non-pad target positions (``EntmaxGenerator.resolve_auto_tau``)."""
    keep = batch["tgt"][:, compute.tgt_shift_index:].reshape(-1).ne(compute.padding_idx)  # (rows of the loss)
    tau, rows = compute.generator.resolve_auto_tau(output.reshape(-1, output.size(-1))[keep])
    eole_logger().info("generator_tau auto: tau = %.6g (mean 1.5-entmax threshold over %d target positions)", tau, rows)
    return tau


def wrap_forward(upstream: Callable) -> Callable:
    """``LossCompute.forward``: resolve ``generator_tau: auto`` first; count attended source tokens."""

    def forward(self, batch, output, attns, estim=None, mtp_outputs=None):
        gen = self.generator
        if isinstance(gen, EntmaxGenerator) and gen.tau_pending():
            resolve_auto_tau(self, batch, output)
        loss, stats, estimloss = upstream(self, batch, output, attns, estim=estim, mtp_outputs=mtp_outputs)
        attn = attns.get("std") if isinstance(attns, dict) else None
        if isinstance(attn, torch.Tensor) and "tgt" in batch:
            keep = batch["tgt"][:, self.tgt_shift_index:].reshape(-1).ne(self.padding_idx)
            with torch.no_grad():
                counts = attention_counts(attn.detach(), keep)
            if counts is not None:
                add_count(stats, "attn", *counts)
        settle(getattr(stats, "entmax_sums", {}))  # (with the output counts of _stats: one read-back a step)
        return loss, stats, estimloss

    return forward


def wrap_stats(upstream: Callable) -> Callable:
    """``LossCompute._stats``: name the loss; count nonzero output probabilities of sparse generators."""

    def _stats(self, bsz, loss, auxloss, scores, target, *args, **kwargs):
        stats = upstream(self, bsz, loss, auxloss, scores, target, *args, **kwargs)
        gen = self.generator
        if isinstance(gen, EntmaxGenerator):
            t = gen.transformation
            stats.entmax_loss_name = t.loss_name
            if t.sparse and scores is not None:
                keep = target.ne(self.padding_idx)
                with torch.no_grad():
                    add_count(stats, "out", output_nonzeros(self.criterion, gen, scores, target, keep,
                                                            self.padding_idx), keep.sum())
        return stats

    return _stats
