"""Validation batches read once: the validation iterator replays the batches of its first pass instead of
reading, transforming and batching the validation corpus again at every validation (``ReplayedPasses``,
as in OpenNMT-py)."""
from __future__ import annotations

from typing import Callable

from onmt_entmax.training.data_order import replay_validation


def wrap_build_dynamic_dataset_iter(upstream: Callable) -> Callable:
    """``eole.inputters.dynamic_iterator.build_dynamic_dataset_iter``: the validation iterator replays its
    first pass."""
    from eole.constants import CorpusTask

    return replay_validation(upstream, CorpusTask.VALID)
