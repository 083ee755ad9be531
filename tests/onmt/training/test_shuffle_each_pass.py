"""shuffle_each_pass: OpenNMT-py 3.5.1's real training iterator reads each pass in a new random order."""
import itertools

import pytest

from onmt_testkit import build_vocab, train, yaml_config

from onmt_entmax.analysis.checkpoint import load_checkpoint

MODEL = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8)
N_TRAIN = 200


def _iterator(config, *args, num_workers=0):
    """The training iterator onmt_train builds (``train_single.main``), from the config and ``args``."""
    from onmt.bin.train import _get_parser
    from onmt.constants import CorpusTask
    from onmt.inputters.dynamic_iterator import build_dynamic_dataset_iter
    from onmt.train_single import _init_train
    from onmt.utils.parse import ArgumentParser

    opt, _ = _get_parser().parse_known_args(["-config", str(config), "-num_workers", str(num_workers), *args])
    ArgumentParser.validate_train_opts(opt)
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    _, vocabs, transforms_cls = _init_train(opt)
    return build_dynamic_dataset_iter(opt, transforms_cls, vocabs, task=CorpusTask.TRAIN)


def _passes(it, n=2):
    """The file line numbers the mixer hands to the buckets, pass by pass."""
    read = [ex["cid_line_number"] for ex, _, _ in itertools.islice(it.mixer, n * N_TRAIN)]
    return [read[k * N_TRAIN:(k + 1) * N_TRAIN] for k in range(n)]


def _batches(it, count):
    return [frozenset(batch["cid_line_number"]) for batch, _ in itertools.islice(it, count)]


@pytest.fixture
def config(toy):
    path = yaml_config(toy, MODEL, steps=2, extra=f"bucket_size: {N_TRAIN}\nbatch_size: 10\n")
    build_vocab(path)
    return path


def test_every_pass_reads_each_line_once_in_a_new_order(config):
    stock = _passes(_iterator(config))
    assert stock == [list(range(N_TRAIN))] * 2  # upstream: file order, every pass
    first, second = _passes(_iterator(config, "-shuffle_each_pass"))
    assert sorted(first) == sorted(second) == list(range(N_TRAIN))
    assert first != second and list(range(N_TRAIN)) not in (first, second)


def test_the_orders_follow_the_seed_and_a_resumed_run_reads_new_ones(config):
    run = _passes(_iterator(config, "-shuffle_each_pass"))
    assert _passes(_iterator(config, "-shuffle_each_pass")) == run
    assert _passes(_iterator(config, "-shuffle_each_pass", "-seed", "2")) != run
    train(config)
    checkpoint = str(config.parent / "run/model_step_2.pt")
    resumed = _passes(_iterator(config, "-shuffle_each_pass", "-train_from", checkpoint))
    assert resumed[0] != run[0]


def test_the_batches_of_a_pass_are_not_the_last_passs(config):
    """What the option is for: a bucket as large as the corpus (one pass) is sorted by length and cut
    into batches; upstream then yields the same batches every pass, only in another order."""
    n = N_TRAIN // 10
    stock = _batches(_iterator(config), 2 * n)
    assert set(stock[:n]) == set(stock[n:])
    shuffled = _batches(_iterator(config, "-shuffle_each_pass"), 2 * n)
    assert len(set(shuffled[:n]) & set(shuffled[n:])) < n // 2


def test_a_data_loader_worker_shuffles_its_share_too(config):
    """num_workers > 0: the iterator is pickled into a spawned process, where the plugin is active again."""
    stock = _batches(_iterator(config, num_workers=1), N_TRAIN // 10)
    shuffled = _batches(_iterator(config, "-shuffle_each_pass", num_workers=1), N_TRAIN // 10)
    assert set().union(*shuffled) == set().union(*stock) == set(range(N_TRAIN))
    assert set(shuffled) != set(stock)


def test_onmt_train_takes_it_from_the_yaml(toy):
    path = yaml_config(toy, MODEL, steps=2, name="shuffled", extra="shuffle_each_pass: true\n")
    build_vocab(path)
    train(path)
    assert load_checkpoint(toy / "run/shuffled_step_2.pt")["opt"].shuffle_each_pass is True
