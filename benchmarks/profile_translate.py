"""Where a beam step goes, per model: kernel launches, GPU kernel time and the heaviest kernels a step.

Decodes the first --lines of a source with every model of a `bench_train.py --workdir DIR` run, in
one process (bench_translate.py's in-process engines), once untimed (Triton compiles its
specialisations) and once under torch.profiler, and divides by the beam steps taken (calls of the
beam search's `advance`; the encoder's work is spread over them). Host-bound decoding shows here as
a model that launches fewer kernels and keeps the GPU busy for less time than softmax and still
decodes slower: what is left is host work outside the kernels. Counts, not a timing:
`bench_translate.py --in-process` times.

    python benchmarks/bench_train.py --gpu --data synthetic --vocab 32000 --workdir W --steps 100
    python benchmarks/profile_translate.py --workdir W --src W/train.src --gpu [--lines 128]
"""
from __future__ import annotations

import argparse
from pathlib import Path

# (benchmarks/ is on sys.path when run as a script)
import result_rows
from bench_translate import InProcess, decoding_options, last_checkpoint, source_sample

# host calls that start a kernel: the runtime API (torch) and the driver API (Triton's launcher)
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def count_beam_steps() -> list:
    """A one-element list that every call of the beam search's `advance` (one beam step of one batch)
    increments from now on."""
    from onmt.translate.beam_search import BeamSearchBase

    steps, advance = [0], BeamSearchBase.advance

    def counted(self, *args, **kwargs):
        steps[0] += 1
        return advance(self, *args, **kwargs)

    BeamSearchBase.advance = counted
    return steps


def profile_model(timer: InProcess, model: Path, src: Path, out: Path, args: argparse.Namespace,
                  steps: list) -> tuple[int, float, float, float, list]:
    """(beam steps, aten operators a step (nested ones included), launches a step, GPU kernel ms a step,
    [(ms a step, calls a step, kernel name)] of the heaviest kernels) of one profiled decode."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.gpu else [])
    before = steps[0]
    with profile(activities=activities) as prof:
        timer.ms_per_sentence(model, src, out, args)
    n = max(1, steps[0] - before)
    events = prof.key_averages()
    aten = sum(e.count for e in events if e.key.startswith("aten::")) / n
    launches = sum(e.count for e in events if e.key in LAUNCH_CALLS) / n
    kernels = [e for e in events if e.device_type == DeviceType.CUDA and e.self_device_time_total > 0]
    gpu_ms = sum(e.self_device_time_total for e in kernels) / n / 1e3
    top = sorted(kernels, key=lambda e: -e.self_device_time_total)[: args.top]
    return n, aten, launches, gpu_ms, [(e.self_device_time_total / n / 1e3, e.count / n, e.key) for e in top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    decoding_options(ap, lines=128, fixed_length=30)
    ap.add_argument("--top", type=int, default=6, help="kernels listed per model")
    args = ap.parse_args()
    src, _, folders = source_sample(args, "profile_translate.src")
    timer, steps = InProcess(args.gpu), count_beam_steps()
    for folder in folders:  # not profiled: Triton compiles every specialisation the profiled run meets
        timer.ms_per_sentence(last_checkpoint(folder), src, folder / "profile.out", args)
    rows = {f.name: profile_model(timer, last_checkpoint(f), src, f / "profile.out", args, steps) for f in folders}
    print(f"\nper beam step ({args.lines} lines, beam {args.beam}, batch {args.batch}, {args.fixed_length} steps a "
          f"sentence{', GPU' if args.gpu else ', CPU'})")
    print("| variant | beam steps | aten operators a step | kernel launches a step | GPU kernel ms a step |")
    print("|---|---|---|---|---|")
    for name, (n, aten, launches, gpu_ms, _) in rows.items():
        print(f"| {name} | {n} | {aten:.1f} | {launches:.1f} | {gpu_ms:.3f} |")
    if args.csv:
        setup = f"{args.lines} lines, beam {args.beam}, batch {args.batch}, {args.fixed_length} steps a sentence, " \
                f"{'GPU' if args.gpu else 'CPU'}"
        result_rows.append(args.csv, "decoding-steps", [
            {"case": name, "ours": f"{gpu_ms:.3f}", "data": args.data_label or args.workdir.name, "setup": setup,
             "beam_steps": str(n), "aten_ops": f"{aten:.1f}", "launches": f"{launches:.1f}"}
            for name, (n, aten, launches, gpu_ms, _) in rows.items()], gpu=args.gpu)
    for name, (*_, top) in rows.items() if args.gpu else ():
        print(f"\n{name}: heaviest kernels, ms a step (calls a step)")
        for ms, calls, key in top:
            print(f"  {ms:7.3f} ({calls:5.1f})  {key[:100]}")


if __name__ == "__main__":
    main()
