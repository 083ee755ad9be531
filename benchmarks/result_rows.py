"""Rows of a benchmark family's CSV, benchmarks/results/FAMILY.csv, which `benchmarks/report.py --results`
renders into docs/benchmarks.md (the newest row of each case shown, so a re-run replaces it there).

A row is one case of one run: the machine (GPU, driver, torch, Triton, commit, date), the command, the case,
ours, the baseline and their ratio, then the family's own columns (FIELDS). The benchmark scripts append
theirs with `--csv DIR`:

    python3 benchmarks/bench_kernels.py --csv benchmarks/results     # losses.csv and attention.csv
"""
from __future__ import annotations

import csv
import datetime
import os
import shlex
import subprocess
import sys
from pathlib import Path

COMMON = ["gpu", "driver", "torch", "triton", "commit", "date", "command", "case", "ours", "baseline", "ratio"]
_OP = ["op", "units", "pypi_ratio"]
_RUNS = ["setup", "units", "detail"]
FIELDS = {
    "losses": COMMON + _OP,
    "attention": COMMON + _OP,
    "training": COMMON + ["data", "mode", "setup", "median_ratio", "median_low", "median_high", "rounds", "windows",
                          "steps", "check", "runs", "round_ratios"],
    "decoding": COMMON + ["data", "mode", "setup", "median_ratio", "median_low", "median_high", "output_words",
                          "long_lines", "identical_lines", "runs_ms", "whole_runs_s"],
    "decoding-steps": COMMON + ["data", "setup", "beam_steps", "aten_ops", "launches"],
    "cpu-ops": COMMON + _OP + ["setup"],
    **{f: COMMON + _RUNS for f in ("rnn-graphs", "rnn-host", "rnn-mps", "rnn-adam", "cpu-trainers")},
}


def _output(*cmd: str) -> str:
    try:  # in the repository whatever the working directory
        return subprocess.run(cmd, capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine(gpu: bool) -> dict:
    """The run's machine columns: the GPU's name (or the CPU's), the driver, torch, Triton, the commit
    (COMMIT=HASH where the copy has no .git; -dirty: not the commit alone) and today's date (UTC)."""
    import torch
    try:
        import triton
        triton_v = triton.__version__
    except ImportError:
        triton_v = ""
    if gpu:
        name = torch.cuda.get_device_name()
        driver = _output("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader").split("\n")[0]
    else:
        model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                     "") if os.path.exists("/proc/cpuinfo") else ""
        name, driver = f"CPU: {os.cpu_count()}-core {model}".rstrip(), ""
    commit = os.environ.get("COMMIT") or _output("git", "describe", "--always", "--dirty", "--abbrev=40")
    return {"gpu": name, "driver": driver, "torch": torch.__version__, "triton": triton_v, "commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}


def command() -> str:
    """This run's command as the document shows it: BENCH_COMMAND where run_gpu.sh set it (its OUT and
    MULTI30K_DIR placeholders), else the command line."""
    return os.environ.get("BENCH_COMMAND") or "python3 " + shlex.join(sys.argv)


def append(folder: Path, family: str, rows: list[dict], gpu: bool) -> Path:
    """Append rows (the case columns; the machine and command are added) to FOLDER/FAMILY.csv, the header
    written when the file is new; a column a row lacks stays empty."""
    fields = FIELDS[family]
    path = Path(folder) / f"{family}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {**machine(gpu), "command": command()}
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        if new:
            w.writeheader()
        for r in rows:
            unknown = set(r) - set(fields)
            assert not unknown, f"{family}.csv has no column {sorted(unknown)}"
            w.writerow({k: str({**head, **r}.get(k, "")) for k in fields})
    return path
