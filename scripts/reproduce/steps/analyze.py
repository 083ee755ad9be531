"""``analyze``: for the analyses (peters2019-table3, peters2019-sec4.1, tezekbayev-table2, ...), decode the
validation set of the source table's runs with onmt_translate's analyses (sparsity, certificates, empty
output) into analysis-<name>.json beside each run; tezekbayev-table3: the tau that generator_tau auto
chose, from the training logs. Its table, beside the paper's numbers, is printed from those files."""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import experiments as E
from pieces import best_checkpoint

from onmt_entmax.evaluation import tables

from . import common, decode, run_files

_TAU = re.compile(r"generator_tau auto: tau = ([0-9.eE+-]+)")  # logged by onmt_entmax.onmt.training.loss


def analysis_runs(name: str) -> list[E.Experiment]:
    """The runs of the analysis ``name``: the experiments of its source table that its ``keep`` matches."""
    a = E.ANALYSES[name]
    return [e for e in common.experiments(a.source) if re.fullmatch(a.keep, e.name)]


# onmt_translate refuses these for a dense (softmax) output layer: no beam is ever exhaustive there
_SPARSE_OUTPUT_ONLY = {"-certificate": 0, "-enumerate_support": 0, "-enumerate_cap": 1}


def analysis_flags(a: E.Analysis, e: E.Experiment) -> list[str]:
    """The analysis options for one run, without those that need a sparse output layer if ``e``'s is softmax."""
    if e.config.get("generator_function", "softmax") != "softmax":
        return list(a.flags)
    out, skip = [], 0
    for flag in a.flags:
        if skip:
            skip -= 1
        elif flag in _SPARSE_OUTPUT_ONLY:
            skip = _SPARSE_OUTPUT_ONLY[flag]
        else:
            out.append(flag)
    return out


def spread_sample(src: Path, n: int, out: Path) -> Path:
    """Every k-th line of ``src``, at most ``n`` lines (the multilingual SIGMORPHON dev set is ordered
    by language: a spread sample keeps every language in proportion); ``src`` itself if it is short."""
    lines = common.read_lines(src)
    if len(lines) <= n:
        return src
    k = -(-len(lines) // n)
    out.write_text("".join(line + "\n" for line in lines[::k]), encoding="utf-8")
    return out


def analyze(name: str, seeds: list[int], gpus: list[int] | None, only: str | list[str] | None = None, jobs: int = 1,
            max_lines: int | None = None) -> None:
    """Decode the validation set (or a spread sample of ``max_lines``) of each run with the analysis
    options; summary -> analysis-<name>.json."""
    from onmt_entmax.analysis.report import read_jsonl, summarize

    a = E.ANALYSES[name]

    def one(e: E.Experiment, gpu: int | None) -> None:
        for seed in seeds:
            run_dir = common.WORK / e.run_dir / f"seed{seed}"
            out = run_dir / f"analysis-{name}.json"
            if not (run_dir / "train.log").exists():
                continue
            log = (run_dir / "train.log").read_text(encoding="utf-8")
            if not a.flags:  # read from the training log
                taus = _TAU.findall(log)
                out.write_text(json.dumps({"tau": float(taus[-1])} if taus else {}) + "\n")
                continue
            if (best := run_files.best_validated(run_dir, log)) is None:
                continue
            ckpt = best[0]
            if run_files.is_scored(out, ckpt, "checkpoint", e.decode):
                continue
            if not run_files.checkpoint_file(run_dir, ckpt).exists():  # carried: its scored best stayed behind
                print(f"skip {run_dir}: its best checkpoint {Path(ckpt).name} is not on this machine (analyze "
                      "where it was trained, or pack it with --with-best)", file=sys.stderr)
                continue
            report = run_dir / f"analysis-{name}.jsonl"
            src = decode.test_source(e, "dev")
            if max_lines:
                src = spread_sample(src, max_lines, run_dir / f"dev.sample{max_lines}.txt")
            decode.translate([run_files.checkpoint_file(run_dir, ckpt)], src, run_dir / f"pred.dev.{name}.txt",
                             gpu, [*e.decode, *analysis_flags(a, e), "-entmax_report", report])
            out.write_text(json.dumps({**summarize(read_jsonl(str(report))), "checkpoint": ckpt,
                                       "decode": list(e.decode)}, indent=1) + "\n")

    runs = analysis_runs(name)
    common.check_only(only, [e.name for e in runs], name)
    todo = [e for e in runs if common.selected(e.name, only)]
    if a.layout == "best":  # only the column's best validated configuration is reported: decode only it
        columns: dict[str, list[E.Experiment]] = {}
        for e in todo:
            columns.setdefault(e.column, []).append(e)
        todo = [max(group, key=mean_best_dev) for group in columns.values()]
    common.parallel(one, todo, jobs, gpus)


def mean_best_dev(e: E.Experiment, runs: Path | None = None) -> float:
    """Mean over seeds of the best validation accuracy in each training log (-inf if none validated)."""
    vals = []
    for log in sorted(((runs or common.WORK) / e.run_dir).glob("seed*/train.log")):
        try:
            vals.append(best_checkpoint(log.read_text(encoding="utf-8"))[1])
        except ValueError:
            pass
    return sum(vals) / len(vals) if vals else float("-inf")


def collect_analysis(name: str, runs: Path | None = None) -> dict[tuple[str, str], list[float]]:
    """{(row, column): [value of each seed]} of an analysis table (layouts: see experiments.Analysis)."""
    a, runs = E.ANALYSES[name], runs or common.WORK
    cells: dict[tuple[str, str], list[float]] = {}
    groups: dict[str, list[E.Experiment]] = {}
    for e in analysis_runs(name):
        groups.setdefault(e.column, []).append(e)
    for group in groups.values():
        if a.layout == "best":  # the run with the best mean validation accuracy of its column
            group = [max(group, key=lambda e: mean_best_dev(e, runs))]
        for e in group:
            for path in sorted((runs / e.run_dir).glob(f"seed*/analysis-{name}.json")):
                summary = json.loads(path.read_text())
                for col, (key, scale) in a.columns.items():
                    if summary.get(key) is None:
                        continue
                    cell = {"row": (e.row, col), "best": (col, e.column), "transpose": (col, e.column),
                            "by-column": (e.row, e.column)}[a.layout]
                    cells.setdefault(cell, []).append(scale * summary[key])
    return cells


def print_analysis(name: str, runs: Path | None = None) -> str:
    """Markdown: the analysis' cells (``collect_analysis``) beside the paper's numbers."""
    a = E.ANALYSES[name]
    paper = {(k[2], k[3]): v for k, v in tables.load_paper_numbers().items() if k[:2] == a.paper}
    src = E.TABLES[a.source]
    if a.layout == "row":
        rows, cols = src.rows, tuple(a.columns)
    elif a.layout in ("best", "transpose"):
        rows, cols = tuple(a.columns), tuple(dict.fromkeys(e.column for e in analysis_runs(name)))
    else:
        rows, cols = src.rows, src.columns
    return f"### {a.title}\n\n" + tables.markdown_table(rows, cols, collect_analysis(name, runs), paper)


def run_step(a: argparse.Namespace, gpus: list[int] | None) -> None:
    """A step given an analysis name: ``analyze`` and ``all`` decode its runs of ``--seeds`` and print its
    table, ``table`` prints it; the other steps are for the source table (train and evaluate that first)."""
    if a.step in ("all", "analyze"):
        analyze(a.table, a.seeds, gpus, a.only, a.jobs, a.analysis_lines)
    if a.step in ("all", "analyze", "table"):
        print(print_analysis(a.table, a.runs))
