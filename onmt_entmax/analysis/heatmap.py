"""Attention heatmap with the nonzero cells outlined (Peters et al. 2019, Figure 5)."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from .figures import pyplot, save_figure


def attention_heatmap(
    attn: Tensor,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    path: str,
    title: str | None = None,
) -> str:
    """Write a PNG of a (T, S) attention matrix; every cell with weight > 0 gets a black frame.

    Rows are target tokens, columns source tokens; exact zeros (sparse attention) are the
    cells without a frame. Returns ``path``.
    """
    from matplotlib.patches import Rectangle

    plt = pyplot()

    a = attn.detach().float().cpu()
    if a.dim() != 2 or a.shape != (len(tgt_tokens), len(src_tokens)):
        raise ValueError(
            f"attention_heatmap: attn must be (len(tgt_tokens), len(src_tokens)) = "
            f"({len(tgt_tokens)}, {len(src_tokens)}), got {tuple(a.shape)}"
        )
    t, s = a.shape
    fig, ax = plt.subplots(figsize=(max(3.0, 0.45 * s + 1.5), max(2.5, 0.4 * t + 1.2)))
    ax.imshow(a.numpy(), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    for i, j in torch.nonzero(a > 0).tolist():
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.2))
    ax.set_xticks(range(s))
    ax.set_xticklabels(list(src_tokens), rotation=60, ha="right")
    ax.set_yticks(range(t))
    ax.set_yticklabels(list(tgt_tokens))
    if title:
        ax.set_title(title)
    return save_figure(fig, path)


def attention_name(decoder_layers: int | None = None, heads: int | None = None) -> str:
    """Which attention the heatmap and the attended-token count read, named in both. A Transformer decoder
    (OpenNMT-py's and Eole's alike) returns head 1 (index 0) of its last layer's context attention;
    ``decoder_layers`` is its number of layers, None for an RNN, whose global attention is returned."""
    if decoder_layers:
        return (f"head 1 of {'?' if heads is None else heads} of the context attention of decoder layer "
                f"{decoder_layers} (the last)")
    return "the decoder's global attention"


def outlined_cells(attn: Tensor) -> int:
    """Number of cells the heatmap outlines: the nonzero attention weights."""
    return int((attn > 0).sum())
