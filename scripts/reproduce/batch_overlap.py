"""How much of a training batch comes back from one bucket to the next under OpenNMT-py 3.5.1's data
iterator, which reads the corpus in file order on every pass (no reshuffling between epochs).

A replay of ``DynamicDatasetIter`` (``onmt/inputters/dynamic_iterator.py``): buckets of ``bucket_size``
consecutive examples of the endlessly cycled corpus, each sorted (stably) by (source tokens, target
tokens + 2 for BOS/EOS), cut into batches of ``batch_size`` sentences that skip a source already in
the batch; only the order of the batches is shuffled, so their composition is what is compared.
``--shuffle-each-pass`` replays the plugin's option of that name: pass k of the corpus is read in the
order ``onmt_entmax.training.data_order.permuted`` draws for it.

    python3 scripts/reproduce/batch_overlap.py work/data/sigmorphon2018-medium/src-train.txt \\
        work/data/sigmorphon2018-medium/tgt-train.txt [--shuffle-each-pass] [--bucket-size 6400]
"""
from __future__ import annotations

import argparse
import itertools
import statistics
from collections import Counter

from onmt_entmax.training.data_order import permuted


def read_order(n: int, seed: str | None = None):
    """The line numbers in the order the iterator reads them, pass after pass, endlessly: file order,
    or (``seed``) pass k permuted as ``shuffle_each_pass`` does with the seed ``f"{seed}/{k}"``."""
    for k in itertools.count():
        yield from (range(n) if seed is None else permuted(list(range(n)), f"{seed}/{k}"))


def buckets(src: list[str], tgt: list[str], count: int, bucket_size: int = 262144,
            batch_size: int = 64, seed: str | None = None) -> list[list[frozenset[int]]]:
    """The batches (sets of line numbers) of the first ``count`` buckets (``seed``: ``read_order``)."""
    out, order = [], read_order(len(src), seed)

    def key(i: int) -> tuple[int, int]:
        return len(src[i].split()), len(tgt[i].split()) + 2

    for _ in range(count):
        lines = sorted(itertools.islice(order, bucket_size), key=key)
        batches, batch, seen = [], [], set()
        for i in lines:
            if src[i] in seen:
                continue
            seen.add(src[i])
            batch.append(i)
            if len(batch) == batch_size:
                batches.append(frozenset(batch))
                batch, seen = [], set()
        out.append(batches)
    return out


def largest_overlaps(first: list[frozenset[int]], later: list[frozenset[int]]) -> list[float]:
    """For each batch of ``later``: the largest share of its lines that one batch of ``first`` holds."""
    where: dict[int, list[int]] = {}
    for k, batch in enumerate(first):
        for i in batch:
            where.setdefault(i, []).append(k)
    shares = []
    for batch in later:
        counts = Counter(k for i in batch for k in where.get(i, ()))
        shares.append(max(counts.values(), default=0) / len(batch))
    return shares


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("tgt")
    ap.add_argument("--bucket-size", type=int, default=262144, help="OpenNMT-py 3.5.1's default")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--shuffle-each-pass", action="store_true", help="replay the plugin's option of that name")
    a = ap.parse_args()
    src = open(a.src, encoding="utf-8").read().splitlines()
    tgt = open(a.tgt, encoding="utf-8").read().splitlines()
    w = -(-len(src) // a.bucket_size)  # buckets per pass (one for a bucket larger than the corpus)
    got = buckets(src, tgt, 2 * w, a.bucket_size, a.batch_size, "replay" if a.shuffle_each_pass else None)
    first, second = sum(got[:w], []), sum(got[w:], [])
    shares, earlier = largest_overlaps(first, second), set(first)
    span = "bucket" if w == 1 else f"{w} buckets"
    print(f"{len(src)} lines, buckets of {a.bucket_size}: {len(first)} / {len(second)} batches; a batch of "
          f"the second {span} shares with one batch of the first a median {statistics.median(shares):.1%} "
          f"(mean {statistics.mean(shares):.1%}) of its lines; identical batches: "
          f"{sum(b in earlier for b in second)}")


if __name__ == "__main__":
    main()
