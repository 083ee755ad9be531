"""Matplotlib plumbing shared by the analysis plots: a headless backend and one way to save."""
from __future__ import annotations


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str) -> str:
    """Lay out, write `path` as a 100-dpi PNG, free the figure; returns `path`."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot().close(fig)
    return path
