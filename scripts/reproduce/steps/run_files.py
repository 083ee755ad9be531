"""What a run's folder holds, as the steps read it: the checkpoint its training log names, its scores
(and for which checkpoint and decoding options), and the seeds of its configuration's ensemble."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import results_csv
from pieces import best_checkpoint

from . import common


def checkpoint_file(run_dir: Path, logged: str) -> Path:
    """The checkpoint a training log names, on this machine: the logged path (relative: under WORK), or
    the file of that name in the run's folder (a run carried from another machine: carry.py)."""
    path = Path(logged) if Path(logged).is_absolute() else common.WORK / logged
    return path if path.exists() else run_dir / path.name


def scored_checkpoint_here(run_dir: Path) -> Path | None:
    """The checkpoint the run's scores.json scores, if it is on this machine (an ensemble needs it here)."""
    logged = (results_csv.scores_of(run_dir) or {}).get("checkpoint")
    return None if logged is None or not (path := checkpoint_file(run_dir, logged)).exists() else path


def is_scored(path: Path, checkpoint, key: str, decode: tuple[str, ...]) -> bool:
    """Whether ``path`` holds the scores of this checkpoint (or list) decoded with these options: a run
    resumed after it was evaluated has a newer best checkpoint, and is decoded again, as is one scored
    with other decoding options (scores written before they were recorded have none)."""
    if not path.exists():
        return False
    done = json.loads(path.read_text())
    return done.get(key) == checkpoint and done.get("decode") == list(decode)


def best_validated(run_dir: Path, log: str) -> tuple[str, float] | None:
    """(checkpoint, validation accuracy) of the best validation in a run's training log, or None (said on
    stderr) before its first validation with a checkpoint: nothing to decode yet."""
    try:
        return best_checkpoint(log)
    except ValueError as err:
        print(f"skip {run_dir}: {err}", file=sys.stderr)
        return None


def scored_seeds(base: Path) -> set[str]:
    """The seed folders (``seed1``, ...) of an experiment's folder that have test scores."""
    return {p.parent.name for p in base.glob("seed*/scores.json")}


def ensemble_seeds(checkpoints: list[str]) -> set[str]:
    """The seed folders an ensemble's checkpoints (their logged paths) come from."""
    return {Path(c).parent.name for c in checkpoints}


def ensemble_members(checkpoints: list[str]) -> set[tuple[str, str]]:
    """(seed folder, checkpoint file name) of each of an ensemble's checkpoints (their logged paths)."""
    return {(Path(c).parent.name, Path(c).name) for c in checkpoints}
