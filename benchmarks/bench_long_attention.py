"""Long sparse attention (triton/attention_long.py) against `F.scaled_dot_product_attention`, one GPU.

Forward + backward of B x 8 heads x T x 64 attention for T = 256 ... 32768 with the batch of issue 62
(256: 16, 1024: 8, 4096: 2, 8192 and longer: 1): 1.5-entmax self-attention (Tq = Tk = T, causal and
not) and cross-attention (Tq = T / 2 queries over Tk = T keys), sparsemax and alpha-entmax (alpha =
1.33) self-attention, bf16 (fp16 and fp32 at two T), against SDPA (flash attention) in the same process,
and AdaSplash's `adasplash_v1` (alpha = 1.5, 10 iterations; self-attention of a power-of-two length
only) and, on causal self-attention, `adasplash_v2` (alpha = 1.5, its block-sparse kernels) where they
import. Inputs are randn (scores of unit scale). The `mask` column names the keep mask given to ours and to
SDPA (`profile_long_attention.keep_mask`): `none`; `pad-full`, OpenNMT-py's key padding as a (B, 1, T, T)
tensor (the last eighth of every other sequence padded); `causal-full`, the decoder's causal and padding mask
as one (B, 1, T, T) tensor, as both toolkits pass it (`causal` stays 0: no is_causal). AdaSplash takes no mask.
Time: `triton.testing.do_bench` median of q, k, v -> out -> dq, dk, dv (the output gradient given);
peak memory: the most allocated during one forward + backward beyond what was allocated before it
(inputs and the output gradient), MiB. Rows appended to a CSV (columns: `FIELDS`); the markdown
table printed last.

    python3 benchmarks/bench_long_attention.py --csv benchmarks/results/long-attention.csv
    python3 benchmarks/bench_long_attention.py --quick      # entmax15, bf16, self-attention, 4 lengths
    python3 benchmarks/bench_long_attention.py --csv FILE --resume   # the cases FILE lacks for this commit
    python3 benchmarks/bench_long_attention.py --csv FILE --resume --skip-measured-by C1   # C1 has these kernels
"""
from __future__ import annotations

import argparse
import csv
import datetime
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import report  # noqa: E402
from profile_long_attention import keep_mask  # noqa: E402

from onmt_entmax.ops.triton import attention_long as KL  # noqa: E402

FIELDS = ["gpu", "dtype", "kind", "alpha", "attention", "causal", "mask", "batch", "heads", "head_dim", "tq", "tk",
          "ours_ms", "sdpa_ms", "adasplash_ms", "ours_peak_mib", "sdpa_peak_mib", "adasplash_peak_mib",
          "torch", "triton", "commit", "date", "adasplash_v2_ms", "adasplash_v2_peak_mib"]
BATCH = {256: 16, 1024: 8, 4096: 2, 8192: 1, 16384: 1, 32768: 1}
ALPHA = {"sparsemax": None, "entmax15": None, "entmax_bisect": 1.33}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def adasplash() -> dict:
    """AdaSplash's {"v1": adasplash_v1, "v2": adasplash_v2}, each None where it does not import."""
    try:
        import adasplash as ada
    except ImportError:
        return {"v1": None, "v2": None}
    return {"v1": getattr(ada, "adasplash_v1", None), "v2": getattr(ada, "adasplash_v2", None)}


def measure(fn, q, k, v, grad) -> tuple[float, float]:
    """(median ms, peak MiB beyond what was allocated before) of fn's forward + backward."""
    def step():
        out = fn(q, k, v)
        torch.autograd.grad(out, (q, k, v), grad)

    step()  # (compiles)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    return do_bench(step, warmup=25, rep=100, return_mode="median"), peak


def cases(quick: bool):
    """(dtype, kind, attention, causal, mask, T) to run, the headline first (bf16 1.5-entmax self-attention):
    a run cut short keeps the rows it wrote."""
    if quick:
        for T in (1024, 4096, 16384, 32768):
            yield "bf16", "entmax15", "self", False, "none", T
        return
    for attention, causal in (("self", False), ("self", True), ("cross", False)):
        for T in BATCH:
            yield "bf16", "entmax15", attention, causal, "none", T
    for kind in ("sparsemax", "entmax_bisect"):
        for T in BATCH:
            yield "bf16", kind, "self", False, "none", T
    for mask in ("pad-full", "causal-full"):
        for T in (1024, 4096, 16384):
            yield "bf16", "entmax15", "self", False, mask, T
    for dtype in ("fp16", "fp32"):
        for T in (1024, 8192):
            yield dtype, "entmax15", "self", False, "none", T


def commit() -> str:
    if os.environ.get("COMMIT"):
        return os.environ["COMMIT"]
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=40"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def case_key(dtype: str, kind: str, attention: str, causal, mask: str, tq, tk) -> tuple:
    """A case as its CSV row names it (the fields `done_cases` matches)."""
    return dtype, kind, attention, int(causal), mask, int(tq), int(tk)


def done_cases(csv_path: str, gpu: str, *commit_ids: str) -> set:
    """The cases these commits already measured on this GPU in the CSV (`--resume`: a run cut short at a
    machine's time limit goes on with the rest; `--skip-measured-by`: commits whose kernels are this one's)."""
    if not os.path.exists(csv_path):
        return set()
    with open(csv_path, newline="", encoding="utf-8") as f:
        return {case_key(r["dtype"], r["kind"], r["attention"], r["causal"], r["mask"], r["tq"], r["tk"])
                for r in csv.DictReader(f) if r["gpu"] == gpu and r["commit"] in commit_ids}


