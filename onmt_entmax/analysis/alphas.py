"""Learned alpha of "Adaptively Sparse Transformers" (Correia et al. 2019): per head and layer, and over training.

Each attention head h of a model trained with ``learn_alpha`` has alpha_h = clamp(1 + sigmoid(a_h),
1.01, 2) (``modules.attention.LearnableAlpha``; ``a`` is stored in the checkpoint as
``<attention module>.softmax.alpha.a``). Training writes ``<save_model>_alphas.csv`` (columns
``step, kind, layer, head, alpha``) at every report step (``onmt/training/alpha_log.py``).

Plots: the learned alphas per layer for encoder self, decoder self and context attention (their
Fig. "learned alpha": bimodal in the encoder), and alpha trajectories over training steps.
CLI: ``onmt-entmax-alphas -checkpoint model_step_N.pt [-csv model_alphas.csv] -out_dir DIR``.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from collections import defaultdict
from typing import Iterable, Optional, Sequence

from onmt_entmax.modules.attention import LearnableAlpha
from onmt_entmax.options.files import check_out_dir

from .checkpoint import load_checkpoint as safe_load
from .command import refusals, refuse
from .figures import pyplot, save_figure

COLUMNS = ("step", "kind", "layer", "head", "alpha")
KINDS = ("enc_self", "dec_self", "context")
TITLES = {"enc_self": "encoder self-attention", "dec_self": "decoder self-attention",
          "context": "context attention"}
_SITE = re.compile(r"(?:^|\.)(encoder|decoder)\.(?:transformer|transformer_layers)\.(\d+)\.(self_attn|context_attn)$")
_PARAM = ".softmax.alpha.a"

Site = tuple  # (kind, layer)


def attention_site(module_name: str) -> Optional[Site]:
    """(kind, layer) of an OpenNMT-py Transformer attention module name, e.g.
    ``decoder.transformer_layers.2.context_attn`` -> ("context", 2); None for other modules."""
    m = _SITE.search(module_name.removesuffix(".softmax"))
    if m is None:
        return None
    side, layer, which = m.groups()
    kind = "context" if which == "context_attn" else ("enc_self" if side == "encoder" else "dec_self")
    return kind, int(layer)


def site_order(site: Site) -> tuple:
    return KINDS.index(site[0]), site[1]


# --- reading ---------------------------------------------------------------------------------
def load_checkpoint(path: str) -> dict:
    """An OpenNMT-py checkpoint, read weights-only with its options' class allowlisted
    (``analysis.checkpoint``: never with weights-only loading turned off, which would let the file run code)."""
    return safe_load(path, map_location="cpu")


def alphas_from_state_dict(state: dict) -> dict[Site, list[float]]:
    """{(kind, layer): [alpha per head]} from the ``a`` logits of every learnable alpha."""
    out = {}
    for key, a in state.items():
        if not key.endswith(_PARAM):
            continue
        site = attention_site(key[: -len(_PARAM)])
        if site is None:
            continue
        module = LearnableAlpha(a.numel())
        module.load_state_dict({"a": a.detach().float().reshape(-1)})
        out[site] = [float(x) for x in module().detach()]
    return dict(sorted(out.items(), key=lambda kv: site_order(kv[0])))


def checkpoint_alphas(path: str) -> dict[Site, list[float]]:
    """Learned alphas of a checkpoint; ValueError if it has none (not trained with ``learn_alpha``)."""
    ckpt = load_checkpoint(path)
    state = ckpt.get("model", ckpt) if isinstance(ckpt, dict) else {}
    out = alphas_from_state_dict(state)
    if not out:
        raise ValueError(f"checkpoint {path} has no learned alphas (train with learn_alpha: true)")
    return out


def read_alpha_csv(path: str) -> list[tuple[int, str, int, int, float]]:
    """Rows (step, kind, layer, head, alpha) of an ``*_alphas.csv``; anything else (not UTF-8 text, another
    header, a row that is not step, kind, layer, head, alpha) is a ``ValueError`` naming the file (and line)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None or tuple(header) != COLUMNS:
                raise ValueError(f"{path}: not an alphas CSV (header {header}, expected {','.join(COLUMNS)})")
            return [row for row in (_alpha_row(path, reader.line_num, r) for r in reader) if row is not None]
    except (UnicodeDecodeError, csv.Error) as err:
        why = "not UTF-8 text" if isinstance(err, UnicodeDecodeError) else str(err)
        raise ValueError(f"{path}: not an alphas CSV ({why})") from None


