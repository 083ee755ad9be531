"""Beam-search decoding speed of `onmt_translate`: sparse models as a ratio to softmax, same settings.

Decodes the same source file with each variant's checkpoint from a `bench_train.py --workdir DIR`
run (one sub-folder per variant, each holding its last `model_step_*.pt`), and reports sentences/s
from the translation time that `onmt_translate -report_time` measures itself (its average ms per
sentence: model loading and process start excluded, which the wall time of a ~1 s decode could not
separate from noise). The first run of each model, over the whole source, is not timed (it compiles
the Triton kernels for every shape the timed runs meet, into the on-disk cache); then --repeat
rounds time every model in turn, each round starting one model later, and each model's fastest run
is kept (--median: its median run; host-bound decoding: the host's speed drifts between processes by
tens of percent). "median of round ratios" pairs each run with softmax's run of the same round.
With --in-process every model is translated in this one process instead, by an inference engine
built once per model (timed around OpenNMT-py's Inference._translate), which removes the
variation between processes and between model loads. Runs of one model in one process still moved
between 1.2 and 2.9 ms a sentence on the H200 hosts (docs/benchmarks.md), so many short paired rounds
resolve more than a few long ones: one 64-sentence batch a run and 100+ rounds gives the median of
round ratios to about +-1-2% (its 95% interval is printed beside it).
This is a benchmark, not a test.

    python benchmarks/bench_train.py --gpu --workdir runs/bench --steps 300
    python benchmarks/bench_translate.py --workdir runs/bench --gpu --beam 5 --lines 1000
    python benchmarks/bench_translate.py --workdir runs/bench --gpu --lines 64 --fixed-length 30 \\
        --in-process --repeat 120 --median

--check-kernels OPS first translates the source with the kernels and with the torch reference of OPS
(e.g. log_probs,alpha_relu_log,beam_topk: decoding's scores and pick, which should give the same
output lines) and prints how many lines are identical for each model.
"""
from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import result_rows  # (benchmarks/ is on sys.path when run as a script)
from paired_rounds import describe, median, median_interval


def _rate(sentences_per_s: float) -> str:
    """One decimal; 3 significant digits below 1 (a document of thousands of steps takes seconds)."""
    return f"{sentences_per_s:.1f}" if sentences_per_s >= 1 else f"{sentences_per_s:.3g}"


def last_checkpoint(folder: Path) -> Path:
    steps = sorted(folder.glob("model_step_*.pt"), key=lambda p: int(re.findall(r"\d+", p.name)[-1]))
    if not steps:
        sys.exit(f"no model_step_*.pt in {folder}: run benchmarks/bench_train.py --workdir first")
    return steps[-1]


MAX_LENGTH = 100
_AVG_MS = re.compile(r"Average translation time \(ms\): ([0-9.]+)")
# onmt_translate's whole run after the interpreter's start: model loading (and with it the kernels'
# warm-up, `ops.warm_up_kernels`) included, which -report_time's average leaves out
_RUN_S = re.compile(r"Time w/o python interpreter load/terminate:\s+([0-9.]+)")
RUN_S: dict = {}  # model folder -> the whole-run seconds of its onmt_translate processes


def translate_args(model: Path, src: Path, out: Path, args: argparse.Namespace) -> list[str]:
    cmd = ["-model", str(model), "-src", str(src), "-output", str(out), "-beam_size", str(args.beam),
           "-batch_size", str(args.batch), "-max_length", str(args.fixed_length or MAX_LENGTH)]
    if args.fixed_length:  # EOS forbidden before, every hypothesis cut at: N steps for every model
        cmd += ["-min_length", str(args.fixed_length)]
    if args.gpu:
        cmd += ["-gpu", "0"]
    return cmd


class InProcess:
    """Decoding time of OpenNMT-py's ``Inference._translate``, every model translated in this one
    process by its own inference engine, built once (the model loaded once, as a translation server
    keeps it): no variation between processes (host-bound decoding drifted by tens of percent from
    one process to the next on the GPU machines), and no model reloads between timed calls. A full
    garbage collection runs before each timed call, untimed: a process that loaded model after
    model collected its oldest generation every other call or so (~0.2 s on the H100 hosts, 10% of
    a 1000-sentence run), and without the collection those pauses landed on the same models round
    after round."""

    def __init__(self, gpu: bool):
        import torch
        from onmt.translate.translator import Inference

        self._engines: dict = {}
        self.times: list[float] = []
        upstream, sync = Inference._translate, torch.cuda.synchronize if gpu else (lambda: None)

        def timed(inference, *a, **kw):
            gc.collect()
            sync()
            t0 = time.perf_counter()
            out = upstream(inference, *a, **kw)
            sync()
            self.times.append(time.perf_counter() - t0)
            return out

        Inference._translate = timed

    def _engine(self, model: Path, src: Path, out: Path, args: argparse.Namespace):
        """The model's inference engine (built on first use), writing to ``out`` from its start."""
        import codecs

        from onmt.bin.translate import _get_parser
        from onmt.inference_engine import InferenceEnginePY
        from onmt.utils.parse import ArgumentParser

        engine = self._engines.get(model)
        if engine is None:
            opt = _get_parser().parse_args(translate_args(model, src, out, args))
            ArgumentParser.validate_translate_opts(opt)  # as onmt.bin.translate.translate does
            ArgumentParser._get_all_transform_translate(opt)
            ArgumentParser._validate_transforms_opts(opt)
            ArgumentParser.validate_translate_opts_dynamic(opt)
            engine = self._engines[model] = InferenceEnginePY(opt)
        translator = engine.translator
        translator.out_file.close()
        translator.out_file = codecs.open(str(out), "w+", "utf-8")
        engine.opt.src = str(src)
        return engine

    def ms_per_sentence(self, model: Path, src: Path, out: Path, args: argparse.Namespace) -> float:
        engine = self._engine(model, src, out, args)
        engine.infer_file()
        engine.translator.out_file.flush()
        return self.times[-1] * 1000.0 / max(1, sum(1 for _ in src.open()))


