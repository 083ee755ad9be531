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

Where wall time goes when the profilers cannot say (they slow the host as much as what they
measure): --sample N samples every thread's Python stack every 0.5 ms over N steps and lists the
functions on the main thread's stack in the most samples, waits in C (a sync, backward, a lock)
included. --host-ab R times R interleaved rounds of each config under four host settings: as is,
Python's garbage collector with the objects built before training frozen (gc.freeze), backward on
the calling thread instead of autograd's device thread, and both. --sync-sites N lists where the code
reads tensors back to the host (each read of a CUDA tensor is a sync), by caller.
"""
from __future__ import annotations

import argparse
import collections
import gc
import sys
import threading
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
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

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
        "kernels": [(e.self_device_time_total / n / 1e3, e.count / n, e.key)
                    for e in sorted(kernels, key=lambda e: -e.self_device_time_total)[:top]],
    }


# Tensor methods that read values back to the host: on CUDA each call waits for the GPU (a sync)
READBACKS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "nonzero")


def sync_sites(trainer, batches: list, n: int, gpu: bool, top: int) -> str:
    """The code that reads tensors back to the host during ``n`` steps, by call site: the first frame
    outside torch/ (the caller in OpenNMT-py or the plugin), the method, and the calls a step. With
    ``gpu``, only reads of CUDA tensors count (each is a sync); on the CPU every read counts, so a site
    reading a tensor that lives on the host in GPU training shows up too. Boolean-mask indexing and
    ``.to("cpu")`` are counted as well; ``torch.*`` functions that sync (``torch.nonzero``) are not."""
    import torch

    torch_dir = str(Path(torch.__file__).parent)
    counts: collections.Counter = collections.Counter()

    def site() -> str:
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(torch_dir):
            frame = frame.f_back
        if frame is None:
            return "(torch)"
        return f"{frame.f_code.co_filename.split('site-packages/')[-1]}:{frame.f_lineno} {frame.f_code.co_name}"

    def counted(name: str, method, reads):
        def call(self, *args, **kwargs):
            if (not gpu or self.is_cuda) and reads(args, kwargs):
                counts[site(), name] += 1
            return method(self, *args, **kwargs)
        return call

    def to_host(args, kwargs) -> bool:
        where = kwargs.get("device", args[0] if args else None)
        return isinstance(where, (str, torch.device)) and torch.device(where).type == "cpu"

    def by_mask(args, kwargs) -> bool:
        index = args[0] if args else None
        parts = index if isinstance(index, tuple) else (index,)
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in parts)

    wrapped = {name: getattr(torch.Tensor, name) for name in (*READBACKS, "to", "__getitem__")}
    try:
        for name in READBACKS:
            setattr(torch.Tensor, name, counted(name, wrapped[name], lambda a, k: True))
        torch.Tensor.to = counted("to('cpu')", wrapped["to"], to_host)
        torch.Tensor.__getitem__ = counted("[bool mask]", wrapped["__getitem__"], by_mask)
        train_steps(trainer, batches, 0, n)
    finally:
        for name, method in wrapped.items():
            setattr(torch.Tensor, name, method)
    rows = [f"  {c / n:5.1f}  {name:12s} {where}" for (where, name), c in counts.most_common(top)]
    return f"  {sum(counts.values()) / n:5.1f}  in all a step\n" + "\n".join(rows)


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


class WallSampler:
    """Samples every thread's Python stack every ``interval`` s while active. A sample of a thread
    counts each function on its stack once (inclusive wall time), so a function's share is the share
    of wall time it was running or waiting in; C code shows as the Python line that called it. The
    switch interval is lowered meanwhile so that the sampler is not held off by a running thread."""

    def __init__(self, interval: float = 5e-4):
        self.interval = interval
        self.samples: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.totals: collections.Counter = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wall-sampler", daemon=True)

    def __enter__(self) -> "WallSampler":
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(self.interval / 5)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._switch)

    def _run(self) -> None:
        me = threading.get_ident()
        names = {t.ident: t.name for t in threading.enumerate()}
        while not self._stop.wait(self.interval):
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                name = names.get(ident) or names.setdefault(ident, next(
                    (t.name for t in threading.enumerate() if t.ident == ident), f"thread {ident}"))
                stack = []
                while frame is not None:
                    code = frame.f_code
                    stack.append(f"{code.co_name} ({Path(code.co_filename).name}:{code.co_firstlineno})")
                    frame = frame.f_back
                # outermost first: equal shares are listed caller before callee
                self.samples[name].update(dict.fromkeys(reversed(stack), 1))
                self.totals[name] += 1

    def report(self, top: int) -> str:
        lines = []
        for name, total in self.totals.most_common():
            lines.append(f"  thread {name}: {total} samples")
            for function, n in self.samples[name].most_common(top):
                lines.append(f"    {100 * n / total:5.1f}%  {function}")
        return "\n".join(lines)


def sampled(trainer, batches: list, n: int, sync, top: int) -> str:
    """``WallSampler.report`` over ``n`` steps."""
    sync()
    with WallSampler() as sampler:
        train_steps(trainer, batches, 0, n)
        sync()
    return sampler.report(top)


# name: (gc.freeze the objects that exist before the steps, backward on autograd's device thread)
HOST_VARIANTS = {"as is": (False, True), "gc.freeze": (True, True), "backward on the calling thread": (False, False),
                 "both": (True, False)}


class GcClock:
    """Collections of Python's garbage collector and the time they take, while active (gc.callbacks)."""

    def __init__(self):
        self.collections, self.seconds, self._start = 0, 0.0, 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.collections += 1
            self.seconds += time.perf_counter() - self._start

    def __enter__(self) -> "GcClock":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._callback)


