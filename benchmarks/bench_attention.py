"""One OpenNMT-py attention call on the GPU, softmax (SDPA) vs sparse: decoding step or training step.

Beam-search decoding and small-Transformer training are host-bound: what matters is how long the
host takes to issue one `MultiHeadedAttention` call. Decoding (default): one query per hypothesis,
source keys and values cached as onmt_translate does, no grad. Training (--train): the module in
training mode (attention dropout 0.1), forward + backward, --rows sentences of --keys tokens
(context attention over a source as long as the target). Each call is timed in a loop with one
synchronisation at the end (the host's cost per call wherever the GPU's is smaller), for a stock
softmax module (OpenNMT-py's SDPA branch), sparse modules on the fused path
(onmt_entmax/onmt/model/fused_attention.py) and on the eager branch they took before (matmul, mask,
normalizer, dropout, matmul), in rounds over the cases (each case's fastest round kept). Ratios are
against softmax in the same run.

    python benchmarks/bench_attention.py [--rows 320] [--keys 30] [--reps 1000] [--rounds 5]
    python benchmarks/bench_attention.py --train --rows 128 --keys 32 --reps 200 [--csv benchmarks/results]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

import result_rows
from bench_kernels import host_us_per_call  # (benchmarks/ is on sys.path when run as a script)

import onmt_entmax.onmt as plugin
from onmt_entmax.modules import AttentionNormalizer
from onmt_entmax.onmt.model import fused_attention
from onmt_entmax.registry import get_transformation


def attention_module(name: str, learn: bool, heads: int, dim: int, train: bool = False):
    from onmt.modules.multi_headed_attn import MultiHeadedAttention

    module = MultiHeadedAttention(heads, dim, dropout=0.1 if train else 0.0, attn_type="context",
                                  self_attn_type="scaled-dot-flash")
    if name != "softmax":
        module.softmax = AttentionNormalizer(get_transformation(name), heads=heads, learn_alpha=learn)
        module.self_attn_type = "scaled-dot"
    with torch.no_grad():
        for p in module.parameters():  # upstream builds its linears with skip_init
            p.normal_(0, 0.05)
    if train:
        return module.cuda().train()
    # decoding: the source keys / values are projected once and cached (what onmt_translate does)
    module.layer_cache = (True, {"keys": torch.tensor([]), "values": torch.tensor([])})
    return module.cuda().eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=320, help="hypotheses (sentences x beam)")
    ap.add_argument("--keys", type=int, default=30)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--train", action="store_true", help="training mode, forward + backward")
    ap.add_argument("--csv", type=Path, default=None, metavar="DIR",
                    help="append the rows to DIR/attention.csv (benchmarks/results)")
    args = ap.parse_args()
    plugin.activate()
    torch.manual_seed(0)
    key = torch.randn(args.rows, args.keys, args.dim, device="cuda")
    query = torch.randn(args.rows, args.keys if args.train else 1, args.dim, device="cuda")
    grad = torch.randn_like(query)
    pad = torch.zeros(args.rows, 1, 1, args.keys, dtype=torch.bool, device="cuda")
    pad[::3, ..., args.keys - 4:] = True
    cases = {}
    with torch.set_grad_enabled(args.train):
        for name, learn in (("softmax", False), ("entmax15", False), ("entmax_bisect", True)):
            m = attention_module(name, learn, args.heads, args.dim, args.train)
            label = "learned alpha" if learn else name
            if args.train:
                cases[f"{label}: module call"] = lambda m=m: m(key, key, query, mask=pad)[0].backward(grad)
                continue
            cases[f"{label}: module call"] = lambda m=m: m(key, key, query, mask=pad)
            if name == "softmax":
                continue
            q = torch.randn(args.rows, args.heads, 1, args.dim // args.heads, device="cuda")
            k = torch.randn(args.rows, args.heads, args.keys, args.dim // args.heads, device="cuda")
            cases[f"{label}: attend() alone"] = lambda m=m, q=q, k=k: m.softmax.attend(q, k, k, ~pad)
        def eager(fn):
            def call():
                with fused_attention.eager_branch():  # as before the fused path
                    fn()
            return call

        for name, fn in list(cases.items()):
            if name.endswith("module call") and not name.startswith("softmax"):
                cases[name.replace("module call", "module call, eager branch")] = eager(fn)
        # rounds over the cases, each case's fastest kept: the host's speed drifts within a run
        results = {name: float("inf") for name in cases}
        for _ in range(args.rounds):
            for name, fn in cases.items():
                results[name] = min(results[name], host_us_per_call(fn, args.reps))
    base = results["softmax: module call"]
    what = "training-step attention call (forward + backward)" if args.train else "decoding-step attention call"
    print(f"One {what}, host-bound loop ({torch.cuda.get_device_name()}, {args.rows} rows, "
          f"{args.heads} heads, {args.keys} keys, d={args.dim}{'' if args.train else ', no grad'})")
    print("| call | us / call | vs softmax module call |")
    print("|---|---|---|")
    for name, us in results.items():
        print(f"| {name} | {us:.1f} | {us / base:.2f}x |")
    if args.csv:
        case = f"{'training' if args.train else 'decoding'}-step module call {args.rows} rows x {args.heads} heads " \
               f"x {args.keys} keys, d={args.dim}"
        result_rows.append(args.csv, "attention", [
            {"case": case, "op": name, "ours": f"{us:.1f}", "baseline": f"{base:.1f}", "ratio": f"{us / base:.2f}",
             "units": "us"} for name, us in results.items() if not name.startswith("softmax")], gpu=True)


if __name__ == "__main__":
    main()