def translate_ms(model: Path, src: Path, out: Path, args: argparse.Namespace) -> float:
    """onmt_translate's own average translation time per sentence (ms)."""
    cmd = ["onmt_translate"] + translate_args(model, src, out, args) + ["-report_time"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    found = _AVG_MS.findall(proc.stdout + proc.stderr)
    if not found:
        sys.exit(f"{' '.join(cmd)}: no 'Average translation time' in its log")
    whole = _RUN_S.findall(proc.stdout + proc.stderr)
    if whole:
        RUN_S.setdefault(model.parent, []).append(float(whole[-1]))
    return float(found[-1])


def progress(what: str, folder: Path, ms: float) -> None:
    """One line on stderr as each run ends: a run cut short by a time limit (a lent GPU machine's
    10-minute commands; 16 onmt_translate processes of 1000 lines took more than 230 s on an
    H200) still leaves the runs it made; for a process, also its whole run (model loading included)."""
    whole = f", whole run {RUN_S[folder][-1]:.2f} s" if RUN_S.get(folder) else ""
    print(f"[bench_translate] {what} {folder.name}: {ms:.3f} ms a sentence{whole}", file=sys.stderr, flush=True)


def decoding_options(ap: argparse.ArgumentParser, lines: int, fixed_length: int) -> None:
    """The options of a decoding benchmark over a `bench_train.py` workdir (this one and
    profile_translate.py): what is decoded, and how."""
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--src", type=Path, default=None, help="source file (default: the first train.* file)")
    ap.add_argument("--lines", type=int, default=lines)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--fixed-length", type=int, default=fixed_length,
                    help="decode exactly N steps per sentence (-min_length N -max_length N): the time per "
                         "step, whatever length each model's hypotheses would have")
    ap.add_argument("--csv", type=Path, default=None, metavar="DIR",
                    help="append the table's rows to the family CSV in DIR (benchmarks/results)")
    ap.add_argument("--data-label", default=None,
                    help="the data column of those rows (default: the workdir's name)")


