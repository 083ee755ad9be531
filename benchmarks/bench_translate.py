"""Beam-search decoding speed of `onmt_translate`: sparse models as a ratio to softmax, same settings.

Decodes the same source file with each variant's checkpoint from a `bench_train.py --workdir DIR`
run (one sub-folder per variant, each holding its last `model_step_*.pt`), and reports sentences/s
from the wall time of the whole `onmt_translate` call, model loading excluded by subtracting a run on
a one-line file ("run"). "steady" divides by the extra time of decoding the file twice over once
(the same lines, so the same kernels): costs paid once per process (loading each specialisation
of the Triton kernels a run meets, ~tens of ms each) cancel. This is a benchmark, not a test.

    python benchmarks/bench_train.py --gpu --workdir runs/bench --steps 300
    python benchmarks/bench_translate.py --workdir runs/bench --gpu --beam 5 --lines 1000
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path


def last_checkpoint(folder: Path) -> Path:
    steps = sorted(folder.glob("model_step_*.pt"), key=lambda p: int(re.findall(r"\d+", p.name)[-1]))
    if not steps:
        sys.exit(f"no model_step_*.pt in {folder}: run benchmarks/bench_train.py --workdir first")
    return steps[-1]


MAX_LENGTH = 100


def timed_translate(model: Path, src: Path, out: Path, args: argparse.Namespace) -> float:
    cmd = ["onmt_translate", "-model", str(model), "-src", str(src), "-output", str(out),
           "-beam_size", str(args.beam), "-batch_size", str(args.batch),
           "-max_length", str(args.fixed_length or MAX_LENGTH)]
    if args.fixed_length:  # EOS forbidden before, every hypothesis cut at: N steps for every model
        cmd += ["-min_length", str(args.fixed_length)]
    if args.gpu:
        cmd += ["-gpu", "0"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--src", type=Path, default=None, help="source file (default: the first lines of train.src)")
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--repeat", type=int, default=2, help="time the N- and 2N-line runs this often, keep the fastest")
    ap.add_argument("--fixed-length", type=int, default=0,
                    help="decode exactly N steps per sentence (-min_length N -max_length N): the time per "
                         "step, whatever length each model's hypotheses would have")
    args = ap.parse_args()
    src_all = args.src or next(iter(sorted(args.workdir.glob("train.*"))))
    lines = src_all.read_text().splitlines()[: args.lines]
    src, one = args.workdir / "bench_translate.src", args.workdir / "bench_translate_one.src"
    src.write_text("\n".join(lines) + "\n")
    twice = args.workdir / "bench_translate_twice.src"
    twice.write_text("\n".join(lines + lines) + "\n")
    one.write_text(lines[0] + "\n")
    rows, steady, words, at_max = {}, {}, {}, {}
    max_len = args.fixed_length or MAX_LENGTH
    for folder in sorted(p for p in args.workdir.iterdir() if p.is_dir()):
        model = last_checkpoint(folder)
        # the first run compiles the Triton kernels into the on-disk cache: not timed
        timed_translate(model, one, folder / "one.out", args)
        startup = timed_translate(model, one, folder / "one.out", args)
        total = min(timed_translate(model, src, folder / "bench.out", args) for _ in range(args.repeat))
        if total <= startup:
            sys.exit(f"{folder.name}: {len(lines)} lines took {total:.2f}s, no more than one line "
                     f"({startup:.2f}s): use more --lines")
        rows[folder.name] = len(lines) / (total - startup)
        total2 = min(timed_translate(model, twice, folder / "twice.out", args) for _ in range(args.repeat))
        steady[folder.name] = len(lines) / (total2 - total) if total2 > total else float("nan")
        lengths = [len(line.split()) for line in (folder / "bench.out").open()]
        words[folder.name] = sum(lengths)
        at_max[folder.name] = sum(n >= max_len for n in lengths)
    base = rows.get("softmax")
    device = "cpu"
    if args.gpu:
        import torch
        device = torch.cuda.get_device_name()
    mode = f"every sentence {args.fixed_length} steps" if args.fixed_length else f"max_length {MAX_LENGTH}"
    print(f"\nonmt_translate sentences/s ({device}, beam {args.beam}, batch {args.batch}, {len(lines)} lines, "
          f"{mode})")
    print(f"| variant | sentences/s, run | vs softmax | sentences/s, steady | vs softmax | output words | "
          f"lines of {max_len}+ words |")
    print("|---|---|---|---|---|---|---|")
    sbase = steady.get("softmax")
    for name, rate in rows.items():
        st = steady[name]
        print(f"| {name} | {rate:.1f} | {f'{rate / base:.2f}x' if base else 'n/a'} | {st:.1f} | "
              f"{f'{st / sbase:.2f}x' if sbase else 'n/a'} | {words[name]} | {at_max[name]} |")


if __name__ == "__main__":
    main()
