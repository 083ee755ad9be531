"""``train``: onmt_build_vocab once per corpus, then onmt_train -config C -seed S into
runs/<family>/<name>/seed<S>/, in resumable pieces (pieces.py), several at a time over the GPUs."""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
from pathlib import Path

import experiments as E
import mps
from pieces import run_pieces

from . import common


def build_vocab(cfg: dict, config: Path | str, cwd: Path | None = None) -> None:
    """onmt_build_vocab over the whole training data, once per corpus (skipped when the files exist).

    The vocabularies are written under temporary names and renamed once complete, holding a lock beside
    them: a build killed midway (a lease's end) leaves no partial file that the next runner would take
    for the vocabulary, and two runners started at once on one corpus build it once, not over each other."""
    cwd = cwd or common.WORK
    finals = [cwd / cfg[k] for k in ("src_vocab", "tgt_vocab")]
    if all(p.exists() for p in finals):
        return
    finals[0].parent.mkdir(parents=True, exist_ok=True)
    with open(finals[0].with_name(finals[0].name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when this process dies
        if all(p.exists() for p in finals):  # built by the runner that held the lock before
            return
        part = {p: p.with_name(f"{p.name}.part{os.getpid()}") for p in finals}  # one part for a shared path
        common.run(["onmt_build_vocab", "-config", config, "-n_sample", "-1", "-overwrite",
                    "-src_vocab", part[finals[0]], "-tgt_vocab", part[finals[1]],
                    "-save_data", Path(cfg["src_vocab"]).parent / "onmt_sample"], cwd=cwd)
        for final, tmp in part.items():
            if not tmp.exists():
                raise SystemExit(f"reproduce.py: onmt_build_vocab wrote no {final} (config {config})")
            os.replace(tmp, final)


def train_command(e: E.Experiment, seed: int, gpu: bool, extra: list[str] = ()) -> list[str]:
    """onmt_train for one seed, on a GPU or the CPU (pieces.run_pieces picks the GPU by
    CUDA_VISIBLE_DEVICES and adds -train_from when a piece ran before)."""
    run_dir = common.WORK / e.run_dir / f"seed{seed}"
    gpu_args = ["-world_size", "1", "-gpu_ranks", "0"] if gpu else []
    return [str(c) for c in ["onmt_train", "-config", common.ROOT / e.path, "-seed", str(seed),
                             "-save_model", run_dir / "model", *gpu_args, *extra]]


def train_all(runs: list[tuple[E.Experiment, int]], gpus: list[int] | None, extra: list[str] = (), jobs: int = 1,
              max_minutes: float | None = None, resume_only: bool = False, retries: int = 1) -> list[Path]:
    """Train (experiment, seed) pairs, ``jobs`` at a time spread over ``gpus`` (None: the CPU; small
    models leave a GPU mostly idle, so several share one), in pieces of at most ``max_minutes`` (see
    pieces.py; ``resume_only``: only continue runs that have a checkpoint; ``retries``: starts again of a
    failed piece). Returns the unfinished runs."""
    return run_pieces([(common.WORK / e.run_dir / f"seed{s}", train_command(e, s, bool(gpus), list(extra)))
                       for e, s in runs], common.WORK, jobs, max_minutes, gpus or None, resume_only, retries)


def train(e: E.Experiment, seed: int, gpu: int | None, extra: list[str] = ()) -> Path:
    """onmt_train -config <e> -seed <seed> into runs/.../seed<seed>/ (skipped if it finished before,
    resumed from its newest checkpoint if a piece of it ran before)."""
    train_all([(e, seed)], None if gpu is None else [gpu], extra)
    return common.WORK / e.run_dir / f"seed{seed}"


def run_step(a: argparse.Namespace, todo: list[E.Experiment], gpus: list[int] | None) -> None:
    """The vocabularies of ``todo``'s corpora, then its runs of ``--seeds`` (under MPS with ``--mps``)."""
    for e in todo:
        build_vocab(e.config, common.ROOT / e.path)
    try:
        with mps.daemon() if a.mps else contextlib.nullcontext():
            unfinished = train_all([(e, seed) for e in todo for seed in a.seeds], gpus, a.train_args.split(),
                                   jobs=a.jobs, max_minutes=a.max_minutes, resume_only=a.resume_only,
                                   retries=a.retries)
    except mps.MpsError as err:
        raise SystemExit(str(err)) from None
    if unfinished and a.step == "all":
        print("evaluating the newest validated checkpoints of the unfinished runs too", flush=True)
