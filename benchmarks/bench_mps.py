"""Several trainers on one GPU, as they are and under MPS (``reproduce.py --mps``, scripts/reproduce/mps.py).

For each count in ``--trainers``, that many stock ``onmt_train`` runs of one config (seeds 1..N) train
``--steps`` steps side by side on GPU ``--gpu``: first as they are (the GPU time-slices between their
contexts), then as clients of one MPS daemon. Steps/s of each run come from its report lines' timestamps
from step ``--skip`` on (``bench_rnn_graphs.speed``: windows without a validation); "in all" is their sum.
The last report line's loss of each seed is compared across the two ways: MPS changes where kernels run,
not what they compute. ``--ways`` picks either way alone; each ``--set KEY=VALUE`` adds the config with
that one option changed, trained the same ways right after the config as given (an A/B in one run).

    python benchmarks/bench_mps.py configs/peters2019-sigmorphon/medium/out1.5-attn1.5.yaml --gpu 0 \\
        --trainers 2 4 --steps 2500 --skip 1000 --workdir OUT/mps
    python benchmarks/bench_mps.py configs/peters2019-sigmorphon/medium/out1.5-attn1.5.yaml --gpu 0 \\
        --trainers 3 --ways mps --set adam_fused=true --steps 1500 --skip 500    # torch's Adam against fused
    python benchmarks/bench_mps.py configs/examples/rnn-entmax15.yaml --trainers 2 --steps 20 \\
        --report-every 5 --skip 5     # CPU: checks the script (the trainers as they are only)
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rnn_graphs import add_run_options, speed, variant_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "reproduce"))
import mps  # noqa: E402


def train_side_by_side(config: Path, n: int, args, workdir: Path) -> list[str]:
    """The logs of ``n`` onmt_train runs (seeds 1..n) trained at the same time."""
    procs = []
    for seed in range(1, n + 1):
        cmd = [sys.executable, "-m", "onmt.bin.train", "-config", str(config), "-seed", str(seed),
               "-save_model", str(workdir / f"seed{seed}" / "model"), "-train_steps", str(args.steps),
               "-valid_steps", str(10 * args.steps), "-save_checkpoint_steps", str(10 * args.steps),
               "-report_every", str(args.report_every), "-early_stopping", "0"]
        env = dict(os.environ)
        if args.gpu is not None:
            cmd += ["-world_size", "1", "-gpu_ranks", "0"]
            env["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
        log = workdir / f"seed{seed}.log"
        workdir.mkdir(parents=True, exist_ok=True)
        procs.append((log, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)))
    for log, proc in procs:
        if proc.wait() != 0:
            sys.exit(f"onmt_train failed, see {log}")
    return [log.read_text() for log, _ in procs]


def with_option(config: Path, setting: str, workdir: Path) -> Path:
    """The config with one option changed: ``setting`` is ``KEY=VALUE``, the value read as YAML."""
    key, sep, value = setting.partition("=")
    if not sep or not key:
        sys.exit(f"--set {setting!r}: expected KEY=VALUE, e.g. adam_fused=true")
    cfg = yaml.safe_load(config.read_text())
    cfg[key] = yaml.safe_load(value)
    path = workdir / f"config-{key}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def last_loss(log: str) -> str:
    """The loss of the last report line (``… FY loss: 0.2471;`` or ``xent: …``)."""
    found = re.findall(r"Step \d+/ *\d+;.*?(?:loss|xent): ([\d.]+);", log)
    return found[-1] if found else "–"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", type=Path, help="an onmt_train YAML with its vocabularies built (run from the repo root)")
    ap.add_argument("--gpu", type=int, default=None, help="the GPU they share (none: the CPU, without MPS)")
    ap.add_argument("--trainers", type=int, nargs="+", default=[2, 4], help="how many side by side")
    ap.add_argument("--ways", nargs="+", choices=["as-is", "mps"], default=["as-is", "mps"],
                    help="as they are, under MPS, or both (a CPU: as they are only)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="also train the config with this option changed (repeatable: one variant each)")
    add_run_options(ap, steps=2500, skip=1000, workdir="bench-mps")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    # the config as it is (vocabularies built into workdir when the config's are missing)
    config = variant_config(args.config, args.workdir, "config",
                            bool(yaml.safe_load(args.config.read_text()).get("rnn_cuda_graphs", False)))
    variants = [("as given", config)] + [(setting, with_option(config, setting, args.workdir)) for setting in args.set]
    ways = [w for w in args.ways if args.gpu is not None or w == "as-is"]
    if not ways:
        sys.exit("--ways mps needs --gpu: MPS shares a GPU")
    rows = []
    for n in args.trainers:
        for way in ways:
            for v, (name, path) in enumerate(variants):
                workdir = args.workdir / f"{n}-{way}-{v}"
                try:
                    with mps.daemon() if way == "mps" else contextlib.nullcontext():
                        logs = train_side_by_side(path, n, args, workdir)
                except mps.MpsError as err:
                    sys.exit(str(err))
                rates = [speed(log, args.skip)[0] for log in logs]
                rows.append((n, "MPS" if way == "mps" else "as is", name, rates, [last_loss(log) for log in logs]))
    print(f"{args.config}: {args.steps} steps a run, seeds 1..N side by side on "
          f"{'GPU %d' % args.gpu if args.gpu is not None else 'the CPU'}; steps/s from step {args.skip} on\n")
    print("| trainers | way | config | steps/s each | in all | last loss of each seed |\n|---|---|---|---|---|---|")
    for n, way, name, rates, losses in rows:
        print(f"| {n} | {way} | {name} | {', '.join(f'{r:.1f}' for r in rates)} | {sum(rates):.1f} "
              f"| {', '.join(losses)} |")


if __name__ == "__main__":
    main()
