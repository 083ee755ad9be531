"""The figures the analysis plots draw, captured as they are saved, so that a test can read what
is on them (bars, lines, outlines, labels) and not only that a PNG was written."""
from __future__ import annotations

import contextlib

from onmt_entmax.analysis import alpha_relu_stats, alphas, figures, head_diversity, heatmap

MODULES = (alpha_relu_stats, alphas, head_diversity, heatmap)


@contextlib.contextmanager
def capture():
    """Yields {path: matplotlib Figure} filled by every plot saved inside the block (still written)."""
    saved: dict = {}

    def save(fig, path):
        saved[str(path)] = fig
        return figures.save_figure(fig, path)

    before = [m.save_figure for m in MODULES]
    for m in MODULES:
        m.save_figure = save
    try:
        yield saved
    finally:
        for m, f in zip(MODULES, before):
            m.save_figure = f


def bars(ax) -> list:
    """(x, width, height, facecolor) of each histogram bar of ``ax``."""
    from matplotlib.patches import Rectangle

    return [(p.get_x(), p.get_width(), p.get_height(), p.get_facecolor()) for p in ax.patches
            if isinstance(p, Rectangle) and p.get_fill()]


def legend_texts(ax) -> list:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []
