"""Reports in Eole that name the loss for what it is, with sparsity numbers and learned alphas.

Eole's statistics print ``ppl`` and ``xent`` for every loss: for a FY loss the lines say e.g.
``entmax15 FY loss: 0.41`` instead, with ``out nnz`` / ``attn nnz`` and one line of learned alphas per
attention layer.
"""
from __future__ import annotations

from typing import Callable

from onmt_entmax.analysis.training_report import is_sparse_loss, merge_after, metrics, report_output

from .loss import current_alphas, eole_logger

wrap_update = merge_after  # Statistics.update: our sums travel with upstream's


def wrap_output(upstream: Callable) -> Callable:
    """``Statistics.output``: for a FY loss, its name and value per target token instead of ppl / xent."""
    return report_output(upstream, eole_logger, current_alphas, ("n_src_tokens", "n_tokens"), "7.2e")


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
