"""The GPU tables of docs/benchmarks.md, assembled from what `benchmarks/run_gpu.sh OUTDIR` wrote.

run_gpu.sh leaves in OUTDIR, for each part it ran, the markdown each benchmark printed (FILE.md),
the command that printed it (FILE.md.cmd) and `machine.json` (GPU, driver, torch, Triton, commit,
date). This script prints them as the document's GPU sections, one table per measured thing (the
kernel benchmark's loss and attention rows apart), each with its command, machine and date;
sections of parts that did not run are left out. With several OUTDIRs (parts run on separate
machines), a file of a later one replaces the same file of an earlier one, and each table keeps
its own machine.

    python3 benchmarks/report.py OUTDIR [OUTDIR ...]                           # print the sections
    python3 benchmarks/report.py OUTDIR [OUTDIR ...] --into docs/benchmarks.md  # replace them there

--into replaces the text between the lines BEGIN and END (below) of the file, nothing else.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

BEGIN = "<!-- GPU tables: written by benchmarks/report.py from a benchmarks/run_gpu.sh run -->"
END = "<!-- end of the GPU tables -->"

# (section title, what it measures, [file or (file, first-cell prefix of the rows kept)])
SECTIONS = [
    ("Losses against `F.cross_entropy`",
     "Fused Fenchel-Young losses, 4096 x 32768 logits, forward + backward, against `F.cross_entropy` on the "
     "same logits (randn x 3: trained-like rows; randn x 0.2: flat rows). \"GPU time\": the same call replayed "
     "from a CUDA graph; the other rows: eager calls (`triton.testing.do_bench` medians).",
     [("kernels.md", "loss")]),
    ("Attention against softmax",
     "Attention-shaped scores (512, 8, 50, 50) with a key-padding mask, forward + backward, against "
     "`torch.softmax` (GPU time from CUDA graphs; eager calls are host-bound); then one OpenNMT-py "
     "attention module call in training mode against the stock module's SDPA call.",
     [("kernels.md", "attention"), "attention-train.md"]),
    ("Training against softmax",
     "Transformer training tokens/s against the softmax model trained the same way: in one process on the "
     "same pre-built batches (paired rounds), then whole `onmt_train` runs; the checked run compares every "
     "short-row kernel call with the float64 reference.",
     ["train-inproc-multi30k.md", "train-inproc-32k.md", "train-multi30k.md", "train-32k.md", "check.md"]),
    ("Decoding against softmax",
     "Beam search (beam 5) sentences/s against the softmax model: in one process (one 64-sentence batch a "
     "run, 30 steps a sentence, paired rounds), then whole `onmt_translate` processes; per beam step, kernel "
     "launches and GPU time (torch.profiler); the kernels' output against the torch reference's.",
     ["translate-inproc-multi30k.md", "translate-inproc-32k.md", "translate-multi30k.md", "translate-32k.md",
      "profile-translate-multi30k.md", "profile-translate-32k.md"]),
    ("Kernel tests on the GPU", "The kernel tests, run first by run_gpu.sh (speed of wrong kernels means nothing).",
     ["tests.txt"]),
]


def machine_line(meta: dict) -> str:
    parts = [meta.get("gpu", "?")]
    if meta.get("driver"):
        parts.append(f"driver {meta['driver']}")
    parts += [f"torch {meta.get('torch', '?')}", f"Triton {meta.get('triton', '?')}"]
    commit = meta.get("commit", "")
    if commit:
        parts.append(f"commit {commit[:12]}" + (" with uncommitted changes" if commit.endswith("-dirty") else ""))
    return ", ".join(parts) + f", {meta.get('date', '?')}"


def blocks(text: str, prefix: str | None = None) -> list[str]:
    """The markdown tables of a benchmark's output, each with the caption line just above it; with
    `prefix`, only the rows whose first cell starts with it (the header kept)."""
    out, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].startswith("|"):
            i += 1
        table = lines[start:i]
        if prefix is not None:
            body = [row for row in table[2:] if row.strip("| ").startswith(prefix)]
            if not body:
                continue
            table = table[:2] + body
        caption = lines[start - 1].strip() if start and lines[start - 1].strip() else ""
        out.append("\n".join(([caption, ""] if caption and not caption.startswith("{") else []) + table))
    return out


def summary_line(text: str) -> str:
    """pytest's last line ("N passed, M skipped in S s")."""
    lines = [line.strip("= ") for line in text.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return lines[-1] if lines else ""


def section_text(files: dict, title: str, what: str, wanted: list) -> str:
    """One section: its title and description, then for each file present its command, machine and tables."""
    parts = []
    for item in wanted:
        name, prefix = item if isinstance(item, tuple) else (item, None)
        if name not in files:
            continue
        path, meta = files[name]
        cmd = Path(f"{path}.cmd").read_text().strip() if Path(f"{path}.cmd").exists() else ""
        found = [summary_line(path.read_text())] if name.endswith(".txt") else blocks(path.read_text(), prefix)
        found = [b for b in found if b]
        if not found:
            continue
        head = f"`{cmd}`; " if cmd else ""
        parts.append(f"{head}{machine_line(meta)}:\n\n" + "\n\n".join(found))
    return f"### {title}\n\n{what}\n\n" + "\n\n".join(parts) if parts else ""


def report(outdirs: list[Path]) -> str:
    files = {}
    for outdir in outdirs:
        meta_path = outdir / "machine.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        for path in sorted(outdir.iterdir()):
            if path.suffix in (".md", ".txt") and path.name != "benchmarks.md":
                files[path.name] = (path, meta)
    sections = [section_text(files, *s) for s in SECTIONS]
    return "\n\n".join(s for s in sections if s) + "\n"


def replace_between_markers(document: str, text: str) -> str:
    if document.count(BEGIN) != 1 or document.count(END) != 1 or document.index(BEGIN) > document.index(END):
        raise SystemExit(f"report.py: the document needs one line {BEGIN!r} and, after it, one line {END!r}")
    head, rest = document.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n\n{text.strip()}\n\n{END}{tail}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdirs", nargs="+", type=Path, help="OUTDIR of run_gpu.sh runs, oldest first")
    ap.add_argument("--into", type=Path, help="replace the GPU tables of this document (docs/benchmarks.md)")
    args = ap.parse_args(argv)
    text = report(args.outdirs)
    if args.into:
        args.into.write_text(replace_between_markers(args.into.read_text(), text))
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
