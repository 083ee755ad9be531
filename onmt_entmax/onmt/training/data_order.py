"""``shuffle_each_pass``: read the training corpora in a new random order on every pass.

OpenNMT-py 3.5.1's ``DynamicDatasetIter`` reads each training corpus in file order on every pass
(``onmt_entmax.data_order`` says what that does to the batches). With the option, the weighted mixer
that feeds the buckets gets each corpus through ``ReshuffledPasses``: pass k of a corpus is permuted
with the seed ``"<seed>/<train_from checkpoint>/<corpus>/<offset>/<worker>/k"``. The same command
therefore reads the same orders, a run resumed with ``-train_from`` reads new ones (not the first
pass's again), and each data-loader worker permutes its own share of the lines. Validation and
inference data keep their order.
"""
from __future__ import annotations

import logging
import os
import random

from onmt_entmax.data_order import ReshuffledPasses

HELP = ("Read each training corpus in a new random order on every pass (epoch), as the torchtext "
        "iterator of OpenNMT-py <= 0.9 did; upstream reads the files in the same order every pass, so a "
        "length-sorted bucket yields much the same batches each time. Seeded by -seed (and the "
        "-train_from checkpoint); a pass is held in memory while it is read.")


def add_options(group) -> None:
    group.add("--shuffle_each_pass", "-shuffle_each_pass", action="store_true", help=HELP)


def _logger() -> logging.Logger:
    return logging.getLogger("onmt")


def run_seed(opt) -> str:
    """What the passes' permutations are seeded with: -seed and the checkpoint a run resumes from (a
    seed below 1 leaves upstream unseeded, so the orders are drawn afresh too)."""
    seed = getattr(opt, "seed", -1)
    if seed is None or seed <= 0:
        seed = f"unseeded-{random.SystemRandom().getrandbits(64)}"
    train_from = getattr(opt, "train_from", "") or ""
    return f"{seed}/{os.path.basename(train_from)}"


def wrap_from_opt(upstream):
    """``DynamicDatasetIter.from_opt``: a training iterator built with ``shuffle_each_pass`` carries the
    run's seed (the iterator is pickled into spawned data-loader workers with it)."""

    def from_opt(cls, corpora, transforms, vocabs, opt, task, copy, device, stride=1, offset=0):
        it = upstream(cls, corpora, transforms, vocabs, opt, task, copy, device, stride=stride, offset=offset)
        if getattr(opt, "shuffle_each_pass", False) and task == "train":
            it._entmax_pass_seed = run_seed(opt)
        return it

    return from_opt


def wrap_init_datasets(upstream):
    """``DynamicDatasetIter._init_datasets``: after upstream has built the mixer, its corpora are read
    through ``ReshuffledPasses`` (the mixer's first iterators are replaced before anything was read)."""

    def _init_datasets(self, worker_id):
        upstream(self, worker_id)
        seed = getattr(self, "_entmax_pass_seed", None)
        mixer = getattr(self, "mixer", None)
        if seed is None or not hasattr(mixer, "_iterators"):
            return
        for name, corpus in list(mixer.iterables.items()):
            if isinstance(corpus, ReshuffledPasses):
                continue
            mixer.iterables[name] = ReshuffledPasses(corpus, f"{seed}/{name}/{self.offset}/{worker_id}")
            mixer._iterators[name] = iter(mixer.iterables[name])
        _logger().info("shuffle_each_pass: %s read in a new random order on every pass",
                       ", ".join(mixer.iterables))

    return _init_datasets
