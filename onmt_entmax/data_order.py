"""The order in which training examples are read: every pass over a corpus in a new random order.

OpenNMT-py 3.5.1 and Eole read a training corpus in file order on every pass. Their iterator sorts a
bucket of examples by length, cuts it into batches and shuffles only the batches' order, so a batch
holds much the same examples on every pass (on the medium SIGMORPHON 2018 file, a median 57 of 64:
``scripts/reproduce/batch_overlap.py``). torchtext's iterator, which OpenNMT-py up to 0.9 used (the
toolkit of Peters et al. 2019), permuted the whole data set every epoch and sorted pools of 100
batches. ``ReshuffledPasses`` gives the toolkits' iterators that order back: pass k over a corpus
yields its examples permuted by ``random.Random(f"{seed}/{k}")``, so the same seed reads the same
orders again. A pass is held in memory while it is yielded (meant for corpora that fit there).
"""
from __future__ import annotations

import random
from typing import Generic, Iterable, Iterator, TypeVar

T = TypeVar("T")


def permuted(examples: list[T], seed: str) -> list[T]:
    """``examples`` in the order of the permutation that ``random.Random(seed)`` draws (Fisher-Yates);
    a string seed is hashed with SHA-512, so the order is the same in every process and Python run."""
    out = list(examples)
    random.Random(seed).shuffle(out)
    return out


class ReshuffledPasses(Generic[T]):
    """An iterable whose k-th iteration (k = 0, 1, ...) reads one pass of ``corpus`` and yields it as
    ``permuted(pass, f"{seed}/{k}")``. The pass is read at the first ``next()``, not at ``iter()``."""

    def __init__(self, corpus: Iterable[T], seed: str) -> None:
        self.corpus, self.seed, self.passes = corpus, seed, 0

    def __iter__(self) -> Iterator[T]:
        k, self.passes = self.passes, self.passes + 1
        return self._pass(k)

    def _pass(self, k: int) -> Iterator[T]:
        yield from permuted(list(self.corpus), f"{self.seed}/{k}")
