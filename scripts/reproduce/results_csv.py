"""Finished runs as rows of a committed CSV file, the source of the reproduced tables.

A run's folder (runs/<family>/<name>/seed<S>/) holds its training log, checkpoints and, once
evaluated, scores.json; none of it is committed. ``record`` turns each evaluated run into one row of
docs/results/<table>.csv (replacing the row of the same run and commit), so that the table can be
printed on any machine, after the GPU machine that trained the runs is gone.

Columns (peters2019-table1): setting, output_alpha, attention_alpha, seed; epochs and steps = how
long the run trained (its last checkpoint); valid_acc = the best validation token accuracy, whose
checkpoint was decoded; test_acc / test_lev = exact match (%) and Levenshtein distance on the test
set, averaged over languages (the paper's metric); gpu, commit, date (UTC) of the run.
"""
from __future__ import annotations

import csv
import datetime
import json
import re
from pathlib import Path

COLUMNS = ("setting", "output_alpha", "attention_alpha", "seed", "epochs", "steps", "valid_acc", "test_acc",
           "test_lev", "gpu", "commit", "date")
KEY = ("setting", "output_alpha", "attention_alpha", "seed", "commit")
_NAME = re.compile(r"out([0-9.]+)-attn([0-9.]+)$")


def alphas(name: str) -> tuple[str, str]:
    """(output alpha, attention alpha) of a Table 1 row name such as ``out1.5-attn2``."""
    m = _NAME.search(name)
    if m is None:
        raise ValueError(f"not a Table 1 row name (outA-attnB): {name!r}")
    return m.group(1), m.group(2)


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and tuple(rows[0]) != COLUMNS:
        raise ValueError(f"{path}: columns {tuple(rows[0])}, expected {COLUMNS}")
    return rows


def write_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)  # (never a half-written results file)


def merge(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` with every row of ``new`` replacing the row of the same run and commit, or appended."""
    out = {tuple(r[k] for k in KEY): r for r in old}
    for r in new:
        out[tuple(r[k] for k in KEY)] = r
    return list(out.values())


def run_row(setting: str, name: str, seed: int, scores: dict, steps: int, steps_per_epoch: int,
            commit: str, date: str | None = None) -> dict:
    """One CSV row of an evaluated run (``scores``: its scores.json)."""
    out_a, attn_a = alphas(name)
    return {"setting": setting, "output_alpha": out_a, "attention_alpha": attn_a, "seed": str(seed),
            "epochs": f"{steps / steps_per_epoch:.1f}", "steps": str(steps),
            "valid_acc": f"{scores['dev_accuracy']:.2f}", "test_acc": f"{scores['accuracy']:.2f}",
            "test_lev": f"{scores['levenshtein']:.3f}", "gpu": scores.get("gpu", "unknown"), "commit": commit,
            "date": date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}


def latest_per_run(rows: list[dict]) -> list[dict]:
    """The newest row (by date, then file order) of each (setting, alphas, seed): a run trained again
    at a later commit replaces the earlier one in the table."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["setting"], r["output_alpha"], r["attention_alpha"], r["seed"])
        if key not in out or r["date"] >= out[key]["date"]:
            out[key] = r
    return list(out.values())


def cells(rows: list[dict], metric: str = "test_acc") -> dict[tuple[str, str], list[float]]:
    """{(row name, "<setting>-avg"): [metric of each seed]} for tables.markdown_table."""
    out: dict[tuple[str, str], list[float]] = {}
    for r in latest_per_run(rows):
        name = f"out{r['output_alpha']}-attn{r['attention_alpha']}"
        out.setdefault((name, f"{r['setting']}-avg"), []).append(float(r[metric]))
    return out


def scores_of(run_dir: Path) -> dict | None:
    path = run_dir / "scores.json"
    return json.loads(path.read_text()) if path.exists() else None
