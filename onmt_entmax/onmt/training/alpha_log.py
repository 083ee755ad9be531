"""Learned alpha per head and layer, written to ``<save_model>_alphas.csv`` at every report step.

Columns: ``step, kind, layer, head, alpha`` with kind one of ``enc_self`` (encoder self-attention),
``dec_self`` (decoder self-attention), ``context`` (decoder context attention). The alphas are
read from the model itself (``alpha = clamp(1 + sigmoid(a), 1.01, 2)``, ``modules.attention``)
right after the step's update, i.e. the values a checkpoint saved at that step holds. A run trained
from scratch also gets step-0 rows with the starting alpha. Tensorboard scalars are written by
``reporting.wrap_log_tensorboard`` (``train/alpha/<module>/head<h>``); this file is for plots.

Re-running into the same ``save_model`` keeps the rows of earlier steps (a ``-train_from`` run
continues the trajectory) and drops those at or after where this run starts.
"""
from __future__ import annotations

import csv
import os
from typing import Callable, Iterable, Optional

from torch import nn

from onmt_entmax.analysis.alphas import COLUMNS, KINDS, attention_site
from onmt_entmax.modules import AttentionNormalizer


def alpha_rows(model: nn.Module, step: int, initial: bool = False) -> list[tuple]:
    """One row (step, kind, layer, head, alpha) per head of every attention with learnable alpha.

    ``initial``: the starting alpha (``LearnableAlpha.init_alpha``) instead of the current one.
    """
    rows = []
    for name, module in model.named_modules():
        if not isinstance(module, AttentionNormalizer) or module.alpha is None:
            continue
        site = attention_site(name)
        if site is None:
            continue
        kind, layer = site
        alphas = module.current_alpha().tolist()
        for head, a in enumerate(alphas):
            rows.append((int(step), kind, layer, head, module.alpha.init_alpha if initial else float(a)))
    rows.sort(key=lambda r: (r[0], KINDS.index(r[1]), r[2], r[3]))
    return rows


def csv_path(save_model: str) -> str:
    return f"{save_model}_alphas.csv"


def _existing_rows(path: str, before_step: int) -> list[list[str]]:
    if not os.path.exists(path):
        return []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            raise ValueError(f"{path}: not an alphas CSV (header {header}, expected {','.join(COLUMNS)})")
        return [r for r in reader if r and int(r[0]) < before_step]


def write_rows(path: str, rows: Iterable[tuple], restart_at: Optional[int] = None) -> None:
    """Append ``rows``; with ``restart_at`` first rewrite the file keeping only rows of earlier steps."""
    rows = list(rows)
    if restart_at is not None:
        kept = _existing_rows(path, restart_at)
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            w.writerows(kept)
    elif not os.path.exists(path):
        with open(path, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerow(COLUMNS)
    with open(path, "a", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows((s, k, l_, h, f"{a:.6f}") for s, k, l_, h, a in rows)


def wrap_maybe_report_training(upstream: Callable) -> Callable:
    """``Trainer._maybe_report_training``: after the report, write the model's alphas (rank 0 only)."""

    def _maybe_report_training(self, step, num_steps, learning_rate, report_stats):
        out = upstream(self, step, num_steps, learning_rate, report_stats)
        every = getattr(self.report_manager, "report_every", None)
        saver = getattr(self, "model_saver", None)
        if not every or step % every or saver is None or getattr(self, "gpu_rank", 0) > 0:
            return out
        rows = alpha_rows(self.model, step)
        if not rows:
            return out
        path = csv_path(saver.base_path)
        restart = None
        if not getattr(self, "_entmax_alpha_csv", False):  # first report of this process
            self._entmax_alpha_csv = True
            fresh = step <= every
            restart = 0 if fresh else step - every + 1
            if fresh:
                rows = alpha_rows(self.model, 0, initial=True) + rows
        write_rows(path, rows, restart_at=restart)
        return out

    return _maybe_report_training


__all__ = ["alpha_rows", "csv_path", "write_rows",
           "wrap_maybe_report_training"]