def _alpha_row(path: str, line: int, r: list[str]) -> Optional[tuple[int, str, int, int, float]]:
    if not r:
        return None
    try:
        if len(r) == len(COLUMNS) and r[1] in KINDS:
            return int(r[0]), r[1], int(r[2]), int(r[3]), float(r[4])
    except ValueError:
        pass
    raise ValueError(f"{path} line {line}: not an alphas CSV row (step, kind in {KINDS}, layer, head, alpha): "
                     f"{','.join(r)!r}")


def trajectories(rows: Iterable[tuple]) -> dict[tuple, tuple[list[int], list[float]]]:
    """{(kind, layer, head): (steps, alphas)} sorted by step (the last row wins for a repeated step)."""
    per = defaultdict(dict)
    for step, kind, layer, head, alpha in rows:
        per[(kind, layer, head)][step] = alpha
    out = {}
    for key in sorted(per, key=lambda k: (KINDS.index(k[0]), k[1], k[2])):
        steps = sorted(per[key])
        out[key] = (steps, [per[key][s] for s in steps])
    return out


def default_csv(checkpoint: str) -> str:
    """``run/model_step_100.pt`` -> ``run/model_alphas.csv`` (where training writes it)."""
    base = re.sub(r"_step_\d+\.pt$", "", checkpoint)
    return base.removesuffix(".pt") + "_alphas.csv"


def summary(alphas: dict[Site, list[float]], low: float = 1.25, high: float = 1.75) -> dict[str, dict]:
    """Per kind: number of heads, mean alpha, and the share of heads near softmax (< low) / sparsemax (> high).

    Correia et al.'s bimodality shows up as large shares at both ends for the encoder.
    """
    out = {}
    for kind in KINDS:
        vals = [a for (k, _), heads in alphas.items() if k == kind for a in heads]
        if vals:
            out[kind] = {"heads": len(vals), "mean": sum(vals) / len(vals),
                         "low_share": sum(a < low for a in vals) / len(vals),
                         "high_share": sum(a > high for a in vals) / len(vals),
                         "min": min(vals), "max": max(vals)}
    return out


# --- plots -----------------------------------------------------------------------------------
def plot_alphas_per_layer(alphas: dict[Site, list[float]], path: str, title: Optional[str] = None) -> str:
    """One panel per attention kind: every head's learned alpha (dots) at its layer, and a
    histogram of all heads of that kind below. Returns ``path``."""
    kinds = [k for k in KINDS if any(s[0] == k for s in alphas)]
    if not kinds:
        raise ValueError("plot_alphas_per_layer: no alphas to plot")
    plt = pyplot()
    fig, axes = plt.subplots(2, len(kinds), figsize=(3.6 * len(kinds), 5.6), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]})
    for col, kind in enumerate(kinds):
        sites = sorted((s for s in alphas if s[0] == kind), key=site_order)
        ax = axes[0][col]
        for _, layer in sites:
            heads = alphas[(kind, layer)]
            n = len(heads)
            offsets = [(h - (n - 1) / 2) * (0.5 / max(n, 1)) for h in range(n)]
            ax.scatter([layer + 1 + o for o in offsets], heads, s=22, alpha=0.8)
        ax.set_ylim(0.98, 2.02)
        ax.axhline(1.5, color="grey", lw=0.6, ls=":")
        ax.set_xticks([layer + 1 for _, layer in sites])
        ax.set_xlabel("layer")
        ax.set_title(TITLES[kind])
        if col == 0:
            ax.set_ylabel("learned alpha")
        vals = [a for s in sites for a in alphas[s]]
        hist = axes[1][col]
        hist.hist(vals, bins=20, range=(1.0, 2.0), color="tab:blue", alpha=0.8)
        hist.set_xlabel("alpha")
        if col == 0:
            hist.set_ylabel("heads")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


