"""Where the time of triton/attention_long.py goes, one GPU: forward and backward apart, the Newton
passes per query block, and the kernels' knobs (`set_knobs`: tiles, warps, pipelining stages, tile skipping,
the start's entries a key position, alpha-entmax's start margin, row-wise proof, the two-kernel backward),
e.g. --variants default,64x64x8+topk2+bw4; learned alphas (`--kinds learned`) with their logits' gradient.

    python3 benchmarks/profile_long_attention.py [--T 4096] [--batch 2] [--kinds entmax15] [--dtype bf16]
    python3 benchmarks/profile_long_attention.py --kinds entmax_bisect --alpha 1.5 --variants default,margin
    python3 benchmarks/profile_long_attention.py --kinds entmax_bisect,learned --variants default,newton
    python3 benchmarks/profile_long_attention.py --mask causal-full --variants default
    git show HEAD~1:onmt_entmax/ops/triton/attention_long.py > /tmp/before.py
    python3 benchmarks/profile_long_attention.py --against /tmp/before.py --variants default,default

--against FILE times a second copy of the kernels' module (an earlier attention_long.py, loaded in its package so
its relative imports resolve) on the same inputs right after each variant, its rows marked `against`.

--mask gives the keep masks the toolkits pass (SDPA gets the same one): `pad` (B, 1, 1, T), the key padding of
Eole's encoder, the last eighth of the keys of every other sequence padded; `pad-full`, the same as a
materialized (B, 1, T, T) tensor, OpenNMT-py's encoder and cross-attention; `causal-full`, its decoder's
(B, 1, T, T) causal and padding mask (both toolkits').
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onmt_entmax.modules.attention import ALPHA_MAX, ALPHA_MIN, LearnableAlpha  # noqa: E402
from onmt_entmax.ops.triton import attention_long as KL  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
ALPHA = {"sparsemax": None, "entmax15": None, "entmax_bisect": 1.33}
LEARNED = "learned"  # a kind of its own here: alpha-entmax from one logit a head, alpha = clamp(1 + sigmoid(a))
BWD_STAGES = KL.BWD_STAGES  # (the default, restored between variants)


MASKS = ("none", "pad", "pad-full", "causal-full")


def keep_mask(name: str, batch: int, T: int) -> torch.Tensor | None:
    """The --mask keep mask (True = attend) for batch x T keys: see the module docstring."""
    if name == "none":
        return None
    pad = torch.ones(batch, 1, 1, T, dtype=torch.bool, device="cuda")
    pad[1::2, ..., T - T // 8:] = False
    if name == "pad":
        return pad
    full = pad.expand(batch, 1, T, T)
    if name == "causal-full":
        full = full & torch.ones(T, T, dtype=torch.bool, device="cuda").tril()
    return full.contiguous()


def timings(q, k, v, grad, kind, causal, keep=None):
    """(forward ms, backward ms, host ms): the GPU times of the forward and of the backward alone (on a kept graph),
    and the host's time to issue a forward + backward, unsynchronised (above the GPU times: the call is bound by
    its Python and launch overhead, not by the kernels). LEARNED: logits of --alpha a head, their gradient too
    (the learned-alpha backward)."""
    inputs, extra = (q, k, v), {}
    if kind == LEARNED:
        alpha = LearnableAlpha(q.shape[1], ALPHA["entmax_bisect"]).to(q.device).a  # (the module's logits)
        kind, inputs, extra = "entmax_bisect", (q, k, v, alpha), {"alpha_bounds": (ALPHA_MIN, ALPHA_MAX)}
    else:
        alpha = ALPHA[kind]
    fwd = lambda: KL.sparse_attention(q, k, v, keep, kind, alpha, q.shape[-1] ** -0.5, causal=causal, **extra)
    out = fwd()
    torch.autograd.grad(out, inputs, grad, retain_graph=True)
    t_f = do_bench(lambda: fwd(), warmup=10, rep=50, return_mode="median")
    t_b = do_bench(lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True), warmup=10, rep=50,
                   return_mode="median")
    return t_f, t_b, host_ms(lambda: torch.autograd.grad(fwd(), inputs, grad))


def host_ms(fn, n: int = 20) -> float:
    """The host's ms a call of fn, unsynchronised (the median of n; the GPU queue absorbs what the kernels lag)."""
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return sorted(times)[n // 2]


def load_against(path: str):
    """The kernels' module from `path` (an attention_long.py of another revision), in onmt_entmax.ops.triton."""
    spec = importlib.util.spec_from_file_location("onmt_entmax.ops.triton._against", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def set_knobs(var: str) -> None:
    """The kernels' knobs for a variant: '+'-joined parts, each 'default', 'noskip', 'margin' (alpha-entmax's
    Newton from the start's subset threshold less the solver's margin), 'newton' (alpha-entmax's passes with
    Newton's step where they take Halley's), 'rowwise' (rows pass 1 does not prove
    solved by a second launch), 'topkN', 'twobwd',
    'stagesN' (every kernel), 'bstagesN' (the backward's), 'bwN' (the backward's warps), 'bkN' (the backward's key
    tile: BN or 2 BN), 'regN' / 'bregN' (the forward's / backward's register cap a thread), 'BMxBNxWARPS' (both
    passes' tiles, unless bkN) or 'rowsBMxBNxWARPS' (the listed-rows kernel's, with rowwise)."""
    KL.TILE, KL.SKIP, KL.STAGES, KL.TOPK, KL.FUSED_BWD, KL.BWD_WARPS, KL.BWD_STAGES, KL.BWD_KEYS = \
        None, True, None, None, None, None, BWD_STAGES, None
    KL.REGS, KL.BWD_REGS, KL.ALPHA_MARGIN, KL.ROWWISE, KL.ROWS_TILE, KL.HALLEY = None, None, False, False, None, True
    for part in var.split("+"):
        if part == "noskip":
            KL.SKIP = False
        elif part == "newton":
            KL.HALLEY = False
        elif part == "margin":
            KL.ALPHA_MARGIN = True
        elif part == "rowwise":
            KL.ROWWISE = True
        elif part.startswith("rows"):
            KL.ROWS_TILE = tuple(int(n) for n in part[4:].split("x"))
        elif part.startswith("topk"):
            KL.TOPK = int(part[4:])
        elif part == "twobwd":
            KL.FUSED_BWD = False
        elif part.startswith("bstages"):
            KL.BWD_STAGES = int(part[7:])
        elif part.startswith("stages"):
            KL.STAGES = int(part[6:])
        elif part.startswith("breg"):
            KL.BWD_REGS = int(part[4:])
        elif part.startswith("reg"):
            KL.REGS = int(part[3:])
        elif part.startswith("bk"):
            KL.BWD_KEYS = int(part[2:])
        elif part.startswith("bw"):
            KL.BWD_WARPS = int(part[2:])
        elif "x" in part:
            KL.TILE = tuple(int(n) for n in part.split("x"))
        elif part != "default":
            raise SystemExit(f"profile_long_attention.py: unknown variant part {part!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--kinds", default="entmax15", help=f"comma-separated: sparsemax, entmax15, entmax_bisect, "
                    f"{LEARNED} (alpha-entmax of learned logits, their gradient too)")
    ap.add_argument("--alpha", type=float, default=ALPHA["entmax_bisect"],
                    help=f"entmax_bisect's alpha, and {LEARNED}'s at its logits")
    ap.add_argument("--variants", default="default,noskip,128x64x8,128x64x4,64x128x4,stages1,stages2,stages4")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtype", choices=DTYPES, default="bf16")
    ap.add_argument("--mask", choices=MASKS, default="none", help="the keep mask (module docstring)")
    ap.add_argument("--against", help="another attention_long.py, timed after each variant (module docstring)")
    a = ap.parse_args()
    global KL
    modules = [("", KL)] + ([("against", load_against(a.against))] if a.against else [])
    ALPHA["entmax_bisect"] = a.alpha
    if not torch.cuda.is_available():
        raise SystemExit("profile_long_attention.py: needs a CUDA GPU (none is visible)")
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, grad = (torch.randn(a.batch, 8, a.T, 64, device="cuda", dtype=DTYPES[a.dtype], generator=g)
                     for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_()
    keep = keep_mask(a.mask, a.batch, a.T)
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=a.causal)
    sd_f = do_bench(sdpa, return_mode="median")
    sd_fb = do_bench(lambda: torch.autograd.grad(sdpa(), (q, k, v), grad), return_mode="median")
    sd_host = host_ms(lambda: torch.autograd.grad(sdpa(), (q, k, v), grad))
    print(f"{a.dtype} T={a.T} B={a.batch} causal={a.causal} mask={a.mask}: SDPA fwd {sd_f:.3f} ms, "
          f"fwd+bwd {sd_fb:.3f} ms, host {sd_host:.3f} ms", flush=True)
    for kind in a.kinds.split(","):
        for var, (tag, KL) in ((var, mod) for var in a.variants.split(",") for mod in modules):
            set_knobs(var)
            name = f"{var}{' ' + tag if tag else ''}"
            bm = KL.TILE[0] if KL.TILE else 64
            KL.ITERS = torch.zeros(a.batch * 8, -(-a.T // bm), dtype=torch.int32, device="cuda")
            try:
                f, b, host = timings(q, k, v, grad, kind, a.causal, keep)
            except Exception as e:  # noqa: BLE001 (a variant that does not compile: say so, go on)
                print(kind, name, "failed:", str(e).splitlines()[0][:200], flush=True)
                continue
            it = KL.ITERS.float()
            print(f"{kind:14s} {name:24s} fwd {f:8.3f} ms ({f / sd_f:5.1f}x)  "
                  f"bwd {b:8.3f} ms ({b / (sd_fb - sd_f):5.1f}x)"
                  f"  total {(f + b) / sd_fb:5.1f}x  host {host:6.3f} ms"
                  f"  passes mean {it.mean():.2f} max {it.max():.0f}",
                  flush=True)
    for _tag, KL in modules:
        set_knobs("default")
        KL.ITERS = None


if __name__ == "__main__":
    main()
