"""Where the time of the fused Fenchel-Young losses (triton/loss.py) goes, one GPU: the forward with and
without the gradient written, the backward that recomputes p, the backward left with nothing to do (an
incoming gradient of 1), and launch shapes of the forward, each against `F.cross_entropy` in the same
process (`triton.testing.do_bench` medians, ms).

    python3 benchmarks/profile_loss.py [--n 4096] [--v 32768] [--dtypes bf16,fp32] [--variants]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onmt_entmax.ops.triton import loss as KL  # noqa: E402

KINDS = {"sparsemax": 2.0, "entmax15": 1.5, "entmax_bisect": 1.33}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}
# forward launch shapes tried with --variants (the _config.DEFAULTS keys they override), by kind
_STREAM = {"SINGLE_MAX": 0, "BISECT_SINGLE_MAX": 0}
VARIANTS = {"sparsemax": {"stream2048w8": {**_STREAM, "CHUNK": 2048, "num_warps": 8},
                          "stream4096w16": {**_STREAM, "CHUNK": 4096, "num_warps": 16},
                          "stream8192w16": {**_STREAM, "CHUNK": 8192, "num_warps": 16}},
            "entmax_bisect": {"stream2048w8": {**_STREAM, "CHUNK": 2048, "num_warps": 8},
                              "stream4096w16": {**_STREAM, "CHUNK": 4096, "num_warps": 16}}}
VARIANTS["entmax15"] = VARIANTS["sparsemax"]


def ms(fn, rep=100, grads=None):
    return do_bench(fn, warmup=20, rep=rep, grad_to_none=grads, return_mode="median")


def profile(n, v, scale, dtype, variants, kinds):
    z = (torch.randn(n, v, device="cuda") * scale).to(dtype).requires_grad_()
    y = torch.randint(0, v, (n,), device="cuda")
    out = {"ce fwd+bwd": ms(lambda: F.cross_entropy(z, y).backward(), grads=[z]),
           "ce fwd": ms(lambda: F.cross_entropy(z.detach(), y))}
    zd = z.detach()
    for kind, alpha in ((k, KINDS[k]) for k in kinds):
        def public(fuse):
            return lambda: KL._FYLoss.apply(z, alpha, y, kind, 0.0, -100, 0.0, "mean", fuse)[0].backward()
        out[f"{kind} fwd+bwd, grad in forward"] = ms(public(True), grads=[z])
        out[f"{kind} fwd+bwd, backward recomputes"] = ms(public(False), grads=[z])
        half = torch.full((), 0.5, device="cuda", dtype=dtype)  # an incoming gradient that is not 1

        def scaled(fuse):
            return lambda: KL._FYLoss.apply(z, alpha, y, kind, 0.0, -100, 0.0, "mean", fuse)[0].backward(half)
        out[f"{kind} fwd+bwd(0.5), grad in forward"] = ms(scaled(True), grads=[z])
        out[f"{kind} fwd+bwd(0.5), backward recomputes"] = ms(scaled(False), grads=[z])
        _, aux = KL.reduce_rows(None, y, v, -100, "mean", dtype, part=1)
        dz = torch.empty_like(zd)
        out[f"{kind} fwd (no grad)"] = ms(lambda: KL.fy_loss_rows(zd, y, kind, alpha))
        out[f"{kind} fwd writing grad"] = ms(lambda: KL.fy_loss_rows(zd, y, kind, alpha, dz=dz, weight=aux))
        _, stats, a_rows = KL.fy_loss_rows(zd, y, kind, alpha)
        one = torch.ones((), device="cuda", dtype=dtype)
        out[f"{kind} bwd recompute"] = ms(lambda: KL.fy_grad_rows(zd, y, one, stats, a_rows, kind, -100, 0.0,
                                                                  out=dz, weight=aux))
        out[f"{kind} bwd, g = 1"] = ms(lambda: KL.fy_grad_rows(zd, y, one, stats, a_rows, kind, -100, 0.0,
                                                               out=dz, weight=aux, skip_one=True))
        if variants:
            for name, cfg in VARIANTS[kind].items():
                try:
                    out[f"{kind} fwd writing grad [{name}]"] = ms(
                        lambda: KL.fy_loss_rows(zd, y, kind, alpha, config=cfg, dz=dz, weight=aux), 50)
                except Exception as e:  # a shape that does not compile (registers, shared memory)
                    out[f"{kind} fwd writing grad [{name}]"] = repr(e)[:60]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--v", type=int, default=32768)
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--scales", default="3.0,0.2")
    ap.add_argument("--variants", action="store_true", help="forward launch shapes too")
    ap.add_argument("--kinds", default=",".join(KINDS))
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("profile_loss.py: needs a CUDA GPU (none is visible)")
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for dt in a.dtypes.split(","):
        for scale in (float(s) for s in a.scales.split(",")):
            res = profile(a.n, a.v, scale, DTYPES[dt], a.variants, a.kinds.split(","))
            ce = res["ce fwd+bwd"]
            print(f"\n{dt} randn*{scale}, {a.n} x {a.v}:")
            for name, t in res.items():
                print(f"  {name:50s} {t:.4f} ms  {t / ce:.2f}x CE" if isinstance(t, float) else f"  {name:50s} {t}")


if __name__ == "__main__":
    main()
