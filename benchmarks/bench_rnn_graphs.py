"""RNN training steps/s with the decoder's steps as CUDA graphs (``rnn_cuda_graphs``) against the eager
decoder: stock ``onmt_train`` (this plugin active), the same config and seed otherwise.

Each variant trains ``--steps`` steps; with ``--gpus 0 1`` the two run side by side, one a GPU (with
one GPU, one after the other). Steps/s come from the timestamps of OpenNMT-py's report lines, summed
over the report windows from step ``--skip`` on (by then the shapes are captured) that hold no
validation; a window that holds one gives the validation's seconds: the window less its steps at the
run's rate. The validation accuracies are listed too: the variants start from the same weights, and
only their dropout draws differ.

    python benchmarks/bench_rnn_graphs.py configs/peters2019-sigmorphon/medium/out1.5-attn1.5.yaml \\
        --gpus 0 1 --steps 3000 --valid-steps 1490 --workdir OUT/rnn-graphs
    python benchmarks/bench_rnn_graphs.py configs/examples/rnn-entmax15.yaml --steps 20 --report-every 5 \\
        --valid-steps 10 --skip 5    # CPU: checks the script (no graphs there)
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"eager": False, "CUDA graphs": True}  # name -> rnn_cuda_graphs
STAMP = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO\] "


def _time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")


def reports(log: str) -> list[tuple[int, dt.datetime]]:
    """(step, time) of each ``Step N/ M`` report line."""
    return [(int(m.group(2)), _time(m.group(1))) for m in re.finditer(STAMP + r"Step (\d+)/", log)]


def validations(log: str) -> list[tuple[dt.datetime, float]]:
    """(time, accuracy) of each ``Validation accuracy`` line."""
    return [(_time(m.group(1)), float(m.group(2)))
            for m in re.finditer(STAMP + r"Validation accuracy: ([\d.]+)", log)]


def speed(log: str, skip: int) -> tuple[float, list[float]]:
    """(steps/s over the report windows from step ``skip`` without a validation, the seconds of each
    validation inside a window from ``skip`` on)."""
    marks, valid = reports(log), [t for t, _ in validations(log)]
    plain, with_valid = [], []
    for (s0, t0), (s1, t1) in zip(marks, marks[1:]):
        if s0 < skip:
            continue
        window = (s1 - s0, (t1 - t0).total_seconds())
        (with_valid if any(t0 < t <= t1 for t in valid) else plain).append(window)
    if not plain:
        raise ValueError(f"no report window from step {skip} on without a validation: train more steps")
    rate = sum(n for n, _ in plain) / sum(s for _, s in plain)
    return rate, [s - n / rate for n, s in with_valid]


def add_run_options(ap: argparse.ArgumentParser, steps: int, skip: int, workdir: str) -> None:
    """The options of a benchmark that trains whole onmt_train runs and reads their rates with ``speed``."""
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--report-every", type=int, default=250)
    ap.add_argument("--skip", type=int, default=skip, help="report windows before this step are left out")
    ap.add_argument("--workdir", type=Path, default=ROOT / "runs" / workdir)


def variant_config(config: Path, workdir: Path, name: str, graphs: bool) -> Path:
    """The config with rnn_cuda_graphs set, saving into workdir (vocabularies built there when the
    config's are missing)."""
    cfg = yaml.safe_load(config.read_text())
    cfg["rnn_cuda_graphs"] = graphs
    cfg["save_model"] = str(workdir / name / "model")
    vocabs = [ROOT / cfg[k] for k in ("src_vocab", "tgt_vocab")]
    if not all(v.exists() for v in vocabs):
        cfg["src_vocab"], cfg["tgt_vocab"] = str(workdir / "vocab.src"), str(workdir / "vocab.tgt")
    path = workdir / f"{name.replace(' ', '-')}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    if not Path(cfg["src_vocab"]).exists():
        subprocess.run([sys.executable, "-m", "onmt.bin.build_vocab", "-config", str(path), "-n_sample", "-1"],
                       cwd=ROOT, check=True, capture_output=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", type=Path, help="an onmt_train YAML of an input-feed RNN (run from the repo root)")
    ap.add_argument("--gpus", type=int, nargs="*", default=[], help="GPU ids (none: CPU)")
    ap.add_argument("--valid-steps", type=int, default=1490)
    add_run_options(ap, steps=3000, skip=1500, workdir="bench-rnn-graphs")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    procs = []
    for i, (name, graphs) in enumerate(VARIANTS.items()):
        cfg = variant_config(args.config, args.workdir, name, graphs)
        cmd = [sys.executable, "-m", "onmt.bin.train", "-config", str(cfg), "-train_steps", str(args.steps),
               "-valid_steps", str(args.valid_steps), "-save_checkpoint_steps", str(10 * args.steps),
               "-report_every", str(args.report_every), "-early_stopping", "0"]
        env = dict(os.environ)
        if args.gpus:
            cmd += ["-world_size", "1", "-gpu_ranks", "0"]
            env["CUDA_VISIBLE_DEVICES"] = str(args.gpus[i % len(args.gpus)])
        log = args.workdir / f"{cfg.stem}.log"
        procs.append((name, log, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"),
                                                  stderr=subprocess.STDOUT)))
        if len(args.gpus) < len(VARIANTS):
            procs[-1][2].wait()  # one device: the variants one after the other
    rows = []
    for name, log, proc in procs:
        if proc.wait() != 0:
            sys.exit(f"{name}: onmt_train failed, see {log}")
        text = log.read_text()
        rate, valid = speed(text, args.skip)
        rows.append((name, rate, valid, [a for _, a in validations(text)]))
    side = "side by side, one a GPU" if len(args.gpus) >= len(VARIANTS) else "one after the other"
    print(f"{args.config}: {args.steps} steps, {side}; steps/s from step {args.skip} on, windows without a "
          "validation\n")
    print("| decoder | steps/s | vs eager | validation s | validation accuracies |\n|---|---|---|---|---|")
    for name, rate, valid, accs in rows:
        seconds = ", ".join(f"{s:.1f}" for s in valid) or "–"
        print(f"| {name} | {rate:.1f} | {rate / rows[0][1]:.2f}x | {seconds} | {', '.join(map(str, accs))} |")


if __name__ == "__main__":
    main()
