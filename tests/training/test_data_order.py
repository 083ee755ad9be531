"""onmt_entmax.training.data_order: every pass over a corpus in a new, reproducible random order."""
import itertools

import torch

from onmt_entmax.training.data_order import (
    ReplayedPasses,
    ReshuffledPasses,
    mark_for_reshuffling,
    permuted,
    reshuffle_mixer,
    run_seed,
    tensor_bytes,
    wrap_init_datasets,
)


class Corpus:
    """A re-readable corpus that counts how often it was read."""

    def __init__(self, n):
        self.n, self.reads = n, 0

    def __iter__(self):
        self.reads += 1
        return iter(range(self.n))


def test_each_pass_holds_every_example_once_in_a_new_order():
    passes = ReshuffledPasses(Corpus(500), seed="1")
    orders = [list(passes) for _ in range(3)]
    assert all(sorted(order) == list(range(500)) for order in orders)
    assert orders[0] != list(range(500))
    assert len({tuple(order) for order in orders}) == 3


def test_the_same_seed_reads_the_same_orders_and_another_seed_others():
    first, again, other = (ReshuffledPasses(Corpus(200), seed=s) for s in ("7/run", "7/run", "8/run"))
    a, b, c = ([list(p) for _ in range(2)] for p in (first, again, other))
    assert a == b
    assert a[0] != c[0] and a[1] != c[1]
    assert permuted(list(range(200)), "7/run/0") == a[0]  # pass k is the permutation of "<seed>/k"


def test_a_pass_is_read_when_its_first_example_is_asked_for():
    """Upstream's mixer calls iter() on a corpus long before it reads it (at start-up, at the end of
    the previous pass): the corpus must not be read then."""
    corpus = Corpus(10)
    passes = ReshuffledPasses(corpus, seed="1")
    it = iter(passes)
    assert corpus.reads == 0
    assert len(list(itertools.islice(it, 3))) == 3 and corpus.reads == 1


def test_a_resumed_run_draws_other_orders_and_an_unseeded_one_fresh_ones():
    assert run_seed(3, "runs/x/model_step_1490.pt") == run_seed(3, "elsewhere/model_step_1490.pt")
    assert run_seed(3, "model_step_1490.pt") != run_seed(3, "model_step_2980.pt") != run_seed(3)
    assert run_seed(-1) != run_seed(-1)  # upstream's "no seed": nothing to repeat


class Mixer:
    """The two attributes of the toolkits' WeightedMixer that reshuffling replaces."""

    def __init__(self, corpus):
        self.iterables, self._iterators = {"corpus_1": corpus}, {"corpus_1": iter(corpus)}


class Iterator:
    """A toolkit's DynamicDatasetIter as far as the plugin sees it: _init_datasets builds the mixer."""

    offset = 0

    def _init_datasets(self, worker_id):
        self.mixer = Mixer(Corpus(10))


def test_only_a_marked_training_iterator_reads_its_passes_in_new_orders():
    init = wrap_init_datasets(Iterator._init_datasets, "test")
    train, valid, plain = Iterator(), Iterator(), Iterator()
    mark_for_reshuffling(train, "train", 1, None)
    mark_for_reshuffling(valid, "valid", 1, None)
    for it in (train, valid, plain):
        init(it, 0)
    first = list(itertools.islice(train.mixer._iterators["corpus_1"], 10))
    assert sorted(first) == list(range(10)) and first != list(range(10))
    assert first == permuted(list(range(10)), f"{run_seed(1)}/0/0/corpus_1/0")
    for it in (valid, plain):  # validation data and a run without the option keep file order
        assert list(it.mixer._iterators["corpus_1"]) == list(range(10))
    assert reshuffle_mixer(train.mixer, "again") == ["corpus_1"]  # already reshuffled: left as it is
    assert isinstance(train.mixer.iterables["corpus_1"], ReshuffledPasses)


class Batches(Corpus):
    """A corpus of (batch dict, bucket index) items, as the toolkits' validation iterators yield."""

    def __iter__(self):
        self.reads += 1
        return iter([({"src": torch.full((4, 3), i), "tgt": torch.arange(i)}, 0) for i in range(self.n)])


def test_validation_batches_are_read_once_and_the_same_batches_replayed():
    source = Batches(5)
    passes = ReplayedPasses(source)
    first, second, third = (list(passes) for _ in range(3))
    assert source.reads == 1
    assert len(first) == 5 and second == third
    assert all(torch.equal(a[0]["src"], b[0]["src"]) for a, b in zip(first, second))


def test_an_unfinished_pass_is_not_replayed():
    source = Batches(5)
    passes = ReplayedPasses(source)
    assert len(list(itertools.islice(passes, 2))) == 2  # a pass left after two batches
    assert len(list(passes)) == 5 and source.reads == 2  # read again, in full
    assert len(list(passes)) == 5 and source.reads == 2


def test_a_validation_set_over_the_memory_limit_is_read_at_every_pass():
    source = Batches(5)
    passes = ReplayedPasses(source, limit=100)  # bytes: the first batches already exceed it
    assert [len(list(passes)) for _ in range(3)] == [5, 5, 5]
    assert source.reads == 3 and passes.kept is None


def test_a_validation_set_of_exactly_the_limit_is_kept_and_one_byte_over_is_read_again():
    size = tensor_bytes(list(Batches(5)))  # the first pass's tensors
    kept, over = Batches(5), Batches(5)
    at_limit, over_limit = ReplayedPasses(kept, limit=size), ReplayedPasses(over, limit=size - 1)
    assert [len(list(at_limit)) for _ in range(3)] == [5, 5, 5] and kept.reads == 1
    assert [len(list(over_limit)) for _ in range(3)] == [5, 5, 5] and over.reads == 3