def plot_trajectories(rows: Sequence[tuple], path: str, title: Optional[str] = None) -> str:
    """alpha of every head over training steps, one panel per attention kind, colour = layer."""
    traj = trajectories(rows)
    kinds = [k for k in KINDS if any(key[0] == k for key in traj)]
    if not kinds:
        raise ValueError("plot_trajectories: no rows to plot")
    plt = pyplot()
    cmap = plt.get_cmap("viridis")
    layers = max(key[1] for key in traj) + 1
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.2 * len(kinds), 3.6), squeeze=False, sharey=True)
    for col, kind in enumerate(kinds):
        ax = axes[0][col]
        for (k, layer, head), (steps, vals) in traj.items():
            if k != kind:
                continue
            ax.plot(steps, vals, color=cmap(layer / max(layers - 1, 1)), lw=1.0,
                    marker="." if len(steps) < 30 else None,
                    label=f"layer {layer + 1}" if head == 0 else None)
        ax.set_title(TITLES[kind])
        ax.set_xlabel("training step")
        ax.set_ylim(0.98, 2.02)
        if col == 0:
            ax.set_ylabel("alpha")
        ax.legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


# --- command line ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="onmt-entmax-alphas", description=__doc__.split("\n\n")[0])
    p.add_argument("-checkpoint", "--checkpoint", help="an onmt_train checkpoint of a learn_alpha model")
    p.add_argument("-csv", "--csv", help="the *_alphas.csv written during training "
                                         "(default: next to the checkpoint, if it exists)")
    p.add_argument("-out_dir", "--out_dir", default=".", help="where the PNGs go (default: .)")
    p.add_argument("-title", "--title", default=None)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``onmt-entmax-alphas``; a bad input ends it with one line naming the option, exit status 1."""
    with refusals("onmt-entmax-alphas"):
        return _main(build_parser().parse_args(argv))


def _main(args: argparse.Namespace) -> int:
    prog = "onmt-entmax-alphas"
    if not args.checkpoint and not args.csv:
        build_parser().error("give -checkpoint and/or -csv")
    check_out_dir("out_dir", args.out_dir, ["alphas_per_layer.png", "alpha_trajectories.png"],
                  {"checkpoint": args.checkpoint, "csv": args.csv})
    if args.checkpoint and not os.path.exists(args.checkpoint):
        refuse(prog, f"-checkpoint: no such file {args.checkpoint}")
    if args.csv and not os.path.isfile(args.csv):
        refuse(prog, f"-csv: no such file {args.csv}")
    alphas = rows = None
    if args.checkpoint:
        try:
            alphas = checkpoint_alphas(args.checkpoint)
        except ValueError as err:
            refuse(prog, f"-checkpoint: {err}")
    csv_file = args.csv or (default_csv(args.checkpoint) if args.checkpoint else None)
    if csv_file and os.path.exists(csv_file):
        try:
            rows = read_alpha_csv(csv_file)
        except ValueError as err:
            refuse(prog, f"-csv: {err}")
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    if alphas is not None:
        written.append(plot_alphas_per_layer(alphas, os.path.join(args.out_dir, "alphas_per_layer.png"), args.title))
        for (kind, layer), heads in alphas.items():
            print(f"{kind:8s} layer {layer + 1}: " + " ".join(f"{a:.3f}" for a in heads))
        for kind, s in summary(alphas).items():
            print(f"{kind:8s} {s['heads']} heads, mean alpha {s['mean']:.3f}, "
                  f"{100 * s['low_share']:.0f}% < 1.25, {100 * s['high_share']:.0f}% > 1.75")
    if rows:
        written.append(plot_trajectories(rows, os.path.join(args.out_dir, "alpha_trajectories.png"), args.title))
    for w in written:
        print(f"wrote {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
