"""One decoding step's attention call past the short rows, one GPU: one query a hypothesis over 1025 ...
8192 keys, no grad, as `sparse_attention_decode` issues it, against `F.scaled_dot_product_attention` in
the same process: the one-program-a-row kernel (triton/attention.py, `_attn_fwd_staged_kernel`) with its warps
and chunk (`--variants w8p32,w4p16,...`: STAGED_WARPS, entries of a k or v chunk a thread) and the tiles of
attention_long (`tiles`). GPU time (`triton.testing.do_bench` median) and the time a call takes in a loop of
calls with one synchronisation at the end (the host's, where it is the larger), microseconds; and the largest
difference from the float64 reference.

    python3 benchmarks/profile_decode_attention.py [--keys 1025,2048,4096,8192] [--batch 1]
    python3 benchmarks/profile_decode_attention.py --kinds entmax15 --variants w4p32,w8p32,w16p32,tiles
"""
from __future__ import annotations

import argparse
import os
import re
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onmt_entmax.ops import attention as ref_attention  # noqa: E402
from onmt_entmax.ops.triton import attention as KA  # noqa: E402

ALPHA = {"sparsemax": None, "entmax15": None, "entmax_bisect": 1.33}
DEFAULT = (KA.STAGED_WARPS, KA._STAGED_PER_THREAD)


def parse_variant(name: str) -> tuple[int, int] | None:
    """'wWpP' -> (warps, entries a thread) of the row kernel; 'tiles' -> None (attention_long);
    'default' -> the launch's own."""
    if name == "tiles":
        return None
    if name == "default":
        return DEFAULT
    m = re.fullmatch(r"w(\d+)p(\d+)", name)
    if not m or int(m[1]) not in (1, 2, 4, 8, 16, 32) or int(m[2]) < 1:
        raise SystemExit(f"profile_decode_attention.py: unknown variant {name!r} (wWpP, tiles, default)")
    return int(m[1]), int(m[2])


def set_row_kernel(setting: tuple[int, int]) -> None:
    """The row kernel's warps and chunk; the cached launch plans dropped so the next call takes them."""
    KA.STAGED_WARPS, KA._STAGED_PER_THREAD = setting
    KA._PLANS.clear()


def main() -> None:
    from triton.testing import do_bench

    from bench_kernels import host_us_per_call  # (benchmarks/ is on sys.path when run as a script)

    from onmt_entmax.ops.triton import attention_long as KL

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="1025,2048,4096,8192")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--kinds", default=",".join(ALPHA))
    ap.add_argument("--variants", default="default,tiles")
    a = ap.parse_args()
    variants = [(name, parse_variant(name)) for name in a.variants.split(",")]
    if not torch.cuda.is_available():
        raise SystemExit("profile_decode_attention.py: needs a CUDA GPU (none is visible)")
    print(torch.cuda.get_device_name(), torch.__version__, f"B={a.batch} H={a.heads} Tq=1 D={a.dim} bf16",
          flush=True)
    H, D = a.heads, a.dim
    try:
        for kind in a.kinds.split(","):
            alpha = ALPHA[kind]
            for tk in (int(t) for t in a.keys.split(",")):
                g = torch.Generator(device="cuda").manual_seed(tk)
                q, k, v = (torch.randn(a.batch, H, n, D, device="cuda", generator=g).bfloat16()
                           for n in (1, tk, tk))
                ref = ref_attention._reference(q.double(), k.double(), v.double(), None, kind, alpha, D ** -0.5, 200)
                sdpa = (do_bench(lambda: F.scaled_dot_product_attention(q, k, v), return_mode="median") * 1e3,
                        host_us_per_call(lambda: F.scaled_dot_product_attention(q, k, v), 200))
                cells = [f"{kind:13s} Tk={tk:5d}  sdpa {sdpa[0]:6.1f} / {sdpa[1]:6.1f} us"]
                for name, setting in variants:
                    if setting is None:
                        def call():
                            return KL.sparse_attention(q, k, v, None, kind, alpha, D ** -0.5)
                    elif not KA.supports(q, k, v, None, kind, alpha):  # (past its LONG_KEYS: the tiles)
                        cells.append(f"{name} -")
                        continue
                    else:
                        set_row_kernel(setting)

                        def call():
                            return KA.sparse_attention(q, k, v, None, kind, alpha)
                    err = (call().double() - ref).abs().max().item()
                    gpu = do_bench(call, return_mode="median") * 1e3
                    loop = host_us_per_call(call, 200)
                    cells.append(f"{name} {gpu:6.1f} / {loop:6.1f} us ({gpu / sdpa[0]:4.1f}x) err {err:.0e}")
                print(" | ".join(cells), flush=True)
    finally:
        set_row_kernel(DEFAULT)


if __name__ == "__main__":
    main()
