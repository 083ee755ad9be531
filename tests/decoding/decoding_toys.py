"""Hand-built next-token distributions whose sequence supports are known exactly."""
from __future__ import annotations

import math
from typing import Sequence

import torch
from entmax import sparsemax  # reference implementation (test dependency)

NEG_INF = float("-inf")


class TrieModel:
    """p(v | prefix) read from a table {prefix: {token: prob}}; unlisted tokens have p = 0."""

    def __init__(self, table: dict, vocab_size: int):
        self.table = table
        self.vocab_size = vocab_size
        self.calls = 0

    def __call__(self, prefixes: Sequence[tuple]) -> torch.Tensor:
        out = torch.full((len(prefixes), self.vocab_size), NEG_INF)
        for i, p in enumerate(prefixes):
            self.calls += 1
            for v, prob in self.table.get(tuple(p), {}).items():
                out[i, v] = math.log(prob)
        return out


# Figure 1 of Peters et al. (2019): "draw" -> drawn / drawed / drew, and nothing else.
CHARS = ["</s>", "d", "r", "a", "w", "n", "e"]
EOS = 0
C = {c: i for i, c in enumerate(CHARS)}


def draw_model() -> TrieModel:
    d, r, a, w, n, e = (C[x] for x in "drawne")
    table = {
        (): {d: 1.0},
        (d,): {r: 1.0},
        (d, r): {a: 0.85, e: 0.15},
        (d, r, a): {w: 1.0},
        (d, r, a, w): {n: 0.75, e: 0.25},
        (d, r, a, w, n): {EOS: 1.0},
        (d, r, a, w, e): {d: 1.0},
        (d, r, a, w, e, d): {EOS: 1.0},
        (d, r, e): {w: 1.0},
        (d, r, e, w): {EOS: 1.0},
    }
    return TrieModel(table, len(CHARS))


DRAW_SUPPORT = {"drawn": 0.85 * 0.75, "drawed": 0.85 * 0.25, "drew": 0.15}


def spell(tokens: Sequence[int]) -> str:
    return "".join(CHARS[t] for t in tokens)


class RandomSparseModel:
    """Sparsemax over seeded random logits per prefix; EOS is forced by length ``stop``.

    The logits of prefix p are a deterministic function of (seed, p), so the model is a fixed
    distribution over sequences; EOS gets a bonus growing with the length and is certain at
    length ``stop``, so the support is finite.
    """

    def __init__(self, vocab_size: int = 6, seed: int = 0, scale: float = 1.0, stop: int = 5, eos: int = 0):
        self.vocab_size, self.seed, self.scale, self.stop, self.eos = vocab_size, seed, scale, stop, eos
        self.calls = 0

    def logits(self, prefix: tuple) -> torch.Tensor:
        g = torch.Generator().manual_seed(hash((self.seed,) + tuple(prefix)) % (2**31))
        z = torch.randn(self.vocab_size, generator=g) * self.scale
        z[self.eos] += 0.4 * len(prefix)
        if len(prefix) >= self.stop:
            z[self.eos] = 1e4
        return z

    def __call__(self, prefixes: Sequence[tuple]) -> torch.Tensor:
        self.calls += len(prefixes)
        if not prefixes:
            return torch.empty(0, self.vocab_size)
        z = torch.stack([self.logits(tuple(p)) for p in prefixes])
        return torch.log(sparsemax(z, dim=-1))


def brute_force(model, eos: int, max_length: int, vocab_size: int) -> dict:
    """Every sequence of length <= max_length (EOS included) by full expansion: {tokens: log p}."""
    out = {}
    frontier = [((), 0.0)]
    for _ in range(max_length):
        nxt = []
        for prefix, s in frontier:
            row = model([prefix])[0]
            for v in range(vocab_size):
                t = s + float(row[v])
                if t == NEG_INF:
                    continue
                if v == eos:
                    out[prefix] = t
                else:
                    nxt.append((prefix + (v,), t))
        frontier = nxt
    return out
