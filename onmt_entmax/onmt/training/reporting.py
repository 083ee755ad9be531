"""Reports that name the loss for what it is, with sparsity numbers and learned alphas.

Upstream prints ``ppl`` = exp(loss / tokens), which is a perplexity only for cross-entropy. For a
sparse generator the report says e.g. ``entmax15 FY loss: 0.1234`` instead (per target token) and
never a perplexity; ``Statistics.ppl()`` itself is left alone (early stopping ranks by it, and
exp is monotone in the loss). Extra numbers, when available:
``out nnz``  = mean number of nonzero output probabilities per target token,
``attn nnz`` = mean number of source tokens with nonzero attention per target token (RNN global
attention; Transformer: head 0 of the last decoder layer's context attention, what upstream returns),
and the learned alphas on one line (``alphas_line``).
"""
from __future__ import annotations

from typing import Callable

from onmt_entmax.analysis.training_report import alphas_line, is_sparse_loss, merge_after, metrics, report_output

from .loss import current_alphas


def _logger():
    """OpenNMT-py's logger, imported late: importing this module must not import ``onmt`` (the
    import hook would then activate the plugin while this module is half-initialised)."""
    from onmt.utils.logging import logger

    return logger


__all__ = ["alphas_line", "wrap_log_tensorboard", "wrap_output", "wrap_report_step", "wrap_update"]

wrap_update = merge_after  # Statistics.update: our sums travel with upstream's


def wrap_output(upstream: Callable) -> Callable:
    return report_output(upstream, _logger, current_alphas)


def wrap_log_tensorboard(upstream: Callable) -> Callable:
    def log_tensorboard(self, prefix, writer, learning_rate, patience, step):
        if not is_sparse_loss(self):
            upstream(self, prefix, writer, learning_rate, patience, step)
        else:
            t = self.elapsed_time()
            writer.add_scalar(prefix + "/fy_loss", self.xent(), step)
            for k, v in self.computed_metrics.items():
                writer.add_scalar(prefix + "/" + k, round(v, 4), step)
            writer.add_scalar(prefix + "/accuracy", self.accuracy(), step)
            writer.add_scalar(prefix + "/tgtper", self.n_words / t, step)
            writer.add_scalar(prefix + "/lr", learning_rate, step)
            if patience is not None:
                writer.add_scalar(prefix + "/patience", patience, step)
        for k, v in metrics(self).items():
            writer.add_scalar(prefix + "/" + k.replace(" ", "_"), v, step)
        for layer, alphas in current_alphas().items():
            for head, a in enumerate(alphas):
                writer.add_scalar(f"{prefix}/alpha/{layer}/head{head}", a, step)

    return log_tensorboard


def wrap_report_step(upstream: Callable) -> Callable:
    """``ReportMgr._report_step``: no "perplexity" lines for a Fenchel-Young loss."""

    def _report_step(self, lr, patience, step, valid_stats=None, train_stats=None):
        sparse = [s for s in (train_stats, valid_stats) if s is not None and is_sparse_loss(s)]
        if not sparse:  # softmax output: upstream's lines, then attention sparsity (sparse attention)
            result = upstream(self, lr, patience, step, valid_stats=valid_stats, train_stats=train_stats)
            for what, stats in (("Train", train_stats), ("Validation", valid_stats)):
                for k, v in (metrics(stats) if stats is not None else {}).items():
                    self.log("%s %s: %.3f" % (what, k, v))
            return result
        for what, stats, prefix in (("Train", train_stats, "train"), ("Validation", valid_stats, "valid")):
            if stats is None:
                continue
            self.log("%s %s: %g" % (what, stats.entmax_loss_name, stats.xent()))
            self.log("%s accuracy: %g" % (what, stats.accuracy()))
            for k, v in metrics(stats).items():
                self.log("%s %s: %.3f" % (what, k, v))
            if what == "Train":
                self.log("Sentences processed: %g" % stats.n_sents)
            self.maybe_log_tensorboard(stats, prefix, lr, patience, step)

    return _report_step
