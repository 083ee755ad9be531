"""``shuffle_each_pass``: read the training corpora in a new random order on every pass.

OpenNMT-py 3.5.1's ``DynamicDatasetIter`` reads each training corpus in file order on every pass
(``onmt_entmax.training.data_order`` says what that does to the batches). With the option, the weighted mixer
that feeds the buckets reads each corpus through ``ReshuffledPasses``: pass k of a corpus is permuted
with the seed ``"<seed>/<train_from checkpoint>/<offset>/<worker>/<corpus>/k"``. The same command
therefore reads the same orders, a run resumed with ``-train_from`` reads new ones (not the first
pass's again), and each data-loader worker permutes its own share of the lines. Validation and
inference data keep their order.
"""
from __future__ import annotations

from onmt_entmax.training.data_order import mark_for_reshuffling


def wrap_from_opt(upstream):
    """``DynamicDatasetIter.from_opt``: a training iterator built with ``shuffle_each_pass`` carries the
    run's seed (the iterator is pickled into spawned data-loader workers with it)."""

    def from_opt(cls, corpora, transforms, vocabs, opt, task, copy, device, stride=1, offset=0):
        it = upstream(cls, corpora, transforms, vocabs, opt, task, copy, device, stride=stride, offset=offset)
        if getattr(opt, "shuffle_each_pass", False):
            mark_for_reshuffling(it, task, getattr(opt, "seed", -1), getattr(opt, "train_from", None))
        return it

    return from_opt
