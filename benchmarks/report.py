"""The tables of docs/benchmarks.md, drawn from the CSV rows under benchmarks/results/; and a
`benchmarks/run_gpu.sh OUTDIR` run's own tables.

--results: every family's CSV (FAMILIES below: benchmarks/results/FAMILY.csv, a row a case and run: GPU,
driver, torch, Triton, commit, date, command, case, ours, baseline, ratio, then the family's own
columns, as benchmarks/result_rows.py writes them), the newest row of each case shown, so a re-run's
rows replace the older ones in the document (they stay in the CSV with their dates). --long-attention:
the rows `benchmarks/bench_long_attention.py` appends to its CSV.

OUTDIRs: run_gpu.sh leaves in OUTDIR, for each part it ran, the markdown each benchmark printed
(FILE.md), the command that printed it (FILE.md.cmd) and `machine.json` (GPU, driver, torch, Triton,
commit, date); this prints them, one table per measured thing (the kernel benchmark's loss and
attention rows apart), each with its command, machine and date; sections of parts that did not run
are left out. With several OUTDIRs (parts run on separate machines), a file of a later one replaces
the same file of an earlier one, and each table keeps its own machine.

    python3 benchmarks/report.py --results benchmarks/results [--into docs/benchmarks.md]  # every family's CSV
    python3 benchmarks/report.py --long-attention benchmarks/results/long-attention.csv [--into docs/benchmarks.md]
    python3 benchmarks/report.py OUTDIR [OUTDIR ...]                  # a run's tables (OUTDIR/benchmarks.md)

--into replaces, in the document, only the text between each family's family_markers (--results), between
LONG_BEGIN and LONG_END (--long-attention), or between BEGIN and END (OUTDIRs, a document with those lines).
"""
from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path

BEGIN = "<!-- GPU tables: written by benchmarks/report.py from a benchmarks/run_gpu.sh run -->"
END = "<!-- end of the GPU tables -->"
LONG_BEGIN = "<!-- long attention: written by benchmarks/report.py --long-attention from its CSV -->"
LONG_END = "<!-- end of long attention -->"
LONG_CMD = "python3 benchmarks/bench_long_attention.py --csv benchmarks/results/long-attention.csv"
LONG_CASE = ("gpu", "dtype", "kind", "alpha", "attention", "causal", "mask", "batch", "heads", "head_dim", "tq", "tk")

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
     "short-row kernel call with the float64 reference; on documents also whole `eole train` runs, then one "
     "`eole predict` of a document.",
     ["train-inproc-multi30k.md", "train-inproc-32k.md", "train-multi30k.md", "train-32k.md", "check.md",
      "train-inproc-long.md", "train-long.md", "eole-long.md"]),
    ("Decoding against softmax",
     "Beam search (beam 5) sentences/s against the softmax model: in one process (one 64-sentence batch a "
     "run, 30 steps a sentence, paired rounds), then whole `onmt_translate` processes; per beam step, kernel "
     "launches and GPU time (torch.profiler); the kernels' output against the torch reference's.",
     ["translate-inproc-multi30k.md", "translate-inproc-32k.md", "translate-multi30k.md", "translate-32k.md",
      "profile-translate-multi30k.md", "profile-translate-32k.md", "translate-long.md"]),
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


