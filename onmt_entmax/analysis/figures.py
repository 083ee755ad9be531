"""Matplotlib plumbing shared by the analysis plots: a headless backend, one way to save (titles kept
inside the figure) and legends that cover no data."""
from __future__ import annotations

import textwrap


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str) -> str:
    """Lay out (every axes title wrapped until it fits the figure), write `path` as a 100-dpi PNG, free
    the figure; returns `path`."""
    fig.tight_layout()
    for _ in range(3):  # a wrapped title is taller: lay out again, which can move the axes
        if not _wrap_titles(fig):
            break
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot().close(fig)
    return path


def _inside(box, frame, margin: float = 2.0) -> bool:
    """Horizontally (the layout makes room above an axes for its title, not beside it)."""
    return box.x0 >= frame.x0 + margin and box.x1 <= frame.x1 - margin


def _wrap_titles(fig) -> bool:
    """Wrap each axes title at spaces, in ever shorter lines, until it lies inside the figure (a title is
    centred on its axes, and one wider than a small figure is cut at both edges); the figure grows by the
    added lines' height, so that the axes keep theirs. Whether a title changed."""
    renderer = fig.canvas.get_renderer()
    changed = False
    for ax in fig.axes:
        text = ax.title
        before = text.get_text()
        title = " ".join(before.split())
        width = len(title)
        while width > 8 and not _inside(text.get_window_extent(renderer), fig.bbox):
            width -= max(1, width // 8)
            text.set_text(textwrap.fill(title, width, break_long_words=False))
        added = text.get_text().count("\n") - before.count("\n")
        if text.get_text() != before:
            changed = True
        if added > 0:  # a line is about 1.2 font sizes (points, 72 an inch)
            w, h = fig.get_size_inches()
            fig.set_size_inches(w, h + added * 1.2 * text.get_fontsize() / 72)
    return changed


def legend_above(ax, title: str | None = None, fontsize: int = 8):
    """The legend above the axes, outside the data (inside, it sits on the tallest bars of a histogram,
    which fill the axes); ``title``, the plot's, heads the legend so that the two do not overlap either."""
    legend = ax.legend(fontsize=fontsize, loc="lower left", bbox_to_anchor=(0.0, 1.02), borderaxespad=0.0,
                       frameon=False, title=title, title_fontsize=fontsize + 2, alignment="left")
    return legend
