"""``record``: for peters2019-table1 and peters2019-table1-fork, one row per finished, evaluated run into
docs/results/<table>.csv, its validations into docs/results/<table>-validation.csv, its languages'
scores into <table>-languages.csv, and the ensemble of a configuration's finished seeds into
<table>-ensembles.csv (from train.log and scores.json)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import experiments as E
import results_csv

from . import common, run_files


def ensemble_record(e: E.Experiment, runs: Path, commit: str) -> dict | None:
    """The <table>-ensembles.csv row of ``e``'s ensemble/scores.json when it averages every scored seed,
    each finished (train.done) and scored at the checkpoint the ensemble holds; else None, and why on
    stderr where an ensemble was decoded."""
    base = runs / e.run_dir
    ens = results_csv.scores_of(base / "ensemble")
    if ens is None or not E.TABLES[e.table].ensemble:
        return None
    members = run_files.ensemble_members(ens.get("checkpoints", []))
    seeds, scored = run_files.ensemble_seeds(ens.get("checkpoints", [])), run_files.scored_seeds(base)
    why = None
    if seeds != scored:
        why = (f"it averages {', '.join(sorted(seeds)) or 'no named seeds'}, "
               f"the scored seeds are {', '.join(sorted(scored))}")
    for s in sorted(seeds) if why is None else []:
        best = (results_csv.scores_of(base / s) or {}).get("checkpoint")
        if not (base / s / "train.done").exists():
            why = f"{s} has not finished"
        elif best is not None and (s, Path(best).name) not in members:
            why = f"{s} was scored at {Path(best).name}, not the checkpoint the ensemble holds (evaluate again)"
        if why:
            break
    if why:
        print(f"record: no ensemble row for {e.name}: {why}", file=sys.stderr)
        return None
    return results_csv.ensemble_row(e.column, e.row, sorted(int(s[len("seed"):]) for s in seeds), ens, commit)


def record(table: str, seeds: list[int], only: str | list[str] | None = None, commit: str | None = None,
           runs: Path | None = None, out: Path | None = None) -> list[dict]:
    """One row per finished, evaluated run of ``table`` (train.done: the stop rule or the step cap ended
    it; scores.json) into its CSV (``out``, default docs/results/<table>.csv), replacing the rows of the
    same run (setting, alphas, seed), and the run's validations into <out>-validation.csv, its languages'
    test scores into <out>-languages.csv; an evaluated run that has not finished is named on stderr and
    gets no row. The ensemble of a configuration's scored seeds, all finished, goes into
    <out>-ensembles.csv (``ensemble_record``; whatever ``seeds`` says), replacing its earlier one. A run
    or ensemble whose rows would not change but for commit and date keeps them as they are (recording
    the seeds again to add their ensemble does not claim their rows for this commit). Returns the new
    run rows. Reads only train.done, scores.json and train.log, so it runs wherever those files were
    copied."""
    if table not in common.CSV_TABLES:
        raise SystemExit(f"record: only {', '.join(sorted(common.CSV_TABLES))} keep their results in a CSV file")
    commit = commit or common.git_commit()
    if not commit:
        raise SystemExit("record: no git checkout here to read the commit from; pass --commit")
    runs, out = runs or common.WORK, out or common.results_csv_path(table)
    curves_out = out.with_name(f"{out.stem}-validation.csv")
    languages_out = out.with_name(f"{out.stem}-languages.csv")
    old_rows = results_csv.read_rows(out)
    old_curves = results_csv.read_rows(curves_out, results_csv.CURVE_COLUMNS)
    old_languages = results_csv.read_rows(languages_out, results_csv.LANGUAGE_COLUMNS)
    new, curves, languages, kept = [], [], [], 0
    for e in common.experiments(table, only):
        epoch = E.SIGMORPHON[e.column]["epoch"]
        for seed in seeds:
            run_dir = runs / e.run_dir / f"seed{seed}"
            scores = results_csv.scores_of(run_dir)
            log = (run_dir / "train.log").read_text(encoding="utf-8") if (run_dir / "train.log").exists() else ""
            steps = results_csv.last_saved_step(log)
            if scores is None or steps is None:
                continue
            if not (run_dir / "train.done").exists():
                print(f"record: {e.name}/seed{seed} is evaluated but not finished (no train.done): no row "
                      "until it ends by the stop rule or the step cap (`status` says how far it got)",
                      file=sys.stderr)
                continue
            row = results_csv.run_row(e.column, e.row, seed, scores, steps, epoch, commit,
                                      devices=results_csv.training_devices(log))
            curve = results_csv.curve_rows(e.column, e.row, seed, log, epoch, commit)
            scored = results_csv.language_rows(e.column, e.row, seed, scores, commit)
            if (results_csv.unchanged(old_rows, [row]) and results_csv.unchanged(old_curves, curve)
                    and results_csv.unchanged(old_languages, scored)):
                kept += 1
                continue
            new.append(row)
            curves += curve
            languages += scored
    results_csv.write_rows(out, results_csv.sorted_rows(results_csv.merge(old_rows, new)))
    results_csv.write_rows(curves_out, results_csv.sorted_rows(results_csv.merge(old_curves, curves), "step"),
                           results_csv.CURVE_COLUMNS)
    results_csv.write_rows(languages_out, results_csv.sorted_rows(results_csv.merge(old_languages, languages),
                                                                  "language"), results_csv.LANGUAGE_COLUMNS)
    ensembles_out = out.with_name(f"{out.stem}-ensembles.csv")
    old_ensembles = results_csv.read_rows(ensembles_out, results_csv.ENSEMBLE_COLUMNS)
    ensembles = [row for e in common.experiments(table, only)
                 if (row := ensemble_record(e, runs, commit)) is not None
                 and not results_csv.unchanged(old_ensembles, [row], results_csv.ENSEMBLE_KEY)]
    if ensembles:
        results_csv.write_rows(ensembles_out, results_csv.sorted_ensemble_rows(
            results_csv.merge(old_ensembles, ensembles, results_csv.ENSEMBLE_KEY)), results_csv.ENSEMBLE_COLUMNS)
    print(f"{len(new)} row(s) recorded in {out}, {len(curves)} validation(s) in {curves_out}, "
          f"{len(languages)} language score(s) in {languages_out}, {len(ensembles)} ensemble(s) in {ensembles_out}"
          + (f"; {kept} run(s) unchanged since recorded, left as they were" if kept else ""))
    return new


def run_step(a: argparse.Namespace) -> None:
    """``record``, or ``all``'s record of a table kept in a CSV: skipped, and said how to record later, where
    no commit is given and no git checkout holds one (a copy without .git, e.g. a GPU machine)."""
    if a.step == "record":
        record(a.table, a.seeds, a.only, a.commit, a.runs)
    elif a.table in common.CSV_TABLES:
        if a.commit or common.git_commit():
            record(a.table, a.seeds, a.only, a.commit, a.runs)
        else:  # (the runs are kept, record them later)
            print(f"record skipped: no git checkout to read the commit from; run "
                  f"`reproduce.py record {a.table} --commit HASH` (with --runs DIR where the runs were copied)")
