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

import sys
import time
from typing import Callable

from onmt_entmax.analysis.training_counts import is_sparse_loss, merge, metrics

from .loss import current_alphas

def _logger():
    """OpenNMT-py's logger, imported late: importing this module must not import ``onmt`` (the
    import hook would then activate the plugin while this module is half-initialised)."""
    from onmt.utils.logging import logger

    return logger



def wrap_update(upstream: Callable) -> Callable:
    def update(self, stat, update_n_src_words=False):
        upstream(self, stat, update_n_src_words)
        merge(self, stat)

    return update


_ATTENTION_KINDS = (("encoder.", "self_attn", "enc"), ("decoder.", "self_attn", "dec self"),
                    ("decoder.", "context_attn", "ctx"))


def _layer_order(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in name.split("."))  # layer 10 after layer 9


def alphas_line(alphas: dict) -> str:
    """{attention layer: [alpha per head]} as one line: per kind of attention (encoder self, decoder
    self, context), the heads of each layer, layers in order separated by "/"; e.g.
    ``learned alpha enc: 1.52 1.48 / 1.50 1.47 | dec self: 1.49 1.51 / … | ctx: …`` (every digit
    is in ``<save_model>_alphas.csv``)."""
    groups: dict[str, list[str]] = {}
    for layer in sorted(alphas, key=_layer_order):
        label = next((lab for start, end, lab in _ATTENTION_KINDS if layer.startswith(start) and layer.endswith(end)),
                     layer)
        groups.setdefault(label, []).append(" ".join(f"{a:.2f}" for a in alphas[layer]))
    order = [lab for _, _, lab in _ATTENTION_KINDS] + sorted(set(groups) - {lab for _, _, lab in _ATTENTION_KINDS})
    return "learned alpha " + " | ".join(f"{lab}: {' / '.join(groups[lab])}" for lab in order if lab in groups)


def _log_alphas() -> None:
    alphas = current_alphas()
    if alphas:
        _logger().info(alphas_line(alphas))


def wrap_output(upstream: Callable) -> Callable:
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
            step_fmt = f"{step:2d}/{num_steps:5d}" if num_steps > 0 else f"{step:2d}"
            n_batchs = max(self.n_batchs, 1)
            parts = [f"Step {step_fmt}", f"acc: {self.accuracy():2.1f}", f"{self.entmax_loss_name}: {self.xent():.4f}"]
            parts += [f"{k}: {v:.2f}" for k, v in extra.items()]
            parts += [f"lr: {learning_rate:7.5f}", f"sents: {self.n_sents:7.0f}",
                      f"bsz: {self.n_src_words / n_batchs:4.0f}/{self.n_words / n_batchs:4.0f}/"
                      f"{self.n_sents / n_batchs:2.0f}",
                      f"{self.n_src_words / (t + 1e-5):3.0f}/{self.n_words / (t + 1e-5):3.0f} tok/s",
                      f"{time.time() - start:6.0f} sec"]
            parts += [f"{k}: {round(v, 2)}" for k, v in self.computed_metrics.items()]
            _logger().info("; ".join(parts))
        _log_alphas()
        sys.stdout.flush()

    return output


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
