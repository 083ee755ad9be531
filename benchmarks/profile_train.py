"""Where an onmt_train step goes, per config: host time, GPU kernel time, launches and host syncs.

Builds each config's model, optimizer and loss as onmt_train does (this plugin active; the same
batches for every config, `bench_train.in_process_trainers`), times --steps training steps
(OpenNMT-py's `Trainer._gradient_accumulation`: forward, loss, backward, optimizer; batching
excluded), then profiles --profile-steps more under torch.profiler. A step that takes much longer on
the host than its kernels take on the GPU is host-bound: what can be removed is host work (Python,
operator dispatch, launches) and waits for the GPU (syncs), not kernel time.

    python benchmarks/profile_train.py configs/peters2019-sigmorphon/medium/out1-attn1.yaml \
        configs/peters2019-sigmorphon/medium/out1.5-attn1.5.yaml --gpu
    python benchmarks/profile_train.py CFG --steps 5 --profile-steps 2     # CPU check of the script
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

# (benchmarks/ is on sys.path when run as a script)
from bench_train import in_process_trainers
from profile_translate import LAUNCH_CALLS

# host calls that wait for the GPU: reading a value back (.item(), .tolist(), boolean indexing)
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def train_steps(trainer, batches: list, start: int, n: int) -> int:
    """Run ``n`` training steps on ``batches[start:]`` (cycled); returns the target tokens."""
    import onmt.utils

    stats = onmt.utils.Statistics()
    for i in range(start, start + n):
        accum, norm = batches[i % len(batches)]
        trainer._gradient_accumulation(accum, norm, stats, onmt.utils.Statistics())
    return stats.n_words


def profile(trainer, batches: list, n: int, gpu: bool, top: int) -> dict:
    """Per step: wall ms, aten operators, kernel launches, host syncs, GPU kernel ms; and the
    operators with the most host time of their own."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile as torch_profile

    sync = torch.cuda.synchronize if gpu else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    sync()
    with torch_profile(activities=activities) as prof:
        t0 = time.perf_counter()
        train_steps(trainer, batches, 0, n)
        sync()
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    kernels = [e for e in events if e.device_type == DeviceType.CUDA and e.self_device_time_total > 0]
    host = sorted((e for e in events if e.device_type == DeviceType.CPU), key=lambda e: -e.self_cpu_time_total)
    return {
        "wall_ms": 1e3 * wall / n,
        "aten": sum(e.count for e in events if e.key.startswith("aten::")) / n,
        "launches": sum(e.count for e in events if e.key in LAUNCH_CALLS) / n,
        "syncs": sum(e.count for e in events if e.key in SYNC_CALLS) / n,
        "gpu_ms": sum(e.self_device_time_total for e in kernels) / n / 1e3,
        "top": [(e.self_cpu_time_total / n / 1e3, e.count / n, e.key) for e in host[:top]],
    }


def python_profile(trainer, batches: list, n: int, sync, top: int) -> str:
    """The ``top`` Python functions by time of their own over ``n`` steps (cProfile)."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    sync()
    prof.enable()
    train_steps(trainer, batches, 0, n)
    sync()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("configs", nargs="+", type=Path, help="onmt_train YAML configs (vocabularies built)")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--batches", type=int, default=40, help="distinct batches cycled through")
    ap.add_argument("--steps", type=int, default=300, help="timed steps per config (after one warm-up pass)")
    ap.add_argument("--profile-steps", type=int, default=20)
    ap.add_argument("--top", type=int, default=12, help="operators listed by host time")
    ap.add_argument("--python", type=int, default=0, metavar="STEPS",
                    help="also run this many steps under cProfile and list the Python functions with the most "
                         "time of their own (host work that torch.profiler does not see: outside any operator)")
    args = ap.parse_args()
    import torch

    configs = {str(c): c for c in args.configs}
    if args.gpu:  # onmt_train's trainer needs the GPU rank in the options
        import tempfile

        import yaml
        folder = Path(tempfile.mkdtemp(prefix="profile_train_"))
        for i, (name, path) in enumerate(configs.items()):
            cfg = {**yaml.safe_load(path.read_text()), "world_size": 1, "gpu_ranks": [0]}
            configs[name] = folder / f"{i}.yaml"
            configs[name].write_text(yaml.safe_dump(cfg))
    trainers = in_process_trainers(configs, args.batches, 0 if args.gpu else -1)
    sync = torch.cuda.synchronize if args.gpu else (lambda: None)
    device = torch.cuda.get_device_name() if args.gpu else "cpu"
    print(f"training steps in one process (batching excluded), {device}, torch {torch.__version__}\n")
    print("| config | steps/s | wall ms a step (profiled) | GPU kernel ms a step | launches a step "
          "| host syncs a step | aten ops a step |")
    print("|---|---|---|---|---|---|---|")
    tops, pythons = {}, {}
    for name, (trainer, batches) in trainers.items():
        train_steps(trainer, batches, 0, len(batches))  # warm-up: Triton compilation, allocator, cuBLAS
        sync()
        t0 = time.perf_counter()
        train_steps(trainer, batches, 0, args.steps)
        sync()
        rate = args.steps / (time.perf_counter() - t0)
        p = profile(trainer, batches, args.profile_steps, args.gpu, args.top)
        tops[name] = p["top"]
        if args.python:
            pythons[name] = python_profile(trainer, batches, args.python, sync, args.top)
        print(f"| {name} | {rate:.1f} | {p['wall_ms']:.2f} | {p['gpu_ms']:.2f} | {p['launches']:.0f} "
              f"| {p['syncs']:.1f} | {p['aten']:.0f} |", flush=True)
    for name, top in tops.items():
        print(f"\n{name}: operators with the most host time of their own, a step")
        for ms, calls, key in top:
            print(f"  {ms:7.3f} ms  {calls:7.1f} calls  {key}")
    for name, text in pythons.items():
        print(f"\n{name}: Python functions with the most time of their own ({args.python} steps, cProfile)\n{text}")


if __name__ == "__main__":
    main()
