#!/usr/bin/env python3
"""How far apart an RNN's attention scores are, and the states they come from, teacher-forced.

Luong's "general" attention scores source position j for decoder step t as z_tj = h_tᵀ W h_j. An
α-entmax of z keeps only the positions with z_tj > max_j z_tj − 1/(α − 1) (within 2 of the maximum
for 1.5-entmax, 1 for sparsemax), so how sparse the attention is depends on the scores' spread, and
that on the norms of the decoder state h_t and the encoder states h_j. For each checkpoint, averaged
over the real target steps of a source/target file (``--lines N``: at most N of them, every k-th line, as
``reproduce.py analyze --analysis-lines`` samples):

    score std       standard deviation of z_t· over the source positions
    top-2 gap       max_j z_tj minus the second largest
    within 2        source positions within 2 of the maximum (1.5-entmax's largest possible support)
    ‖h_t‖, ‖h_j‖    Euclidean norms of the decoder's attention queries and the encoder's states
    logit gap       the output layer's largest score minus its second largest
    logit range     its largest score minus its median: how far below the top the bulk of the
                    vocabulary is put (a softmax gives the bulk probability ~exp(−range), never 0)

    python3 scripts/reproduce/attention_scale.py CKPT [CKPT ...] --src work/data/sigmorphon2018-medium/src-dev.txt \\
        --tgt work/data/sigmorphon2018-medium/tgt-dev.txt --lines 502
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch
from torch import Tensor

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from steps.analyze import spread_sample  # noqa: E402

COLUMNS = ("score std", "top-2 gap", "within 2", "‖h_t‖", "‖h_j‖", "logit gap", "logit range")


def score_sums(scores: Tensor, src_mask: Tensor, tgt_mask: Tensor, within: float = 2.0) -> dict:
    """Sums over the real target steps of one batch: scores (B, T, S) of the real and padded positions,
    src_mask (B, S) and tgt_mask (B, T) True at real tokens. Keys: steps, and the first three COLUMNS."""
    real = src_mask[:, None, :].expand_as(scores)
    masked = scores.masked_fill(~real, float("-inf"))
    count = real.sum(-1)
    mean = torch.where(real, scores, 0.0).sum(-1) / count
    std = (torch.where(real, scores - mean[..., None], 0.0).pow(2).sum(-1) / count).sqrt()
    top = masked.topk(min(2, scores.size(-1)), dim=-1).values
    # a source of one token has no second score: its gap counts as 0
    gap = torch.where(count > 1, top[..., 0] - top[..., -1], 0.0)
    near = (masked > top[..., :1] - within).sum(-1).float()
    return {"steps": int(tgt_mask.sum()), "score std": float(std[tgt_mask].sum()),
            "top-2 gap": float(gap[tgt_mask].sum()), "within 2": float(near[tgt_mask].sum())}


def measure(checkpoint: str, src: str, tgt: str, batch_size: int = 64) -> dict:
    """The COLUMNS' means for one checkpoint of an RNN with global attention, and ``‖W‖`` (the Frobenius norm of W)."""
    from onmt_entmax.onmt.decoding.teacher_forcing import load_model, run

    model, vocabs = load_model(checkpoint)
    attn = getattr(model.decoder, "attn", None)
    if attn is None or not hasattr(attn, "score"):
        raise ValueError(f"{checkpoint}: not an RNN decoder with global attention")
    steps, queries, logits = [], [], []
    upstream = attn.score

    def score(h_t: Tensor, h_s: Tensor) -> Tensor:
        z = upstream(h_t, h_s)
        steps.append(z.detach().clone())  # (upstream masks z in place afterwards)
        queries.append(h_t.detach().norm(dim=-1))
        score.states = h_s.detach().norm(dim=-1)
        return z

    attn.score = score
    hook = model.generator.register_forward_hook(lambda _m, _i, out: logits.append(out.detach()))
    sums = dict.fromkeys(("steps", *COLUMNS, "states"), 0.0)

    def on_batch(b) -> None:
        t = b.tgt_mask.size(1)
        z, h_t = torch.cat(steps, 1)[:, :t], torch.cat(queries, 1)[:, :t]
        steps.clear(), queries.clear()
        for key, value in score_sums(z, b.src_mask, b.tgt_mask).items():
            sums[key] += value
        out = logits.pop().view(b.tgt_mask.size(0), t, -1)
        top = out.topk(2, dim=-1).values
        sums["logit gap"] += float((top[..., 0] - top[..., 1])[b.tgt_mask].sum())
        sums["logit range"] += float((top[..., 0] - out.median(dim=-1).values)[b.tgt_mask].sum())
        sums["‖h_t‖"] += float(h_t[b.tgt_mask].sum())
        sums["‖h_j‖"] += float(score.states[b.src_mask].sum())
        sums["states"] += int(b.src_mask.sum())

    try:
        run(model, vocabs, src, tgt, on_batch, batch_size=batch_size, attention=False, outputs=True)
    finally:
        hook.remove()
        attn.score = upstream
    n, states = sums.pop("steps"), sums.pop("states")
    means = {k: v / (states if k == "‖h_j‖" else n) for k, v in sums.items()}
    means["‖W‖"] = float(attn.linear_in.weight.detach().norm()) if hasattr(attn, "linear_in") else float("nan")
    return means


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--src", required=True, help="tokenized source file (as onmt_translate -src takes it)")
    ap.add_argument("--tgt", required=True, help="its references, tokenized")
    ap.add_argument("--lines", type=int, default=None,
                    help="use at most N lines, every k-th from the first (all: the whole file)")
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args(argv)
    for flag, path in (("--src", args.src), ("--tgt", args.tgt), *(("checkpoint", c) for c in args.checkpoints)):
        if not os.path.isfile(path):
            ap.error(f"{flag} {path}: no such file")
    if args.lines is not None and args.lines < 1:
        ap.error(f"--lines {args.lines}: must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        src, tgt = ((str(spread_sample(Path(f), args.lines, Path(tmp) / name)) if args.lines else f)
                    for f, name in ((args.src, "src"), (args.tgt, "tgt")))
        print("| checkpoint | " + " | ".join(COLUMNS) + " | ‖W‖ |\n" + "|---" * (len(COLUMNS) + 2) + "|")
        for ckpt in args.checkpoints:
            try:
                m = measure(ckpt, src, tgt, args.batch_size)
            except ValueError as err:
                sys.exit(str(err))
            print(f"| {ckpt} | " + " | ".join(f"{m[c]:.2f}" for c in (*COLUMNS, "‖W‖")) + " |", flush=True)


if __name__ == "__main__":
    main()