def long_attention(csv_path: Path) -> str:
    """The long-attention tables from bench_long_attention.py's CSV rows: one table per machine and commit
    (its command, GPU, torch, Triton, dates; the commit stays in the CSV), the newest commit's first, a row per
    case, its newest (the CSV's last) on that machine, with time and peak memory against SDPA (and AdaSplash
    v1, v2 where they ran). A table of an older commit says that its cases were not re-measured since."""
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    newest = {tuple(r[c] for c in LONG_CASE): r for r in rows}
    runs: dict = {}
    for r in newest.values():
        runs.setdefault((r["gpu"], r["torch"], r["triton"], r["commit"]), []).append(r)
    latest = rows[-1]["commit"] if rows else None
    parts = []
    for (gpu, torch_v, triton_v, commit), group in sorted(runs.items(), key=lambda run: run[0][3] != latest):
        dates = sorted({r["date"] for r in group})
        when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
        older = "" if commit == latest else (" (cases not re-measured since: rows of an earlier commit, the CSV's "
                                             "`commit` column)")
        lines = [f"`{LONG_CMD}`; {gpu}, torch {torch_v}, Triton {triton_v}, {when}{older}:", "",
                 long_attention_table(group)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def long_attention_table(rows: list[dict]) -> str:
    """Markdown, a row a case of bench_long_attention.py: time and peak memory of ours against SDPA (and
    AdaSplash v1, v2 where they ran)."""
    lines = ["| dtype | kind | attention | causal | mask | B | Tq | Tk | ours ms | SDPA ms | ours / SDPA "
             "| AdaSplash v1 ms | AdaSplash v1 / SDPA | AdaSplash v2 ms | AdaSplash v2 / SDPA "
             "| ours peak MiB | SDPA peak MiB | peak ours / SDPA |",
             "|" + "---|" * 18]
    for r in rows:
        ours, sdpa = float(r["ours_ms"]), float(r["sdpa_ms"])
        ada = " | ".join(f"{float(r[c]):.2f} | {float(r[c]) / sdpa:.2f}x" if r.get(c) else " | "
                         for c in ("adasplash_ms", "adasplash_v2_ms"))
        mem_o, mem_s = float(r["ours_peak_mib"]), float(r["sdpa_peak_mib"])
        kind = r["kind"] + (f" (α {r['alpha']})" if r.get("alpha") else "")
        lines.append(f"| {r['dtype']} | {kind} | {r['attention']} | {'yes' if str(r['causal']) == '1' else 'no'} "
                     f"| {r['mask']} | {r['batch']} | {r['tq']} | {r['tk']} | {ours:.2f} | {sdpa:.2f} "
                     f"| {ours / sdpa:.2f}x | {ada} "
                     f"| {mem_o:.0f} | {mem_s:.0f} | {mem_o / max(mem_s, 1e-9):.2f}x |")
    return "\n".join(lines)


def _cell(field: str):
    return lambda r: r[field]


def _times(field: str):
    """A ratio cell: 0.95 -> 0.95x (empty cells and words as they are)."""
    return lambda r: f"{r[field]}x" if re.fullmatch(r"[\d.]+", r[field]) else r[field]


def _median(r: dict) -> str:
    """The median of paired-round ratios with its 95% interval where there is one."""
    m = _times("median_ratio")(r)
    return f"{m} ({r['median_low']}-{r['median_high']})" if r["median_low"] else m


RESULTS = Path(__file__).resolve().parent / "results"
# Every family's CSV (benchmarks/results/FAMILY.csv) has these columns, then its own.
RESULT_FIELDS = ["gpu", "driver", "torch", "triton", "commit", "date", "command", "case", "ours", "baseline", "ratio"]
_OP = [("case", _cell("case")), ("op", _cell("op")), ("ours", _cell("ours")), ("baseline", _cell("baseline")),
       ("unit", _cell("units")), ("ours / baseline", _times("ratio")), ("PyPI entmax / baseline", _times("pypi_ratio"))]
_RUNS = [("case", _cell("case")), ("ours", _cell("ours")), ("baseline", _cell("baseline")), ("unit", _cell("units")),
         ("ours / baseline", _times("ratio")), ("notes", _cell("detail"))]
# family: (the columns naming one case: its newest row is the one shown; the table's columns)
FAMILIES = {
    "losses": (("case", "op"), _OP),
    "attention": (("case", "op"), _OP),
    "training": (("data", "mode", "case", "precision"), [
        ("data", _cell("data")), ("variant", _cell("case")), ("tokens/s", _cell("ours")),
        ("softmax tokens/s", _cell("baseline")), ("vs softmax", _times("ratio")),
        ("median of round ratios (95% interval)", _median), ("rounds", _cell("rounds")),
        ("report windows", _cell("windows")), ("kernel check", _cell("check"))]),
    "decoding": (("data", "mode", "case"), [
        ("data", _cell("data")), ("variant", _cell("case")), ("sentences/s", _cell("ours")),
        ("softmax sentences/s", _cell("baseline")), ("vs softmax", _times("ratio")),
        ("median of round ratios (95% interval)", _median), ("output words", _cell("output_words")),
        ("lines at the length limit", _cell("long_lines")), ("lines identical to the torch reference's",
                                                              _cell("identical_lines")),
        ("ms a sentence, each run", _cell("runs_ms"))]),
    "decoding-steps": (("data", "case"), [
        ("data", _cell("data")), ("variant", _cell("case")), ("beam steps", _cell("beam_steps")),
        ("aten operators a step", _cell("aten_ops")), ("kernel launches a step", _cell("launches")),
        ("GPU kernel ms a step", _cell("ours"))]),
    "cpu-ops": (("case", "op"), _OP),
    # SIGMORPHON RNN training (host-bound): decoder steps as CUDA graphs, host settings, several runs a GPU
    # under MPS, fused Adam, several trainers on the CPU
    **{f: (("command", "case"), _RUNS) for f in ("rnn-graphs", "rnn-host", "rnn-mps", "rnn-adam", "cpu-trainers")},
}


def family_markers(family: str) -> tuple[str, str]:
    return (f"<!-- {family}: written by benchmarks/report.py --results from benchmarks/results/{family}.csv -->",
            f"<!-- end of {family} -->")


def precision(setup: str) -> str:
    """The model's dtype that a training row's setup names ("..., 3-layer Transformer, fp16, ..."): a run in
    another precision is another case, not a re-run."""
    found = re.search(r"Transformer, (fp32|fp16|bf16)\b", setup)
    return found.group(1) if found else ""


def current_rows(rows: list[dict], key: tuple) -> list[dict]:
    """The newest row of each case (of one date, the later in the file), in file order: a re-run's rows replace
    the older ones in the document, which stay in the CSV with their dates."""
    newest: dict = {}
    for r in rows:
        k = tuple(r[c] for c in key)
        if k not in newest or r["date"] >= newest[k]["date"]:
            newest[k] = r
    return [r for r in rows if newest[tuple(r[c] for c in key)] is r]


def family_table(family: str, csv_path: Path) -> str:
    """One family's current rows as tables, one per command, machine and setup (the command, GPU, driver,
    torch, Triton, date and setup above it; each row's commit stays in the CSV)."""
    key, columns = FAMILIES[family]
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = [dict(r, precision=precision(r.get("setup", ""))) for r in csv.DictReader(f)]
    rows = current_rows(rows, key)
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["command"], r.get("setup", ""), r["gpu"], r["driver"], r["torch"], r["triton"],
                           r["date"]), []).append(r)
    parts = []
    for (cmd, setup, gpu, driver, torch_v, triton_v, date), group in groups.items():
        used = [c for c in columns if any(c[1](r) for r in group)]  # no column empty in every row
        machine = ", ".join([gpu] + [f"{name} {v}" for name, v in (("driver", driver), ("torch", torch_v),
                                                                    ("Triton", triton_v)) if v] + [date])
        lines = [f"`{cmd}`; {machine}" + (f"; {setup}" if setup else "") + ":", "",
                 "| " + " | ".join(head for head, _ in used) + " |", "|" + "---|" * len(used)]
        lines += ["| " + " | ".join(cell(r) for _, cell in used) + " |" for r in group]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def replace_between_markers(document: str, text: str, begin: str = BEGIN, end: str = END) -> str:
    if document.count(begin) != 1 or document.count(end) != 1 or document.index(begin) > document.index(end):
        raise SystemExit(f"report.py: the document needs one line {begin!r} and, after it, one line {end!r}")
    head, rest = document.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n\n{text.strip()}\n\n{end}{tail}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdirs", nargs="*", type=Path, help="OUTDIR of run_gpu.sh runs, oldest first")
    ap.add_argument("--into", type=Path, help="replace the marked tables of this document (docs/benchmarks.md)")
    ap.add_argument("--long-attention", type=Path, help="bench_long_attention.py's CSV: its tables instead")
    ap.add_argument("--results", type=Path, help="a folder of family CSVs (benchmarks/results): each family's "
                    "current rows instead, each between its own markers")
    args = ap.parse_args(argv)
    if args.results:
        found = [f for f in FAMILIES if (args.results / f"{f}.csv").exists()]
        if not found:
            ap.error(f"no family CSV ({', '.join(FAMILIES)}) in {args.results}")
        tables = {f: family_table(f, args.results / f"{f}.csv") for f in found}
        if args.into:
            document = args.into.read_text()
            for f, text in tables.items():
                document = replace_between_markers(document, text, *family_markers(f))
            args.into.write_text(document)
        else:
            print("\n".join(f"{family_markers(f)[0]}\n\n{text}" for f, text in tables.items()), end="")
        return
    if args.long_attention:
        text, markers = long_attention(args.long_attention), (LONG_BEGIN, LONG_END)
    elif args.outdirs:
        text, markers = report(args.outdirs), (BEGIN, END)
    else:
        ap.error("give OUTDIRs or --long-attention CSV")
    if args.into:
        args.into.write_text(replace_between_markers(args.into.read_text(), text, *markers))
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