def set_host(freeze: bool, autograd_threads: bool) -> None:
    """One of HOST_VARIANTS (undoes the others: gc.unfreeze, multithreading back on)."""
    import torch

    gc.unfreeze()
    if freeze:
        gc.collect()
        gc.freeze()
    torch.autograd.set_multithreading_enabled(autograd_threads)


def host_ab(trainers: dict, rounds: int, steps: int, sync) -> None:
    """Steps/s of each config under each of HOST_VARIANTS, ``rounds`` interleaved rounds (medians)."""
    import statistics

    rates, gcs = collections.defaultdict(list), collections.defaultdict(list)
    for _ in range(rounds):
        for variant, setting in HOST_VARIANTS.items():
            set_host(*setting)
            for name, (trainer, batches) in trainers.items():
                sync()
                with GcClock() as clock:
                    t0 = time.perf_counter()
                    train_steps(trainer, batches, 0, steps)
                    sync()
                    rates[name, variant].append(steps / (time.perf_counter() - t0))
                gcs[name, variant].append((clock.collections / steps, 1e3 * clock.seconds / steps))
    set_host(*HOST_VARIANTS["as is"])
    print(f"\nhost settings, {steps} steps a config, {rounds} interleaved rounds (median, min-max)\n")
    print("| config | host setting | steps/s | vs as is | gc collections a step | gc ms a step |")
    print("|---|---|---|---|---|---|")
    for name in trainers:
        base = statistics.median(rates[name, "as is"])
        for variant in HOST_VARIANTS:
            r = rates[name, variant]
            med = statistics.median(r)
            n_gc = statistics.median(c for c, _ in gcs[name, variant])
            ms_gc = statistics.median(m for _, m in gcs[name, variant])
            print(f"| {name} | {variant} | {med:.1f} ({min(r):.1f}-{max(r):.1f}) | {med / base:.2f}x "
                  f"| {n_gc:.2f} | {ms_gc:.2f} |")


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
    ap.add_argument("--sample", type=int, default=0, metavar="STEPS",
                    help="also sample every thread's stack over this many steps (WallSampler) and list the "
                         "functions the main thread spends its wall time in, waits included")
    ap.add_argument("--sync-sites", type=int, default=0, metavar="STEPS",
                    help="also list the call sites that read tensors back to the host (.item(), .tolist(), "
                         "boolean masks, ...) over this many steps, with their calls a step: on CUDA, the syncs")
    ap.add_argument("--host-ab", type=int, default=0, metavar="ROUNDS",
                    help="also time --steps steps of each config under each of HOST_VARIANTS, in this many "
                         "interleaved rounds (medians), with the garbage collector's collections and time a step")
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
    print(f"training steps in one process (batching excluded), {device}, torch {torch.__version__}, "
          f"Python {sys.version.split()[0]}\n")
    print("| config | steps/s | wall ms a step (profiled) | GPU kernel ms a step | launches a step "
          "| host syncs a step | aten ops a step |")
    print("|---|---|---|---|---|---|---|")
    tops, pythons, samples, syncs = {}, {}, {}, {}
    for name, (trainer, batches) in trainers.items():
        train_steps(trainer, batches, 0, len(batches))  # warm-up: Triton compilation, allocator, cuBLAS
        sync()
        t0 = time.perf_counter()
        train_steps(trainer, batches, 0, args.steps)
        sync()
        rate = args.steps / (time.perf_counter() - t0)
        p = profile(trainer, batches, args.profile_steps, args.gpu, args.top)
        tops[name] = p["top"], p["kernels"]
        if args.python:
            pythons[name] = python_profile(trainer, batches, args.python, sync, args.top)
        if args.sample:
            samples[name] = sampled(trainer, batches, args.sample, sync, args.top)
        if args.sync_sites:
            syncs[name] = sync_sites(trainer, batches, args.sync_sites, args.gpu, args.top)
        print(f"| {name} | {rate:.1f} | {p['wall_ms']:.2f} | {p['gpu_ms']:.2f} | {p['launches']:.0f} "
              f"| {p['syncs']:.1f} | {p['aten']:.0f} |", flush=True)
    if args.host_ab:
        host_ab(trainers, args.host_ab, args.steps, sync)
    for name, (top, kernels) in tops.items():
        print(f"\n{name}: operators with the most host time of their own, a step")
        for ms, calls, key in top:
            print(f"  {ms:7.3f} ms  {calls:7.1f} calls  {key}")
        if kernels:
            print(f"{name}: GPU kernels with the most time, a step")
            for ms, calls, key in kernels:
                print(f"  {ms:7.3f} ms  {calls:7.1f} calls  {key[:100]}")
    for name, text in pythons.items():
        print(f"\n{name}: Python functions with the most time of their own ({args.python} steps, cProfile)\n{text}")
    for name, text in syncs.items():
        where = "CUDA tensors: syncs" if args.gpu else "CPU run: on CUDA, syncs where the tensor is on the GPU"
        print(f"\n{name}: reads of tensors back to the host, calls a step ({args.sync_sites} steps; {where})\n{text}")
    for name, text in samples.items():
        print(f"\n{name}: share of wall time each function is on the stack ({args.sample} steps, sampled)\n{text}")


if __name__ == "__main__":
    main()
