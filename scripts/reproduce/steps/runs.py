"""``runs``: markdown, a row a recorded run (the tables kept in a CSV): its length, how it ended, its best
validation and the epoch of it, the learning-rate halvings, its test scores."""
from __future__ import annotations

import argparse

import results_csv

from . import common


def print_runs(table: str, seeds: list[int], only) -> str:
    """Markdown, a row a run recorded in <table>.csv (``seeds`` of the configurations ``only`` selects):
    epochs (steps), how it ended, best validation and its epoch (step), the epochs whose validation halved
    the learning rate, test scores (``results_csv.run_summary``)."""
    if table not in common.CSV_TABLES:
        raise SystemExit(f"runs: {table} is not recorded in a CSV; tables that are: "
                         f"{', '.join(sorted(common.CSV_TABLES))}")
    recorded = results_csv.latest_per_run(results_csv.read_rows(common.results_csv_path(table)))
    runs = {results_csv.run_key(r): r for r in recorded}
    curves: dict[tuple, list[dict]] = {}
    for v in results_csv.read_rows(common.curves_csv_path(table), results_csv.CURVE_COLUMNS):
        curves.setdefault(results_csv.run_key(v), []).append(v)
    rows = ["| setting | output α / attention α, seed | epochs (steps) | ended by | best validation token acc. | "
            "its epoch (step) | learning rate halved at epochs | test exact match | test Levenshtein |",
            "|---" * 9 + "|"]
    for e in common.experiments(table, only):
        out_alpha, attn_alpha = results_csv.alphas(e.name)
        for seed in seeds:
            key = (e.column, out_alpha, attn_alpha, str(seed))  # (results_csv.run_key of its rows)
            if (run := runs.get(key)) is None:
                continue
            r = results_csv.run_summary(run, curves.get(key, []), e.config.get("train_steps"))
            best = "–" if r["best_step"] is None else f"{r['best_epoch']} ({r['best_step']:,})"
            rows.append(f"| {e.column} | {out_alpha} / {attn_alpha}, seed {seed} | {r['epochs']} ({r['steps']:,}) | "
                        f"{r['ended']} | {r['valid_acc']} | {best} | {', '.join(map(str, r['halved'])) or '–'} | "
                        f"{r['test_acc']} | {r['test_lev']} |")
    return "\n".join(rows)


def run_step(a: argparse.Namespace) -> None:
    """The recorded runs of ``--seeds`` of the experiments ``--only`` selects."""
    print(print_runs(a.table, a.seeds, a.only))
