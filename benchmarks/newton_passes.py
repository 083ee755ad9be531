"""How many passes over the keys the long-attention forward's alpha-entmax threshold takes after its start
(triton/attention_long.py, `_start`: the threshold of the subset of the TOPK largest scores at each key position
mod BN, a lower bound of the row's), counted in float64 on the CPU (no GPU, no kernel). Each pass sums the row's
statistics at tau and stops the row at |A - 1| <= tol (A = sum [x - tau]_+^beta, x = (alpha - 1)(s - max s));
a query block of 64 rows takes as many passes as its slowest row. Two steps between passes:

    newton:  tau += A (1 - A^(-1/beta)) / B                  Newton on the norm A^(1/beta) - 1 (the kernels')
    halley:  tau += -2 h h' / (2 h'^2 - h h''),  h = A - 1    Halley on A - 1: h' = -beta B, h'' = beta (beta - 1) C

with B = sum [x - tau]_+^(beta - 1) and C = sum [x - tau]_+^(beta - 2) on the support (C needs beta >= 2,
alpha <= 1.5, to stay finite near the threshold).

    python3 benchmarks/newton_passes.py [--alpha 1.25,1.33,1.5] [--T 4096] [--bn 64] [--topk 4] [--rows 512]

Rows are randn queries and keys of head dim 64 scaled by 1/8 (scores of unit scale), as the benchmarks'.
"""
from __future__ import annotations

import argparse

import torch

BLOCK = 64  # query rows a program of the forward holds
STEPS = ("newton", "halley")


def subset_threshold(x: torch.Tensor, beta: float, bn: int, topk: int, iters: int = 200) -> torch.Tensor:
    """(rows,) the threshold of the subset of the topk largest entries at each position mod bn (bisection)."""
    pad = (-x.shape[-1]) % bn
    xs = torch.nn.functional.pad(x, (0, pad), value=float("-inf")).view(x.shape[0], -1, bn)
    sub = xs.topk(min(topk, xs.shape[1]), dim=1).values.reshape(x.shape[0], -1)
    lo, hi = torch.full(x.shape[:1], -1.0, dtype=x.dtype), torch.zeros(x.shape[:1], dtype=x.dtype)
    for _ in range(iters):
        mid = (lo + hi) / 2
        big = (torch.clamp(sub - mid[:, None], min=0) ** beta).sum(-1) >= 1
        lo, hi = torch.where(big, mid, lo), torch.where(big, hi, mid)
    return lo


def passes(x: torch.Tensor, beta: float, tau: torch.Tensor, step: str, tol: float = 1e-6,
           limit: int = 64) -> torch.Tensor:
    """(rows,) the passes each row takes from tau until |A - 1| <= tol (at most limit)."""
    count = torch.zeros(x.shape[0], dtype=torch.long)
    done = torch.zeros(x.shape[0], dtype=torch.bool)
    for _ in range(limit):
        d = torch.clamp(x - tau[:, None], min=0)
        on = d > 0
        a = (d ** beta).sum(-1)
        b = torch.where(on, d ** (beta - 1), 0.0).sum(-1)
        count += (~done).long()
        done = done | ((a - 1).abs() <= tol)
        if done.all():
            break
        if step == "newton":
            s = a * (1 - a ** (-1 / beta)) / b
        else:
            c = torch.where(on, d ** (beta - 2), 0.0).sum(-1)
            h, h1, h2 = a - 1, -beta * b, beta * (beta - 1) * c
            s = -2 * h * h1 / (2 * h1 ** 2 - h * h2)
        tau = torch.where(done, tau, tau + s)
    return count


def randn_rows(rows: int, T: int, alpha: float, seed: int = 0) -> torch.Tensor:
    """x = (alpha - 1)(s - max s) of randn scores, (rows, T) float64."""
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(rows, 64, generator=g, dtype=torch.float64) @ torch.randn(T, 64, generator=g,
                                                                             dtype=torch.float64).T / 8
    return (alpha - 1) * (s - s.max(-1, keepdim=True).values)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alpha", default="1.25,1.33,1.5,1.8", help="comma-separated alphas (> 1)")
    ap.add_argument("--T", default="4096", help="comma-separated key counts")
    ap.add_argument("--bn", type=int, default=64, help="the forward's key tile (alpha-entmax: 64 past 512 keys)")
    ap.add_argument("--topk", type=int, default=4, help="entries kept a key position")
    ap.add_argument("--rows", type=int, default=512, help="query rows a case (a multiple of 64)")
    a = ap.parse_args(argv)
    print("| alpha | keys | step | passes a row | passes a block of 64 | most a block |\n|---|---|---|---|---|---|")
    for alpha in map(float, a.alpha.split(",")):
        beta = 1 / (alpha - 1)
        for T in map(int, a.T.split(",")):
            x = randn_rows(a.rows, T, alpha)
            tau = subset_threshold(x, beta, a.bn, a.topk)
            for step in STEPS if beta >= 2 else STEPS[:1]:
                n = passes(x, beta, tau, step)
                block = n.view(-1, BLOCK).max(-1).values.double()
                print(f"| {alpha} | {T} | {step} | {n.double().mean():.2f} | {block.mean():.2f} | "
                      f"{block.max():.0f} |", flush=True)


if __name__ == "__main__":
    main()
