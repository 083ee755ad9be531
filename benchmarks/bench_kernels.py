"""GPU op benchmarks: forward+backward time of our kernels vs F.cross_entropy / softmax / PyPI entmax.

All numbers are `triton.testing.do_bench` medians (ms) measured in the same process, so the
ratios compare like with like. Usage (on a CUDA machine):

    python benchmarks/bench_kernels.py [--quick] [--variants] [--json out.json] [--csv benchmarks/results]

Loss rows: 4096 x 32768 logits, "trained-like" randn*3 and "untrained" flat randn*0.2, fp32 and
bf16, timed eagerly (the public API and the kernel path alone) and replayed from a CUDA graph (GPU
time without Python launch cost). Attention rows: (512, 8, 50, 50) scores with a key-padding -inf
mask, per-head alpha; timed eagerly and replayed from a CUDA graph.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench, do_bench_cudagraph

import result_rows  # (benchmarks/ is on sys.path when run as a script)

import onmt_entmax.ops as ops
from onmt_entmax.ops import _dispatch

try:  # PyPI entmax 1.3, the baseline of issue 5
    import entmax as pypi
except ImportError:  # pragma: no cover
    pypi = None


def bench(fn, grads, rep=200):
    """Median ms of fn() (forward + backward), .grad of `grads` reset between calls."""
    return do_bench(fn, warmup=50, rep=rep, grad_to_none=grads, return_mode="median")


def loss_rows(n, v, scale, dtype, quick):
    dev = "cuda"
    z = (torch.randn(n, v, device=dev) * scale).to(dtype).requires_grad_()
    y = torch.randint(0, v, (n,), device=dev)
    rep = 50 if quick else 200
    out = {"ce": bench(lambda: F.cross_entropy(z, y).backward(), [z], rep)}
    ours = {"entmax15": lambda: ops.entmax15_loss(z, y).backward(),
            "sparsemax": lambda: ops.sparsemax_loss(z, y).backward(),
            "bisect1.33": lambda: ops.entmax_bisect_loss(z, y, alpha=1.33).backward()}
    for name, fn in ours.items():
        out[name] = bench(fn, [z], rep)
    # the kernel path alone (its target check and mean included), without the public API's argument handling
    from onmt_entmax.ops import triton as K
    direct = {"entmax15": lambda: K.fy_loss(z, y, "entmax15", 1.5, reduction="mean").backward(),
              "sparsemax": lambda: K.fy_loss(z, y, "sparsemax", 2.0, reduction="mean").backward(),
              "bisect1.33": lambda: K.fy_loss(z, y, "entmax_bisect", 1.33, reduction="mean").backward()}
    for name, fn in direct.items():
        out["direct_" + name] = bench(fn, [z], rep)
    # the public calls replayed from a CUDA graph: GPU time alone (eager bf16 calls, ~0.4-0.6 ms of GPU
    # work, have measured host-bound by up to 2x on slow hosts)
    for name, fn in {"ce": lambda: F.cross_entropy(z, y).backward(), **ours}.items():
        try:
            out["graph_" + name] = do_bench_cudagraph(fn, rep=rep, grad_to_none=[z], return_mode="median")
        except Exception as e:  # capture not possible: the row says why instead of a time
            out["graph_" + name] = repr(e)[:80]
    if pypi is not None and not quick:
        zf = z  # PyPI entmax returns NaN in bf16 (no upcast): time it on the same tensor anyway
        theirs = {"entmax15": lambda: pypi.entmax15_loss(zf, y).mean().backward(),
                  "sparsemax": lambda: pypi.sparsemax_loss(zf, y).mean().backward(),
                  "bisect1.33": lambda: pypi.entmax_bisect_loss(zf, y, 1.33, 50).mean().backward()}
        for name, fn in theirs.items():
            out["pypi_" + name] = bench(fn, [z], 20)
    return out


def loss_variants(n, v, scale, dtype):
    """Launch-configuration sweep of the fused 1.5-entmax loss (kernel calls only)."""
    from onmt_entmax.ops.triton import loss as KL
    z = (torch.randn(n, v, device="cuda") * scale).to(dtype)
    y = torch.randint(0, v, (n,), device="cuda")
    g = torch.full((n,), 1.0 / n, device="cuda")
    res = {}
    for name, cfg in {"chunk4096w8": {"SINGLE_MAX": 0, "CHUNK": 4096, "num_warps": 8},
                      "single_w4": {"SINGLE_MAX": 1 << 20, "num_warps": 4},
                      "single_w8": {"SINGLE_MAX": 1 << 20, "num_warps": 8},
                      "single_w16": {"SINGLE_MAX": 1 << 20, "num_warps": 16},
                      "single_w32": {"SINGLE_MAX": 1 << 20, "num_warps": 32}}.items():
        for kind in ("entmax15", "sparsemax", "entmax_bisect"):
            def fn():
                _, stats, a = KL.fy_loss_rows(z, y, kind, 1.33, config=cfg)
                KL.fy_grad_rows(z, y, g, stats, a, kind, -100, 0.0)
            try:
                res[f"{kind}/{name}"] = bench(fn, None, 50)
            except Exception as e:  # a configuration that does not compile (registers)
                res[f"{kind}/{name}"] = repr(e)[:80]
    for blk in (512, 1024, 2048, 4096):
        _, stats, a = KL.fy_loss_rows(z, y, "entmax15", 1.5)
        res[f"bwd_only/block{blk}"] = bench(
            lambda: KL.fy_grad_rows(z, y, g, stats, a, "entmax15", -100, 0.0, bwd_block=blk), None, 50)
    res["fwd_only/default"] = bench(lambda: KL.fy_loss_rows(z, y, "entmax15", 1.5), None, 50)
    return res


def attention(b, h, q, k, dtype, quick):
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    z = torch.randn(b, h, q, k, device=dev, generator=gen).to(dtype)
    lengths = torch.randint(k // 2, k + 1, (b,), device=dev, generator=gen)
    pad = torch.arange(k, device=dev)[None, :] >= lengths[:, None]
    z = z.masked_fill(pad[:, None, None, :], float("-inf")).requires_grad_()
    g = torch.randn(z.shape, device=dev, generator=gen).to(dtype)
    alpha = torch.full((h, 1, 1), 1.5, device=dev, requires_grad=True)
    rep = 50 if quick else 200
    fns = {"softmax": lambda: torch.softmax(z, -1).backward(g),
           "entmax15": lambda: ops.entmax15(z, -1).backward(g),
           "sparsemax": lambda: ops.sparsemax(z, -1).backward(g),
           "bisect_per_head": lambda: ops.entmax_bisect(z, alpha, -1).backward(g)}
    # eager: plain calls (host launch cost included); graph: replayed from a CUDA graph, the
    # GPU time of forward + backward (what a GPU-bound model pays)
    out = {name: bench(fn, [z, alpha], rep) for name, fn in fns.items()}
    for name, fn in fns.items():
        out["graph_" + name] = do_bench_cudagraph(fn, rep=rep, grad_to_none=[z, alpha],
                                                  return_mode="median")
    if pypi is not None and not quick and dtype == torch.float32:
        out["pypi_entmax15"] = bench(lambda: pypi.entmax15(z, -1).backward(g), [z], 20)
        out["pypi_sparsemax"] = bench(lambda: pypi.sparsemax(z, -1).backward(g), [z], 20)
        out["pypi_bisect_per_head"] = bench(
            lambda: pypi.entmax_bisect(z, alpha, dim=-1).backward(g), [z, alpha], 20)
    return out


def short_row_errors(cfg: dict, mode: str, lengths=tuple(range(1, 65)) + (100, 257),
                     device: str = "cuda") -> list:
    """Row lengths at which the short-row forward under launch config `cfg` is off the float64
    reference by more than 1e-5 (or not finite): 257 random rows (alpha 1.5 for "bisect", as a
    per-row tensor) and 557 rows with a causal -1e18 mask and alpha from 1.05 to 1.95 (the
    inputs of tests/ops/test_triton_kernels.py). A launch shape is only timed next to this check."""
    from onmt_entmax.ops.triton import check
    from onmt_entmax.ops.triton import mapping as KM
    gen = torch.Generator().manual_seed(11)
    bad = []
    for n_cols in lengths:
        for n_rows, scale in ((257, 2.0), (557, 3.0)):
            z = torch.randn(n_rows, n_cols, generator=gen, dtype=torch.float64) * scale
            alpha = torch.full((n_rows, 1), 1.5, dtype=torch.float64)
            if n_rows == 557:
                future = torch.arange(n_cols)[None, :] > (torch.arange(n_rows) % n_cols)[:, None]
                z = z.masked_fill(future, -1e18)
                alpha = torch.linspace(1.05, 1.95, n_rows, dtype=torch.float64)[:, None]
            ref = check.reference(z, mode, alpha[:, 0])
            a_rows = alpha[:, 0].float().to(device) if mode == "bisect" else None
            p = KM.forward_rows(z.float().to(device), mode, a_rows, config=cfg)
            err = (p.double().cpu() - ref).abs().max().item()
            if not err < 1e-5:
                bad.append((n_cols, n_rows, err))
    return bad


def attention_variants(b, h, q, k, dtype):
    """Tile / warp sweep of the mapping kernels on attention-shaped rows (kernel calls only,
    each forward shape next to its correctness check), and forward+backward replayed from a
    CUDA graph (GPU time without Python launch cost)."""
    from onmt_entmax.ops.triton import mapping as KM
    z = torch.randn(b * h * q, k, device="cuda").to(dtype)
    g = torch.randn(b * h * q, k, device="cuda").to(dtype)
    a = torch.full((b * h * q,), 1.5, device="cuda")
    res = {}
    # lanes: short rows on lanes of their own (`_solver.lane_cols`) or spread over the warp
    for tile, nw, lanes in ((128, 1, True), (256, 1, True), (512, 1, True), (128, 2, True),
                            (128, 1, False), (256, 1, False)):
        cfg = {"TILE": tile, "SPREAD_TILE": tile, "num_warps": nw, "LANE_TILES": lanes}
        for mode in ("entmax15", "sparsemax", "bisect"):
            ar = a if mode == "bisect" else None
            name = f"tile{tile}w{nw}" + ("" if lanes else "-spread")
            res[f"fwd/{mode}/{name}"] = bench(
                lambda: KM.forward_rows(z, mode, ar, config=cfg), None, 30)
            if dtype == torch.float32:
                res[f"wrong_rows/{mode}/{name}"] = short_row_errors(cfg, mode)
    p = KM.forward_rows(z, "entmax15")
    for tile, nw, lanes in ((128, 1, True), (256, 1, True), (512, 1, True), (1024, 1, True),
                            (2048, 2, True), (512, 1, False)):
        cfg = {"BWD_TILE": tile, "num_warps": nw, "LANE_TILES": lanes}
        for mode in ("entmax15", "bisect"):
            ar = a if mode == "bisect" else None
            name = f"tile{tile}w{nw}" + ("" if lanes else "-spread")
            res[f"bwd/{mode}/{name}"] = bench(
                lambda: KM.backward_rows(p, g, mode, ar, config=cfg), None, 30)
    res["fwd/softmax"] = bench(lambda: torch.softmax(z, -1), None, 30)
    zz = z.reshape(b, h, q, k).clone().requires_grad_()
    gg = g.reshape(b, h, q, k)
    alpha = torch.full((h, 1, 1), 1.5, device="cuda", requires_grad=True)
    for name, fn in {"softmax": lambda: torch.softmax(zz, -1).backward(gg),
                     "entmax15": lambda: ops.entmax15(zz, -1).backward(gg),
                     "sparsemax": lambda: ops.sparsemax(zz, -1).backward(gg)}.items():
        try:
            res[f"graph/{name}"] = do_bench_cudagraph(fn, rep=30, grad_to_none=[zz, alpha],
                                                      return_mode="median")
        except Exception as e:  # capture not possible
            res[f"graph/{name}"] = repr(e)[:80]
    return res


def host_us_per_call(fn, reps: int) -> float:
    """Wall us per call of fn() in a loop synchronised only at its ends (after 20 warm-up calls):
    the host's cost per call wherever the GPU work is smaller."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def beam_step(reps: int = 300) -> dict:
    """A sparse model's beam step pick: torch.topk + ops.beam_stats (upstream's top-k, then the
    certificate's statistics) against ops.beam_topk (both in one), 64 sentences x beam 5 over
    vocabularies of 14456 (Multi30k) and 32000, ~5% of the candidates finite. GPU ms (do_bench
    median) and host us a call (a sync before each call, median)."""
    out = {}
    for vocab in (14456, 32000):
        s = torch.randn(64, 5 * vocab, device="cuda") * 3
        s[s < 5.0] = float("-inf")

        def upstream():
            _, kept = torch.topk(s, 5, dim=-1)
            return ops.beam_stats(s, kept)

        for name, fn in (("topk+beam_stats", upstream), ("beam_topk", lambda: ops.beam_topk(s, 5))):
            gpu = do_bench(fn, warmup=20, rep=100, return_mode="median")
            host = []
            for _ in range(reps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn()
                host.append(time.perf_counter() - t0)
            out[f"{vocab}/{name}"] = (gpu, sorted(host)[len(host) // 2] * 1e6)
    return out


def cpu_overhead(n_iter=200):
    """Host time per call (us) with the GPU kept idle-fast on tiny inputs, and cProfiles of the
    1.5-entmax and learned per-head alpha forward+backward: where the Python launch cost goes."""
    import cProfile
    import pstats

    from onmt_entmax.ops import triton as K
    from onmt_entmax.ops.triton import mapping as KM
    z = torch.randn(4, 8, 50, device="cuda").requires_grad_()
    g = torch.randn(4, 8, 50, device="cuda")
    z2 = z.detach().reshape(-1, 50)
    a = torch.zeros(8, device="cuda", requires_grad=True)  # learned alpha as LearnableAlpha makes it

    def per_head():
        alpha = (1.0 + torch.sigmoid(a)).clamp(1.01, 2.0).view(-1, 1)  # heads: dim 1 of z
        ops.entmax_bisect(z, alpha, -1).backward(g)

    cases = {"softmax fwd+bwd": lambda: torch.softmax(z, -1).backward(g),
             "ops.entmax15 fwd+bwd": lambda: ops.entmax15(z, -1).backward(g),
             "ops.entmax_bisect learned per-head alpha fwd+bwd": per_head,
             "K.entmax15 fwd+bwd": lambda: K.entmax15(z, -1).backward(g),
             "ops.entmax15 fwd (no grad)": lambda: ops.entmax15(z2, -1),
             "KM.forward_rows": lambda: KM.forward_rows(z2, "entmax15")}
    out = {name: host_us_per_call(fn, n_iter) for name, fn in cases.items()}
    for fn in (lambda: ops.entmax15(z, -1).backward(g), per_head):
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(n_iter):
            fn()
        torch.cuda.synchronize()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(22)
    return out


def csv_rows(res: dict) -> dict[str, list[dict]]:
    """The printed table's rows as benchmarks/results rows: losses.csv and attention.csv (result_rows.py)."""
    out: dict[str, list[dict]] = {"losses": [], "attention": []}
    for key, r in res["loss"].items():
        for op in ("entmax15", "sparsemax", "bisect1.33"):
            pyp = r.get("pypi_" + op)
            out["losses"].append({"case": f"loss 4096x32768 {key}", "op": op, "ours": f"{r[op]:.3f}",
                                  "baseline": f"{r['ce']:.3f}", "ratio": f"{r[op] / r['ce']:.2f}", "units": "ms",
                                  "pypi_ratio": f"{pyp / r['ce']:.1f}" if pyp else ""})
            g, gc = r.get("graph_" + op), r.get("graph_ce")
            if isinstance(g, float) and isinstance(gc, float):
                out["losses"].append({"case": f"loss 4096x32768 {key}, GPU time", "op": op, "ours": f"{g:.3f}",
                                      "baseline": f"{gc:.3f}", "ratio": f"{g / gc:.2f}", "units": "ms"})
    for key, r in res["attention"].items():
        for op in ("entmax15", "sparsemax", "bisect_per_head"):
            pyp = r.get("pypi_" + op)
            out["attention"].append({"case": f"attention 512x8x50x50 {key}, eager", "op": op, "ours": f"{r[op]:.3f}",
                                     "baseline": f"{r['softmax']:.3f}", "ratio": f"{r[op] / r['softmax']:.2f}",
                                     "units": "ms", "pypi_ratio": f"{pyp / r['softmax']:.1f}" if pyp else ""})
            g, gs = r["graph_" + op], r["graph_softmax"]
            out["attention"].append({"case": f"attention 512x8x50x50 {key}, GPU time", "op": op, "ours": f"{g:.3f}",
                                     "baseline": f"{gs:.3f}", "ratio": f"{g / gs:.2f}", "units": "ms"})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats, no PyPI baseline")
    ap.add_argument("--variants", action="store_true", help="launch-configuration sweep")
    ap.add_argument("--json", help="write all numbers here")
    ap.add_argument("--csv", type=Path, metavar="DIR",
                    help="append the loss and attention rows to DIR/losses.csv and DIR/attention.csv "
                         "(benchmarks/results)")
    ap.add_argument("--overhead", action="store_true", help="host launch cost only")
    ap.add_argument("--beam-step", action="store_true", help="a beam step's top-k + certificate only")
    args = ap.parse_args(argv)
    if args.overhead:
        print({k: round(v, 1) for k, v in cpu_overhead().items()})
        return
    if args.beam_step:
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}")
        print("| 64 x beam 5 x vocabulary | op | GPU ms | host us a call |\n|---|---|---|---|")
        for key, (gpu, host) in beam_step().items():
            vocab, name = key.split("/")
            print(f"| {vocab} | {name} | {gpu:.4f} | {host:.1f} |")
        return
    assert torch.cuda.is_available(), "needs a CUDA GPU"
    assert _dispatch.kernel("entmax15", torch.zeros(2, 2, device="cuda")) is not None, \
        "the Triton kernels are not dispatched (Triton missing or ONMT_ENTMAX_NO_TRITON set?)"
    head = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__, "entmax": getattr(pypi, "__version__", None),
            "cmd": " ".join(sys.argv)}
    print(head, flush=True)
    res = {"head": head, "loss": {}, "attention": {}, "variants": {}}
    for dtype in (torch.float32, torch.bfloat16):
        for scale in (3.0, 0.2):
            key = f"{str(dtype)[6:]}/randn*{scale}"
            res["loss"][key] = loss_rows(4096, 32768, scale, dtype, args.quick)
            print("loss", key, res["loss"][key], flush=True)
            if args.variants:
                res["variants"][key] = loss_variants(4096, 32768, scale, dtype)
                print("variants", key, res["variants"][key], flush=True)
    for dtype in (torch.float32, torch.bfloat16):
        key = str(dtype)[6:]
        res["attention"][key] = attention(512, 8, 50, 50, dtype, args.quick)
        print("attention", key, res["attention"][key], flush=True)
        if args.variants:
            res["variants"]["attention/" + key] = attention_variants(512, 8, 50, 50, dtype)
            print("variants attention", key, res["variants"]["attention/" + key], flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    if args.csv:
        for family, rows in csv_rows(res).items():
            result_rows.append(args.csv, family, rows, gpu=True)
    print("\n| case | op | ours ms | baseline ms | ours / baseline | PyPI / baseline |")
    print("|---|---|---|---|---|---|")
    for key, r in res["loss"].items():
        for op in ("entmax15", "sparsemax", "bisect1.33"):
            pyp = r.get("pypi_" + op)
            print(f"| loss 4096x32768 {key} | {op} | {r[op]:.3f} | CE {r['ce']:.3f} | "
                  f"{r[op] / r['ce']:.2f}x | {pyp / r['ce']:.1f}x |" if pyp else
                  f"| loss 4096x32768 {key} | {op} | {r[op]:.3f} | CE {r['ce']:.3f} | "
                  f"{r[op] / r['ce']:.2f}x | - |")
            g, gc = r.get("graph_" + op), r.get("graph_ce")
            if isinstance(g, float) and isinstance(gc, float):
                print(f"| loss 4096x32768 {key}, GPU time | {op} | {g:.3f} | CE {gc:.3f} | {g / gc:.2f}x | - |")
            elif g is not None:
                print(f"| loss 4096x32768 {key}, GPU time | {op} | {g} | CE {gc} | - | - |")
    for key, r in res["attention"].items():
        for op in ("entmax15", "sparsemax", "bisect_per_head"):
            pyp = r.get("pypi_" + op)
            extra = f"{pyp / r['softmax']:.1f}x" if pyp else "-"
            print(f"| attention 512x8x50x50 {key}, eager | {op} | {r[op]:.3f} | softmax "
                  f"{r['softmax']:.3f} | {r[op] / r['softmax']:.2f}x | {extra} |")
            g, gs = r["graph_" + op], r["graph_softmax"]
            print(f"| attention 512x8x50x50 {key}, GPU time | {op} | {g:.3f} | softmax "
                  f"{gs:.3f} | {g / gs:.2f}x | - |")


if __name__ == "__main__":
    main()