def source_sample(args: argparse.Namespace, name: str) -> tuple[Path, list[str], list[Path]]:
    """(the first --lines of the source written to workdir/name, those lines, the model folders)."""
    src_all = args.src or next(iter(sorted(args.workdir.glob("train.*"))))
    lines = src_all.read_text().splitlines()[: args.lines]
    src = args.workdir / name
    src.write_text("\n".join(lines) + "\n")
    return src, lines, sorted(p for p in args.workdir.iterdir() if p.is_dir())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    decoding_options(ap, lines=1000, fixed_length=0)
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed rounds over the models (each model's fastest run is kept)")
    ap.add_argument("--in-process", action="store_true",
                    help="translate every model in this process (OpenNMT-py's translate(), timed around "
                         "Inference._translate) instead of one onmt_translate process per run")
    ap.add_argument("--median", action="store_true", help="keep each model's median run, not its fastest")
    ap.add_argument("--check-kernels", metavar="OPS", default=None,
                    help="before timing, translate the source with the kernels and with the torch reference "
                         "of OPS (ONMT_ENTMAX_NO_TRITON=OPS, e.g. beam_topk, or 1 for every op) and count the "
                         "identical output lines of each model")
    args = ap.parse_args()
    src, lines, folders = source_sample(args, "bench_translate.src")
    rows, words, at_max = {}, {}, {}
    max_len = args.fixed_length or MAX_LENGTH
    timer = InProcess(args.gpu).ms_per_sentence if args.in_process else translate_ms
    for folder in folders:
        # not timed: compiles the Triton specialisations of every shape the timed runs meet (a
        # one-sentence warm-up left them to the first timed round: 3.3-3.9 ms a sentence against
        # 1.4-1.9 after, H100), into Triton's cache on disk for the onmt_translate processes
        progress("warm-up", folder, timer(last_checkpoint(folder), src, folder / "warmup.out", args))
    identical = check_kernels(folders, src, args, timer) if args.check_kernels else {}
    runs: dict = {folder: [] for folder in folders}
    for r in range(args.repeat):  # rounds over the models, so a slow spell of the host hits all of them;
        for folder in folders[r % len(folders):] + folders[:r % len(folders)]:  # each round starts elsewhere
            runs[folder].append(timer(last_checkpoint(folder), src, folder / "bench.out", args))
            progress(f"round {r + 1}/{args.repeat}", folder, runs[folder][-1])
    soft = next((f for f in folders if f.name == "softmax"), None)
    ratios = {}
    for folder in folders:
        ms = min(runs[folder]) if not args.median else median(runs[folder])
        rows[folder.name] = 1000.0 / ms
        if soft is not None:  # softmax's time over this model's, round by round
            ratios[folder.name] = [a / b for a, b in zip(runs[soft], runs[folder])]
        lengths = [len(line.split()) for line in (folder / "bench.out").open()]
        words[folder.name] = sum(lengths)
        at_max[folder.name] = sum(n >= max_len for n in lengths)
    base = rows.get("softmax")
    device = "cpu"
    if args.gpu:
        import torch
        device = torch.cuda.get_device_name()
    mode = f"every sentence {args.fixed_length} steps" if args.fixed_length else f"max_length {MAX_LENGTH}"
    how = f"{'in one process' if args.in_process else 'onmt_translate -report_time'}, " \
          f"{'median' if args.median else 'fastest'} of {args.repeat}"
    print(f"\nonmt_translate sentences/s ({device}, beam {args.beam}, batch {args.batch}, {len(lines)} lines, "
          f"{mode}; {how})")
    print(f"| variant | sentences/s | vs softmax | median of round ratios (95% interval) | output words "
          f"| lines of {max_len}+ words "
          f"| runs (ms a sentence) |")
    print("|---|---|---|---|---|---|---|")
    csv_rows = []
    for folder in folders:
        name, rate = folder.name, rows[folder.name]
        paired = describe(ratios.get(name, []))
        print(f"| {name} | {_rate(rate)} | {f'{rate / base:.2f}x' if base else 'n/a'} | {paired} | {words[name]} | "
              f"{at_max[name]} | {' '.join(f'{ms:.3f}' for ms in runs[folder])} |")
        mid, (lo, hi) = median_interval(ratios[name]) if ratios.get(name) else (None, (None, None))
        csv_rows.append({
            "case": name, "ours": _rate(rate), "baseline": _rate(base) if base else "",
            "ratio": f"{rate / base:.2f}" if base else "", "data": args.data_label or args.workdir.name,
            "mode": "in one process" if args.in_process else "onmt_translate -report_time",
            "setup": f"beam {args.beam}, batch {args.batch}, {len(lines)} lines, {mode}, "
                     f"{'median' if args.median else 'fastest'} of {args.repeat}",
            "median_ratio": f"{mid:.2f}" if mid is not None else "",
            "median_low": f"{lo:.2f}" if lo is not None else "", "median_high": f"{hi:.2f}" if hi is not None else "",
            "output_words": str(words[name]), "long_lines": str(at_max[name]),
            "identical_lines": identical.get(name, ""), "runs_ms": " ".join(f"{ms:.3f}" for ms in runs[folder]),
            "whole_runs_s": " ".join(f"{t:.2f}" for t in RUN_S.get(folder, []))})
    if args.csv:
        result_rows.append(args.csv, "decoding", csv_rows, gpu=args.gpu)
    if RUN_S:
        print("\nwhole onmt_translate runs, model loading included (every run of the model, warm-up first)")
        print("| variant | runs (s) |\n|---|---|")
        for folder in folders:
            print(f"| {folder.name} | {' '.join(f'{t:.2f}' for t in RUN_S.get(folder, []))} |")


def check_kernels(folders: list, src: Path, args: argparse.Namespace, timer) -> dict[str, str]:
    """Each model translated with the kernels and with the torch reference of the ops in
    ``args.check_kernels`` (ONMT_ENTMAX_NO_TRITON, read at each call and by each onmt_translate
    process): how many output lines are identical ("identical/all" by model)."""
    saved = os.environ.get("ONMT_ENTMAX_NO_TRITON")
    identical = {}
    print(f"\n| variant | output lines identical: kernels vs ONMT_ENTMAX_NO_TRITON={args.check_kernels} |")
    print("|---|---|")
    for folder in folders:
        model = last_checkpoint(folder)
        os.environ["ONMT_ENTMAX_NO_TRITON"] = args.check_kernels
        try:
            timer(model, src, folder / "reference.out", args)
        finally:
            if saved is None:
                os.environ.pop("ONMT_ENTMAX_NO_TRITON")
            else:
                os.environ["ONMT_ENTMAX_NO_TRITON"] = saved
        timer(model, src, folder / "kernels.out", args)
        ref, ours = ((folder / name).read_text().splitlines() for name in ("reference.out", "kernels.out"))
        identical[folder.name] = f"{sum(a == b for a, b in zip(ref, ours))}/{len(ref)}"
        print(f"| {folder.name} | {identical[folder.name]} |", flush=True)
    return identical


if __name__ == "__main__":
    main()
