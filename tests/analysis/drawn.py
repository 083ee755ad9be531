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


def _renderer(fig):
    """A renderer of the figure as saved (a closed figure has lost its Agg canvas: a new one draws it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def legend_covers(ax) -> list:
    """The bars and lines of ``ax`` whose drawn extent the legend's overlaps (a legend on the data)."""
    from matplotlib.patches import Rectangle

    renderer = _renderer(ax.figure)
    box = ax.get_legend().get_window_extent(renderer)
    data = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill()] + list(ax.get_lines())
    return [a for a in data if box.overlaps(a.get_window_extent(renderer))]


def inside_figure(artist) -> bool:
    """Whether ``artist`` (a title, a label) is drawn wholly inside its figure, not cut at an edge."""
    fig = artist.figure
    box, frame = artist.get_window_extent(_renderer(fig)), fig.bbox
    return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
