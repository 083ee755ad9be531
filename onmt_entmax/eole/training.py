"""Training in Eole: the Fenchel-Young criterion, ``generator_tau: auto``, and reports that name the loss.

``LossCompute.from_config`` builds ``nn.CrossEntropyLoss`` (or, for ``sparsemax``, ``SparsemaxLoss``
fed with ``LogSparsemax(scores)``, which calls the autograd class with the scores and crashes on its
first step, as OpenNMT-py 3.5.1's did). The wrapper replaces the criterion with the summed FY loss of
the model's own generator (``TransformationLoss``; softmax keeps cross-entropy), so a model resumed
with ``train_from`` keeps its loss. ``LossCompute.forward`` resolves ``generator_tau: auto`` on the
first batch (before any update: the untrained model's mean 1.5-entmax threshold) and counts attended
source tokens; ``_stats`` names the loss and counts nonzero output probabilities. Eole's statistics
print ``ppl`` and ``xent`` for every loss: for a FY loss the lines say e.g. ``entmax15 FY loss: 0.41``
instead, with ``out nnz`` / ``attn nnz`` and one line of learned alphas per attention layer.
``training.shuffle_each_pass`` reads every pass over a training corpus in a new random order
(``onmt_entmax.training.data_order``; Eole, like OpenNMT-py 3.5.1, reads the files in the same order every pass).
The validation iterator replays the batches of its first pass instead of reading, transforming and
batching the validation corpus again at every validation (``ReplayedPasses``, as in OpenNMT-py).
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

from onmt_entmax.analysis.training_report import (add_count, attention_counts, is_sparse_loss, merge_after, metrics,
                                                  output_nonzeros, report_output, settle)
from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.modules.loss import criterion_for, label_smoothing_warning
from onmt_entmax.modules.models import learned_alphas
from onmt_entmax.training.data_order import mark_for_reshuffling, replay_validation


def eole_logger():
    """Eole's logger (imported when first used: this module loads before Eole does)."""
    from eole.utils.logging import logger

    return logger


# learned alphas are read from the model at report time (every rank holds the same parameters)
_alpha_source: Callable[[], dict] = dict


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


# --- statistics and reports ---------------------------------------------------------------------------
wrap_update = merge_after  # Statistics.update: our sums travel with upstream's


def wrap_output(upstream: Callable) -> Callable:
    """``Statistics.output``: for a FY loss, its name and value per target token instead of ppl / xent."""
    return report_output(upstream, eole_logger, lambda: _alpha_source(), ("n_src_tokens", "n_tokens"), "7.2e")


def wrap_report_step(upstream: Callable) -> Callable:
    """``StdoutReportMgr._report_step``: no "perplexity" lines for a FY loss; sparsity numbers."""

    def _report_step(self, lr, patience, step, valid_stats=None, train_stats=None):
        sparse = [s for s in (train_stats, valid_stats) if s is not None and is_sparse_loss(s)]
        if not sparse:
            result = upstream(self, lr, patience, step, valid_stats=valid_stats, train_stats=train_stats)
        else:
            for what, stats in (("Train", train_stats), ("Validation", valid_stats)):
                if stats is not None:
                    self.log("%s %s: %g" % (what, stats.entmax_loss_name, stats.xent()))
                    self.log("%s accuracy: %g" % (what, stats.accuracy()))
            result = None
        for what, stats in (("Train", train_stats), ("Validation", valid_stats)):
            for k, v in (metrics(stats) if stats is not None else {}).items():
                self.log("%s %s: %.3f" % (what, k, v))
        return result

    return _report_step


def wrap_dataset_from_config(upstream: Callable) -> Callable:
    """``DynamicDatasetIter.from_config``: a training iterator of a run with ``training.shuffle_each_pass``
    carries the run's seed (``seed`` and the ``train_from`` checkpoint; pickled with the iterator into
    data-loader workers), which ``data_order.wrap_init_datasets`` reads."""

    def from_config(cls, corpora, transforms, vocabs, config, task, device, stride=1, offset=0, model_type=None):
        it = upstream(cls, corpora, transforms, vocabs, config, task, device, stride=stride, offset=offset,
                      model_type=model_type)
        running = getattr(config, "training", None)
        if getattr(running, "shuffle_each_pass", False):
            mark_for_reshuffling(it, task, getattr(config, "seed", -1), getattr(running, "train_from", None))
        return it

    return from_config


def wrap_build_dynamic_dataset_iter(upstream: Callable) -> Callable:
    """``eole.inputters.dynamic_iterator.build_dynamic_dataset_iter``: the validation iterator replays its
    first pass."""
    from eole.constants import CorpusTask

    return replay_validation(upstream, CorpusTask.VALID)


def wrap_load_counters(upstream: Callable) -> Callable:
    """``Optimizer.load_state_dict``: a state without step counters keeps the optimizer's own. Eole 0.6.4's
    ``train_from`` with ``reset_optim: keep_states`` passes only the torch optimizer's state ("step
    counters are intentionally reset", its comment says), which its ``load_state_dict`` then indexes
    for ``training_step``: a KeyError instead of the resumed run."""

    def load_state_dict(self, state_dict):
        if "training_step" not in state_dict:
            state_dict = {**state_dict, "training_step": self._training_step}
        return upstream(self, state_dict)

    return load_state_dict
