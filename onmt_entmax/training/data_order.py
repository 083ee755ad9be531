"""The order in which training examples are read: every pass over a corpus in a new random order.

OpenNMT-py 3.5.1 and Eole read a training corpus in file order on every pass. Their iterator sorts a
bucket of examples by length, cuts it into batches and shuffles only the batches' order, so a batch
holds much the same examples on every pass (``scripts/reproduce/batch_overlap.py`` counts them;
docs/reproduce.md). torchtext's iterator, which OpenNMT-py up to 0.9 used (the
toolkit of Peters et al. 2019), permuted the whole data set every epoch and sorted pools of 100
batches. ``ReshuffledPasses`` gives the toolkits' iterators that order back: pass k over a corpus
yields its examples permuted by ``random.Random(f"{seed}/{k}")``, so the same seed reads the same
orders again. A pass is held in memory while it is yielded (meant for corpora that fit there).

Validation data go the other way: their batches are the same at every validation, so
``ReplayedPasses`` keeps the first pass and yields it again (``replay_validation`` wraps a toolkit's
iterator builder with it).
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import random
from typing import Callable, Generic, Iterable, Iterator, TypeVar

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


def run_seed(seed: int | None, train_from: str | None = None) -> str:
    """The seed of a run's passes: the toolkit's ``seed`` and the name of the checkpoint it resumes from
    (a resumed run reads new orders, not its first passes again). A seed below 1 leaves the toolkits
    unseeded, and the orders are drawn afresh too."""
    if seed is None or seed <= 0:
        seed = f"unseeded-{random.SystemRandom().getrandbits(64)}"
    return f"{seed}/{os.path.basename(train_from or '')}"


_SEED_ATTR = "_entmax_pass_seed"  # on a toolkit's training iterator: pickled with it into the data-loader workers


def mark_for_reshuffling(iterator, task: str, seed: int | None, train_from: str | None) -> None:
    """Give a toolkit's data iterator the seed of its run's passes (``run_seed``) when it reads training
    data (``task == "train"``); ``wrap_init_datasets`` then reshuffles it. Validation keeps its order."""
    if task == "train":
        setattr(iterator, _SEED_ATTR, run_seed(seed, train_from))


def reshuffle_mixer(mixer, seed: str) -> list[str]:
    """Read every corpus of an OpenNMT-py / Eole ``WeightedMixer`` (``iterables`` and ``_iterators`` by
    corpus name) through ``ReshuffledPasses`` seeded ``f"{seed}/{name}"``. The mixer's current
    iterators are replaced, so call it before the mixer is read. Returns the corpus names."""
    for name, corpus in list(mixer.iterables.items()):
        if not isinstance(corpus, ReshuffledPasses):
            mixer.iterables[name] = ReshuffledPasses(corpus, f"{seed}/{name}")
            mixer._iterators[name] = iter(mixer.iterables[name])
    return list(mixer.iterables)


def wrap_init_datasets(upstream: Callable, logger: str) -> Callable:
    """``DynamicDatasetIter._init_datasets`` of OpenNMT-py 3.5.1 or Eole: once upstream has built the
    mixer (nothing read yet), an iterator marked by ``mark_for_reshuffling`` (the adapters do it from
    the run's options) reads its training corpora through ``ReshuffledPasses``, seeded per data-loader
    worker (each reads its own share of the lines)."""

    def _init_datasets(self, worker_id):
        upstream(self, worker_id)
        seed = getattr(self, _SEED_ATTR, None)
        if seed is not None and hasattr(self.mixer, "_iterators"):  # training: the weighted mixer
            names = reshuffle_mixer(self.mixer, f"{seed}/{self.offset}/{worker_id}")
            # one line per data-loader worker: each permutes its own share of the lines
            logging.getLogger(logger).info(
                "shuffle_each_pass: data-loader worker %d reads %s in a new random order on every pass",
                worker_id, ", ".join(names))

    return _init_datasets


# Validation batches kept in memory at most (bytes of their tensors): a larger validation set is read
# from its files at every validation, as the toolkits do.
REPLAY_LIMIT = 1 << 30


def tensor_bytes(item) -> int:
    """Bytes held by the tensors in ``item`` (nested tuples, lists and dicts; other values count 0)."""
    if isinstance(item, dict):
        return sum(tensor_bytes(v) for v in item.values())
    if isinstance(item, (list, tuple)):
        return sum(tensor_bytes(v) for v in item)
    storage = getattr(item, "untyped_storage", None)  # (a tensor, without importing torch here)
    return storage().nbytes() if callable(storage) else 0


class ReplayedPasses(Generic[T]):
    """An iterable over ``source`` that keeps the items of its first complete pass and yields those
    again on every later pass, instead of reading ``source`` again.

    For validation data, which the toolkits read, transform and batch again at every validation (most of
    a validation's time on a small model: docs/integration.md): their validation batches are the same
    on every pass (file order, no sampling;
    the toolkits' random transforms apply to training data only). A pass left unfinished is not kept;
    a first pass whose tensors outgrow ``limit`` bytes is not kept either, and the source is read at
    every pass as before.
    """

    def __init__(self, source: Iterable[T], limit: int = REPLAY_LIMIT) -> None:
        self.source = source
        self.limit = limit
        self.kept: list[T] | None = None
        self.too_large = False

    def __iter__(self) -> Iterator[T]:
        if self.kept is not None:
            yield from self.kept
            return
        items: list[T] | None = None if self.too_large else []
        size = 0
        for item in self.source:
            if items is not None:
                size += tensor_bytes(item)
                if size > self.limit:
                    items, self.too_large = None, True
                else:
                    items.append(item)
            yield item
        if items is not None:
            self.kept = items

    def __getattr__(self, name: str):  # the wrapped iterator's attributes (e.g. batch_size)
        if name in ("source", "limit", "kept", "too_large"):
            raise AttributeError(name)
        return getattr(self.source, name)


def replay_validation(build_iter: Callable, valid_task) -> Callable:
    """Wrapper of a toolkit's ``build_dynamic_dataset_iter(..., task=...)``: the iterator it builds for
    ``valid_task`` replays its first pass (``ReplayedPasses``); other tasks' are returned as built.
    Shared by both adapters (their functions take ``task`` under that name)."""
    signature = inspect.signature(build_iter)

    @functools.wraps(build_iter)
    def build_dynamic_dataset_iter(*args, **kwargs):
        it = build_iter(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return ReplayedPasses(it) if it is not None and bound.arguments["task"] == valid_task else it

    return build_dynamic_dataset_iter
