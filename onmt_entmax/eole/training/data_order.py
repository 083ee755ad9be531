"""``training.shuffle_each_pass`` in Eole: every pass over a training corpus in a new random order
(``onmt_entmax.training.data_order``; Eole, like OpenNMT-py 3.5.1, reads the files in the same order every pass)."""
from __future__ import annotations

from typing import Callable

from onmt_entmax.training.data_order import mark_for_reshuffling


def wrap_dataset_from_config(upstream: Callable) -> Callable:
    """``DynamicDatasetIter.from_config``: a training iterator of a run with ``training.shuffle_each_pass``
    carries the run's seed (``seed`` and the ``train_from`` checkpoint; pickled with the iterator into
    data-loader workers), which ``data_order.wrap_init_datasets`` reads."""

    def from_config(cls, corpora, transforms, vocabs, config, task, device, stride=1, offset=0, model_type=None):
        it = upstream(cls, corpora, transforms, vocabs, config, task, device, stride=stride, offset=offset,
                      model_type=model_type)
        running = getattr(config, "training", None)
        if getattr(running, "shuffle_each_pass", False):
            mark_for_reshuffling(it, task, getattr(config, "seed", -1), getattr(running, "train_from", None))
        return it

    return from_config
