"""``plot``: Figure 4, the best validation accuracy against alpha (PNG), from the training logs."""
from __future__ import annotations

import argparse
from pathlib import Path

import experiments as E

from onmt_entmax.evaluation import tables

from . import common, table


def plot_fig4(out: Path, runs: Path | None = None) -> Path:
    """Figure 4 from the validations of its runs under ``runs`` (default: here); refused in one line when
    no run has one (the figure would be empty)."""
    panels = {which: table.collect(f"peters2019-fig4-{which}", runs) for which in ("attention", "output")}
    if not any(panels.values()):
        where = (runs or common.WORK) / E.RUNS / "peters2019-fig4"
        raise SystemExit(f"plot: no Figure 4 run with a validation under {where}: train them first "
                         "(reproduce.py train peters2019-fig4-attention, peters2019-fig4-output) or give --runs DIR")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3), sharey=True)
    for ax, which in zip(axes, ("attention", "output")):
        cells = panels[which]
        xs = [a for a in E.FIG4_GRID if (E.alpha_tag(a), "dev accuracy") in cells]
        vals = [cells[(E.alpha_tag(a), "dev accuracy")] for a in xs]
        means = [tables.mean_std(v)[0] for v in vals]
        stds = [tables.mean_std(v)[1] or 0.0 for v in vals]
        ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3)
        ax.set_xlabel(f"{which} α (other α = 1.5)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("DE→EN validation accuracy (%)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)
    return out


def run_step(a: argparse.Namespace) -> None:
    """Figure 4 into ``--out`` (of ``--runs`` if given); prints where it went."""
    print(plot_fig4(a.out, a.runs))