def lengths(attention: str, T: int) -> tuple[int, int]:
    """(Tq, Tk) of a case: cross-attention is T / 2 queries over T keys."""
    return (T // 2, T) if attention == "cross" else (T, T)


def run_case(dtype: str, kind: str, attention: str, causal: bool, mask: str, T: int, heads: int, dim: int,
             ada) -> dict:
    B = BATCH[T]
    tq, tk = lengths(attention, T)
    g = torch.Generator(device="cuda").manual_seed(T)
    dt = DTYPES[dtype]
    q = torch.randn(B, heads, tq, dim, device="cuda", dtype=dt, generator=g).requires_grad_()
    k, v = (torch.randn(B, heads, tk, dim, device="cuda", dtype=dt, generator=g).requires_grad_() for _ in range(2))
    grad = torch.randn(B, heads, tq, dim, device="cuda", dtype=dt, generator=g)
    alpha = ALPHA[kind]
    keep = keep_mask(mask, B, T)
    ours = measure(lambda q, k, v: KL.sparse_attention(q, k, v, keep, kind, alpha, dim ** -0.5, causal=causal),
                   q, k, v, grad)
    sdpa = measure(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=causal),
                   q, k, v, grad)
    ada_ms = ada_mib = v2_ms = v2_mib = ""
    if kind == "entmax15" and attention == "self" and dtype != "fp32" and keep is None:
        if ada["v1"] is not None:
            ada_ms, ada_mib = measure(lambda q, k, v: ada["v1"](q, k, v, alpha=1.5, is_causal=causal, niter=10),
                                      q, k, v, grad)
            ada_ms, ada_mib = f"{ada_ms:.3f}", f"{ada_mib:.1f}"
        if ada["v2"] is not None and causal:  # (AdaSplash-2: causal, alpha = 1.5)
            try:
                v2_ms, v2_mib = measure(lambda q, k, v: ada["v2"](q, k, v), q, k, v, grad)
                v2_ms, v2_mib = f"{v2_ms:.3f}", f"{v2_mib:.1f}"
            except Exception as e:  # noqa: BLE001 (a shape it does not take: its cells stay empty, the run goes on)
                print(f"adasplash_v2 at T={T}: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}",
                      flush=True)
    del q, k, v, grad
    torch.cuda.empty_cache()
    return {"gpu": torch.cuda.get_device_name(), "dtype": dtype, "kind": kind, "alpha": alpha or "",
            "attention": attention, "causal": int(causal), "mask": mask, "batch": B, "heads": heads, "head_dim": dim,
            "tq": tq, "tk": tk, "ours_ms": f"{ours[0]:.3f}", "sdpa_ms": f"{sdpa[0]:.3f}", "adasplash_ms": ada_ms,
            "ours_peak_mib": f"{ours[1]:.1f}", "sdpa_peak_mib": f"{sdpa[1]:.1f}", "adasplash_peak_mib": ada_mib,
            "torch": torch.__version__, "triton": triton.__version__, "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "adasplash_v2_ms": v2_ms,
            "adasplash_v2_peak_mib": v2_mib}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", help="append the rows to this CSV (header written when new; an existing one must have "
                    "these columns)")
    ap.add_argument("--quick", action="store_true", help="entmax15, bf16, self-attention, 4 lengths")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--only", help="comma-separated T to run (default: all)")
    ap.add_argument("--dtypes", help="comma-separated dtypes to run (bf16, fp16, fp32; default: all)")
    ap.add_argument("--kinds", help="comma-separated kinds to run (entmax15, sparsemax, entmax_bisect; default: all)")
    ap.add_argument("--masks", help="comma-separated masks to run (none, pad-full, causal-full; default: all)")
    ap.add_argument("--resume", action="store_true", help="skip the cases whose rows this commit already wrote "
                    "into --csv on this GPU")
    ap.add_argument("--skip-measured-by", metavar="COMMITS", default="",
                    help="comma-separated commits whose kernels are this commit's: skip the cases their rows in --csv "
                    "hold on this GPU too")
    args = ap.parse_args()
    if (args.resume or args.skip_measured_by) and not args.csv:
        ap.error("--resume and --skip-measured-by read the rows of --csv: give --csv")
    if not torch.cuda.is_available():
        raise SystemExit("bench_long_attention.py: needs a CUDA GPU (none is visible)")
    if args.csv and os.path.exists(args.csv):
        with open(args.csv, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), None)
        if header != FIELDS:
            raise SystemExit(f"bench_long_attention.py: --csv {args.csv} has other columns than this script writes "
                             f"({','.join(FIELDS)}): give a new file or rewrite its header")
    ada = adasplash()
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__,
          "adasplash", " ".join(name for name, fn in ada.items() if fn) or "no", flush=True)
    only = {int(t) for t in args.only.split(",")} if args.only else None
    skipped = [c for c in args.skip_measured_by.split(",") if c] + ([commit()] if args.resume else [])
    done = done_cases(args.csv, torch.cuda.get_device_name(), *skipped) if skipped else set()
    rows = []
    for case in cases(args.quick):
        if (only and case[-1] not in only) or (args.dtypes and case[0] not in args.dtypes.split(",")) \
                or (args.kinds and case[1] not in args.kinds.split(",")) \
                or (args.masks and case[4] not in args.masks.split(",")):
            continue
        dtype, kind, attention, causal, mask, T = case
        if case_key(dtype, kind, attention, causal, mask, *lengths(attention, T)) in done:
            continue
        row = run_case(*case, args.heads, args.dim, ada)
        rows.append(row)
        print(",".join(str(row[f]) for f in FIELDS), flush=True)
        if args.csv:
            new = not os.path.exists(args.csv)
            with open(args.csv, "a", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
                if new:
                    w.writeheader()
                w.writerow(row)
    print(report.long_attention_table(rows))


if __name__ == "__main__":
    main()
