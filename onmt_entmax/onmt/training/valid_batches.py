"""Validation batches read once: OpenNMT-py 3.5.1 reads, transforms and batches its validation corpus
again at every validation (through data-loader workers it starts each time); the plugin keeps the
batches of the first validation and replays them (``onmt_entmax.training.data_order.ReplayedPasses``: the same
batches, up to 1 GiB of tensors)."""
from __future__ import annotations

from onmt_entmax.training.data_order import replay_validation


def wrap_build_dynamic_dataset_iter(upstream):
    """``onmt.inputters.dynamic_iterator.build_dynamic_dataset_iter``: the validation iterator replays
    its first pass."""
    from onmt.constants import CorpusTask

    return replay_validation(upstream, CorpusTask.VALID)
