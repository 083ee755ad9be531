"""How often pass 1 of the long-attention forward (triton/attention_long.py, `_start`) can certify the
threshold of its start subset, counted in float64 on the CPU (no GPU, no kernel): the subset keeps the TOPK
largest scores at each key position mod BN, and certifies a row where every position holds at most TOPK - 1
support entries (the smallest entry kept there then lies outside the support, and so does every entry left
out). A query block of 64 rows takes no Newton pass only where all its rows are certified.

    python3 benchmarks/certificate_rates.py [--kinds sparsemax,entmax15] [--T 1024,4096,16384] [--topk 2,4]

Rows are randn queries and keys of head dim 64 scaled by 1/8 (scores of unit scale), as the benchmarks'.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onmt_entmax.ops.entmax import mapping_of_kind  # noqa: E402

BLOCK = 64  # query rows a program of the forward holds


def certified_rows(scores: torch.Tensor, kind: str, alpha: float, bn: int, topk: int) -> torch.Tensor:
    """(rows,) bool: whether the row's support holds at most topk - 1 entries at each key position mod bn."""
    p = mapping_of_kind(scores, kind, alpha, -1, 200)
    support = p > 0
    n = scores.shape[-1]
    pad = (-n) % bn
    at_position = torch.nn.functional.pad(support, (0, pad)).view(scores.shape[0], -1, bn).sum(1)
    return (at_position < topk).all(-1)


def rates(kind: str, alpha: float, T: int, bn: int, topk: int, rows: int = 256, seed: int = 0) -> tuple[float, float]:
    """(share of rows, share of query blocks of BLOCK rows) that pass 1 certifies on randn scores."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, 64, generator=g, dtype=torch.float64)
    k = torch.randn(T, 64, generator=g, dtype=torch.float64)
    ok = certified_rows(q @ k.T / 8, kind, alpha, bn, topk)
    return ok.double().mean().item(), ok.view(-1, BLOCK).all(-1).double().mean().item()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default="sparsemax,entmax15")
    ap.add_argument("--alpha", type=float, default=1.5, help="entmax_bisect's alpha")
    ap.add_argument("--T", default="1024,4096,16384,32768", help="comma-separated key counts")
    ap.add_argument("--bn", default="32,64", help="comma-separated key tiles")
    ap.add_argument("--topk", default="2,4", help="comma-separated entries kept a key position")
    ap.add_argument("--rows", type=int, default=256, help="query rows a case (a multiple of 64)")
    a = ap.parse_args(argv)
    print("| kind | keys | key tile | TOPK | rows certified | blocks of 64 certified |\n|---|---|---|---|---|---|")
    for kind in a.kinds.split(","):
        for T in map(int, a.T.split(",")):
            for bn in map(int, a.bn.split(",")):
                for topk in map(int, a.topk.split(",")):
                    row, block = rates(kind, a.alpha, T, bn, topk, a.rows)
                    print(f"| {kind} | {T} | {bn} | {topk} | {row:.3f} | {block:.2f} |", flush=True)


if __name__ == "__main__":
    main()
