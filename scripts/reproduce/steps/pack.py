"""``pack``: the runs' resumable state (logs, scores, newest checkpoint of an unfinished run, best
checkpoint not yet scored) in batches small enough to leave a time-limited machine: --to DIR (carry.py)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import carry
import experiments as E
import results_csv

from . import common, run_files


def wanted_by_ensemble(e: E.Experiment, run_dir: Path) -> bool:
    """Whether the scored best checkpoint of the finished run ``run_dir`` is here and still needed for its
    configuration's ensemble (a table with an "ens." column whose decoded ensemble does not hold it)."""
    best = run_files.scored_checkpoint_here(run_dir)
    if not E.TABLES[e.table].ensemble or not (run_dir / "train.done").exists() or best is None:
        return False
    ens = results_csv.scores_of(run_dir.parent / "ensemble") or {}
    return (run_dir.name, best.name) not in run_files.ensemble_members(ens.get("checkpoints", []))


def run_step(a: argparse.Namespace, parser: argparse.ArgumentParser, todo: list[E.Experiment]) -> None:
    """Pack the trained runs of ``--seeds`` of ``todo`` into ``--to``; a finished seed's best checkpoint
    goes too while its configuration's ensemble does not hold it."""
    if a.to is None:
        parser.error("pack needs --to DIR")
    selected = [(e, common.WORK / e.run_dir / f"seed{s}") for e in todo for s in a.seeds
                if (common.WORK / e.run_dir / f"seed{s}" / "train.log").exists()]
    # finished runs first (scores and logs, small; an unfinished one loses only progress if its batch
    # does not come back), each group in the order selected
    selected.sort(key=lambda pair: not (pair[1] / "train.done").exists())
    runs = [run_dir for _, run_dir in selected]
    # a finished seed's best checkpoint left behind is lost with the machine, and its configuration's
    # ensemble with it (the run would have to be trained again): it travels until the ensemble holds it
    best_of = [] if a.with_best else [run_dir for e, run_dir in selected if wanted_by_ensemble(e, run_dir)]
    for run_dir in best_of:
        print(f"pack: {run_dir.relative_to(common.WORK)}: its best checkpoint goes too (weights only): the "
              "configuration's ensemble does not hold it yet", file=sys.stderr)
    # a decoded ensemble holds its seeds' best checkpoints, which then stay behind: its scores travel
    ensembles = [ens for ens in dict.fromkeys(run_dir.parent / "ensemble" for run_dir in runs)
                 if (ens / "scores.json").exists()]
    try:
        folders = carry.pack(runs, common.WORK, a.to, int(a.part_mib * carry.MIB), a.batch_files,
                             int(a.batch_mib * carry.MIB), with_best=a.with_best, best_of=best_of,
                             ensembles=ensembles)
    except carry.CarryError as err:
        raise SystemExit(f"pack: {err}") from None
    also = f" and {len(ensembles)} ensemble(s)" if ensembles else ""
    print(f"pack: {len(runs)} run(s){also} in {len(folders)} batch(es): " + " ".join(map(str, folders)))
