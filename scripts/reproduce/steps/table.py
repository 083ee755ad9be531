"""``table``: markdown, the mean ± std over seeds of each cell (ours) beside the paper's numbers; the
tables that ``record`` keeps in a CSV are printed from it unless ``--runs`` names a runs/ tree."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import experiments as E
import results_csv
from pieces import VALID_ACCURACY, best_checkpoint

from onmt_entmax.evaluation import tables

from . import common, run_files


def collect(table: str, runs: Path | None = None) -> dict[tuple[str, str], list[float]]:
    """{(row, column): [metric of each seed]} from runs/<family>/<name>/seed*/scores.json, or, for the
    tables kept in a committed CSV and no ``runs`` folder given, from that file; an "ens." column's
    cell holds its ensemble's one score (``ensembles``)."""
    if table in common.CSV_TABLES and runs is None:
        cells = results_csv.cells(results_csv.read_rows(common.results_csv_path(table)))
        return cells | {k: [value] for k, (value, _) in ensembles(table).items()}
    spec, runs = E.TABLES[table], runs or common.WORK
    cells: dict[tuple[str, str], list[float]] = {}
    for e in common.experiments(table):
        base = runs / e.run_dir
        values = [json.loads(p.read_text())[spec.metric] for p in sorted(base.glob("seed*/scores.json"))]
        if not values and spec.metric == "dev_accuracy":  # Figure 4 needs no test decoding: read the logs
            values = [best_checkpoint(p.read_text(encoding="utf-8"))[1] for p in sorted(base.glob("seed*/train.log"))
                      if VALID_ACCURACY.search(p.read_text(encoding="utf-8"))]
        col = f"{e.column}-avg" if spec.ensemble else e.column
        if values:
            cells[(e.row, col)] = values
    return cells | {k: [value] for k, (value, _) in ensembles(table, runs).items()}


def ensembles(table: str, runs: Path | None = None) -> dict[tuple[str, str], tuple[float, int]]:
    """{(row, "<setting>-ens"): (metric, number of seeds averaged)}: from <table>-ensembles.csv for the
    tables kept in a committed CSV and no ``runs`` folder given, else from runs/.../ensemble/scores.json,
    the ensemble of every scored seed only (not one that `evaluate --seeds 2 3` decoded beside seed 1)."""
    if table in common.CSV_TABLES and runs is None:
        rows = results_csv.read_rows(common.ensembles_csv_path(table), results_csv.ENSEMBLE_COLUMNS)
        return results_csv.ensemble_cells(rows)
    spec, runs, out = E.TABLES[table], runs or common.WORK, {}
    for e in common.experiments(table) if spec.ensemble else []:
        base = runs / e.run_dir
        ens = results_csv.scores_of(base / "ensemble")
        if ens is None:
            continue
        seeds = (run_files.ensemble_seeds(ens["checkpoints"]) if "checkpoints" in ens
                 else run_files.scored_seeds(base))
        if seeds == run_files.scored_seeds(base):
            out[(e.row, f"{e.column}-ens")] = (ens[spec.metric], len(seeds))
    return out


def print_table(table: str, runs: Path | None = None) -> str:
    """Markdown: ``collect``'s cells beside the paper's (Table 1 also the paper's rows of other systems)."""
    spec = E.TABLES[table]
    paper = {}
    if spec.paper[0]:
        paper = {(k[2], k[3]): v for k, v in tables.load_paper_numbers().items() if k[:2] == spec.paper}
    sizes = {k: f"{n} seeds" for k, (_, n) in ensembles(table, runs).items()}  # an ens. cell: how many it averages
    text = f"### {spec.title}\n\n" + tables.markdown_table(spec.rows, spec.columns, collect(table, runs), paper,
                                                            labels=sizes)
    if table == "peters2019-table1":
        extra = {k: v for k, v in paper.items() if k[0] not in spec.rows}
        if extra:
            rows = sorted({r for r, _ in extra})  # (the paper's other systems: their rows, without the header)
            text += "\n" + tables.markdown_table(rows, spec.columns, {}, extra).split("\n", 2)[2]
    return text


def run_step(a: argparse.Namespace) -> None:
    """The table ``a.table`` (of ``--runs`` if given)."""
    print(print_table(a.table, a.runs))
