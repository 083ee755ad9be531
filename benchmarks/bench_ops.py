"""Median forward+backward time of each mapping and loss as a ratio to its dense baseline.

Mappings are compared with torch.softmax, losses with F.cross_entropy, both also with PyPI entmax 1.3
(when installed) — all measured in the same run, on the same inputs. This is a benchmark, not a test.

    python benchmarks/bench_ops.py                      # CPU, 256 rows, V in 1k/8k/32k/50k
    python benchmarks/bench_ops.py --device cuda --rows 4096
    python benchmarks/bench_ops.py --csv benchmarks/results   # the rows also into benchmarks/results/cpu-ops.csv
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F

import result_rows  # (benchmarks/ is on sys.path when run as a script)

import onmt_entmax as oe

try:
    import entmax as pypi
except ImportError:  # the PyPI columns are then left empty
    pypi = None


def median_ms(fn: Callable[[], None], device: str, reps: int) -> float:
    fn()  # warm-up (allocations, kernel compilation)
    times = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def fwd_bwd(f: Callable, z: torch.Tensor, *args) -> Callable[[], None]:
    def run() -> None:
        z.grad = None
        out = f(z, *args)
        (out.float().sum() if out.dim() else out).backward()
    return run


def cases(y: torch.Tensor) -> list[tuple[str, str, Callable, Optional[Callable]]]:
    """(kind, name, ours, PyPI) — kind 'map' compares with softmax, 'loss' with cross-entropy."""
    p = pypi
    return [
        ("map", "sparsemax", lambda z: oe.sparsemax(z), p and (lambda z: p.sparsemax(z, dim=-1))),
        ("map", "entmax15", lambda z: oe.entmax15(z), p and (lambda z: p.entmax15(z, dim=-1))),
        ("map", "entmax_bisect a=1.33", lambda z: oe.entmax_bisect(z, 1.33),
         p and (lambda z: p.entmax_bisect(z, 1.33, dim=-1))),
        ("map", "alpha_relu", lambda z: oe.alpha_relu(z, 1.5, 0.1), None),
        ("loss", "sparsemax loss", lambda z: oe.sparsemax_loss(z, y), p and (lambda z: p.sparsemax_loss(z, y).mean())),
        ("loss", "entmax15 loss", lambda z: oe.entmax15_loss(z, y), p and (lambda z: p.entmax15_loss(z, y).mean())),
        ("loss", "entmax_bisect loss a=1.33", lambda z: oe.entmax_bisect_loss(z, y, 1.33),
         p and (lambda z: p.entmax_bisect_loss(z, y, 1.33).mean())),
        ("loss", "alpha_relu loss", lambda z: oe.alpha_relu_loss(z, y, 1.5, 0.1), None),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--vocab", type=int, nargs="+", default=[1024, 8192, 32768, 50000])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--scale", type=float, default=3.0, help="logits = randn * scale (3: trained-like, 0.2: flat)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    ap.add_argument("--csv", type=Path, default=None, metavar="DIR",
                    help="append the rows to DIR/cpu-ops.csv (benchmarks/results; CPU runs)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, device {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else f", {torch.get_num_threads()} threads")
          + f", rows {args.rows}, logits randn*{args.scale}, median of {args.reps}")
    print("| op | V | dtype | ours ms | baseline ms | ours / baseline | PyPI entmax / baseline |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for v in args.vocab:
            z = (torch.randn(args.rows, v, device=args.device) * args.scale).to(dtype).requires_grad_()
            y = torch.randint(0, v, (args.rows,), device=args.device)
            base = {
                "map": median_ms(fwd_bwd(lambda z: torch.softmax(z, -1), z), args.device, args.reps),
                "loss": median_ms(fwd_bwd(lambda z: F.cross_entropy(z, y), z), args.device, args.reps),
            }
            for kind, name, ours, theirs in cases(y):
                t_ours = median_ms(fwd_bwd(ours, z), args.device, args.reps)
                ref = "n/a"
                if theirs is not None:
                    try:
                        ref = f"{median_ms(fwd_bwd(theirs, z), args.device, args.reps) / base[kind]:.2f}x"
                    except Exception as err:  # PyPI entmax fails on some inputs (e.g. bf16): say so
                        ref = f"fails ({type(err).__name__})"
                print(f"| {name} | {v} | {dtype_name} | {t_ours:.2f} | {base[kind]:.2f} | "
                      f"{t_ours / base[kind]:.2f}x | {ref} |", flush=True)
                rows.append({"case": f"{args.rows}x{v} {dtype_name}", "op": name, "ours": f"{t_ours:.2f}",
                             "baseline": f"{base[kind]:.2f}", "ratio": f"{t_ours / base[kind]:.2f}", "units": "ms",
                             "pypi_ratio": ref.removesuffix("x"), "setup": f"{torch.get_num_threads()} torch threads"})
    if args.csv:
        result_rows.append(args.csv, "cpu-ops", rows, gpu=args.device == "cuda")


if __name__ == "__main__":
    main()
