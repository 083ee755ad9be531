"""Markdown tables of our runs (mean ± std over seeds) beside the papers' numbers.

``paper_numbers.csv`` (next to this file) holds every number transcribed from the papers, keyed by
(paper, table, row, column). A cell of ours is the list of one score per seed; it is printed as
``mean ± std (n)``, std being the sample standard deviation (ddof = 1) as papers report the spread of
a few runs; a single run prints without ±, a missing one as ``–``.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.csv")


@dataclass(frozen=True)
class PaperNumber:
    paper: str
    table: str
    row: str
    column: str
    metric: str
    value: float
    std: float | None
    source: str
    note: str


def load_paper_numbers(path: str | Path = PAPER_NUMBERS) -> dict[tuple[str, str, str, str], PaperNumber]:
    """{(paper, table, row, column): PaperNumber}; lines starting with ``#`` are comments."""
    with open(path, encoding="utf-8") as f:
        reader = csv.DictReader(line for line in f if not line.startswith("#"))
        out = {}
        for rec in reader:
            num = PaperNumber(
                rec["paper"], rec["table"], rec["row"], rec["column"], rec["metric"],
                float(rec["value"]), float(rec["std"]) if rec["std"] else None, rec["source"], rec["note"],
            )
            key = (num.paper, num.table, num.row, num.column)
            if key in out:
                raise ValueError(f"{path}: duplicate paper number {key}")
            out[key] = num
    return out


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation sqrt(Σ(x - mean)² / (n - 1)); std is None for n < 2."""
    if not values:
        raise ValueError("mean_std of no values")
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))


def format_cell(values: Sequence[float] | None, digits: int = 2, label: str | None = None) -> str:
    """Mean ± std (n=seeds); ``label`` in place of the n, e.g. an ensemble's "3 seeds"."""
    if not values:
        return "–"
    mean, std = mean_std(values)
    if label is not None:
        return f"{mean:.{digits}f} ({label})"
    if std is None:
        return f"{mean:.{digits}f} (n=1)"
    return f"{mean:.{digits}f} ± {std:.{digits}f} (n={len(values)})"


def format_paper(num: PaperNumber | None, digits: int = 2) -> str:
    if num is None:
        return "–"
    if num.std is None:
        return f"{num.value:.{digits}f}"
    return f"{num.value:.{digits}f} ± {num.std:.{digits}f}"


def markdown_table(
    rows: Iterable[str],
    columns: Iterable[str],
    ours: Mapping[tuple[str, str], Sequence[float]],
    paper: Mapping[tuple[str, str], PaperNumber] | None = None,
    digits: int = 2,
    corner: str = "",
    labels: Mapping[tuple[str, str], str] | None = None,
) -> str:
    """One markdown table; each column gets an "ours" and a "paper" sub-column.

    ``ours[(row, column)]`` = scores over seeds; ``paper[(row, column)]`` = the paper's number;
    ``labels[(row, column)]`` = what a cell says in place of its number of seeds.
    """
    rows, columns, paper, labels = list(rows), list(columns), paper or {}, labels or {}
    head = [corner] + [f"{c} ({who})" for c in columns for who in ("ours", "paper")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r]
        for c in columns:
            cells.append(format_cell(ours.get((r, c)), digits, labels.get((r, c))))
            cells.append(format_paper(paper.get((r, c)), digits))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
