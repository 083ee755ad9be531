"""``evaluate``: the best checkpoint of each run (the highest "Validation accuracy" in its train.log; Peters
et al.: best validation accuracy) decoded with onmt_translate -beam_size 5 on the test set into
scores.json; for a table with an "ens." column also the ensemble of the seeds' best checkpoints
(-avg_raw_probs: averaged probabilities) into ensemble/."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import experiments as E
from pieces import device_name, step_of

from . import common, decode, run_files


def _decode_test(e: E.Experiment, models: list[Path], out: Path, gpu: int | None) -> dict:
    """Decode the test set with ``models`` (several: their ensemble) into ``out``: the scores, with the
    decoding options, seconds and device."""
    t0 = time.perf_counter()
    decode.translate(models, decode.test_source(e), out, gpu, e.decode)
    seconds = time.perf_counter() - t0
    return {"decode": list(e.decode), "translate_seconds": round(seconds, 1), "gpu": device_name(gpu),
            **decode.score(e, out)}


def evaluate(e: E.Experiment, seeds: list[int], gpu: int | None) -> None:
    """Score each of ``seeds``' best validated checkpoint not scored yet with these decoding options, then
    their ensemble when every seed given is here, validated, and every scored seed among them."""
    best, best_files, absent = [], [], []  # absent: seeds given without a validated checkpoint here
    for seed in seeds:
        run_dir = common.WORK / e.run_dir / f"seed{seed}"
        if not (run_dir / "train.log").exists():
            print(f"skip {run_dir}: not trained", file=sys.stderr)
            absent.append(run_dir.name)
            continue
        log = (run_dir / "train.log").read_text(encoding="utf-8")
        if (validated := run_files.best_validated(run_dir, log)) is None:
            absent.append(run_dir.name)
            continue
        ckpt, dev_acc = validated
        best.append(ckpt)
        best_files.append(run_files.checkpoint_file(run_dir, ckpt))
        if run_files.is_scored(run_dir / "scores.json", ckpt, "checkpoint", e.decode):
            continue
        if not best_files[-1].exists():  # a carried run whose best checkpoint stayed behind (carry.py)
            print(f"skip {run_dir}: its best checkpoint {Path(ckpt).name} is not on this machine", file=sys.stderr)
            continue
        result = {"checkpoint": ckpt, "step": step_of(ckpt), "dev_accuracy": dev_acc,
                  "finished": (run_dir / "train.done").exists(),
                  **_decode_test(e, [best_files[-1]], run_dir / "pred.test.txt", gpu)}
        (run_dir / "scores.json").write_text(json.dumps(result, indent=1) + "\n")
    ens = common.WORK / e.run_dir / "ensemble"
    if E.TABLES[e.table].ensemble and len(best) > 1 and not run_files.is_scored(ens / "scores.json", best,
                                                                                "checkpoints", e.decode):
        if absent:  # an ensemble of the others would pass for the configuration's and hold their best
            # checkpoints, which pack then leaves behind (carry.py): the seed given could never join it
            print(f"skip {ens}: no validated checkpoint here for {', '.join(absent)} (the ensemble is of every "
                  "seed given)", file=sys.stderr)
            return
        if not all(f.exists() for f in best_files):  # (runs carried without their scored best checkpoints)
            print(f"skip {ens}: not every seed's best checkpoint is on this machine", file=sys.stderr)
            return
        left_out = sorted(run_files.scored_seeds(common.WORK / e.run_dir) - run_files.ensemble_seeds(best))
        if left_out:  # the table's ens. column is the ensemble of every scored seed (collect)
            print(f"skip {ens}: the seeds given leave out the scored {', '.join(left_out)} (evaluate them "
                  "together for their ensemble)", file=sys.stderr)
            return
        ens.mkdir(parents=True, exist_ok=True)
        result = {"checkpoints": best, **_decode_test(e, best_files, ens / "pred.test.txt", gpu)}
        (ens / "scores.json").write_text(json.dumps(result, indent=1) + "\n")


def run_step(a: argparse.Namespace, todo: list[E.Experiment], gpus: list[int] | None) -> None:
    """The runs of ``--seeds`` of each experiment in ``todo``, ``--jobs`` experiments at a time over ``gpus``."""
    common.parallel(lambda e, gpu: evaluate(e, a.seeds, gpu), todo, a.jobs, gpus)
