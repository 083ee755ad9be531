"""What the steps share: where the work lives, the command runner, the experiments ``--only`` selects
and the committed results files."""
from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path

import experiments as E

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data"
WORK = ROOT  # where work/data, work/downloads and runs/ live (config paths are relative to it)
TRANSLATE_BATCH = 64  # sentences per onmt_translate batch (--translate-batch: larger on a GPU)
RESULTS = ROOT / "docs" / "results"
CSV_TABLES = {"peters2019-table1", "peters2019-table1-fork"}  # printed from their committed CSV (results_csv.py)


def gpu_env(gpu: int | None) -> dict | None:
    """The environment that puts a child process on GPU ``gpu`` as its device 0 (one-GPU onmt_train
    always trains on device 0, whatever -gpu_ranks says); None (inherit) for the CPU."""
    return None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}


def run(cmd: list[str], cwd: Path | None = None, log: Path | None = None, gpu: int | None = None) -> None:
    """Run a command in ``cwd`` (default WORK), on GPU ``gpu`` if given; with ``log``, stdout and
    stderr go to that file. A failed command stops the script with a message that names it, its exit
    status and its log (whose last lines it quotes), not with a Python traceback."""
    cwd, env = cwd or WORK, gpu_env(gpu)
    on = "" if gpu is None else f"CUDA_VISIBLE_DEVICES={gpu} "
    print("+", on + " ".join(map(str, cmd)), *([">", log] if log else []), flush=True)
    if log is None:
        rc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env).returncode
        if rc != 0:
            raise SystemExit(f"reproduce.py: {Path(str(cmd[0])).name} failed (exit status {rc}); its output is above")
        return
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.run([str(c) for c in cmd], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = "".join(Path(log).read_text(encoding="utf-8", errors="replace").splitlines(True)[-15:])
        raise SystemExit(f"reproduce.py: {Path(str(cmd[0])).name} failed (exit status {proc.returncode}); "
                         f"the last lines of {log}:\n{tail.rstrip()}")


def globs_of(only: str | list[str] | None) -> list[str]:
    """``--only`` as a list of globs (a single glob, a list of them, or none)."""
    return [only] if isinstance(only, str) else list(only or [])


def selected(name: str, only: str | list[str] | None) -> bool:
    """Whether an experiment name matches ``only``: a glob or a list of globs (any of them); None: all."""
    return not only or any(fnmatch.fnmatch(name, pattern) for pattern in globs_of(only))


def experiments(table: str, only: str | list[str] | None = None) -> list[E.Experiment]:
    """The experiments of ``table`` that ``only`` selects, in the order its globs name them (each
    glob's matches in the table's order), so that ``train --jobs N`` starts the first N named first."""
    if table not in E.TABLES:
        raise SystemExit(f"unknown table {table!r}; tables: {', '.join(E.TABLES)}")
    found = [e for e in E.all_experiments() if e.table == table]
    check_only(only, [e.name for e in found], table)
    ordered: list[E.Experiment] = []
    for glob in globs_of(only) or ["*"]:
        ordered += [e for e in found if selected(e.name, glob) and e not in ordered]
    return ordered


def check_only(only: str | list[str] | None, names: list[str], table: str) -> None:
    """Refuse, in one line, an ``--only`` glob that matches none of ``names`` (a typo would otherwise
    select nothing and the command would do nothing without a word)."""
    unmatched = [g for g in globs_of(only) if not any(selected(n, g) for n in names)]
    if unmatched:
        raise SystemExit(f"--only {' '.join(unmatched)}: no experiment of {table} matches; its names: "
                         + ", ".join(names))


def parallel(fn, items: list, jobs: int, gpus: list[int] | None = None) -> None:
    """fn(item, gpu) over items, ``jobs`` at a time (each call mostly waits on an onmt_translate
    process), item i on GPU gpus[i % len(gpus)] (None: the CPU)."""
    on = [gpus[i % len(gpus)] if gpus else None for i in range(len(items))]
    if jobs <= 1:
        for item, gpu in zip(items, on):
            fn(item, gpu)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(jobs) as pool:
        for _ in pool.map(fn, items, on):  # re-raises the first failure
            pass


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def results_csv_path(table: str) -> Path:
    return RESULTS / f"{table}.csv"


def curves_csv_path(table: str) -> Path:
    return RESULTS / f"{table}-validation.csv"


def ensembles_csv_path(table: str) -> Path:
    return RESULTS / f"{table}-ensembles.csv"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""
