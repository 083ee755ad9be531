"""training.shuffle_each_pass in Eole: its real training iterator reads each pass in a new random order."""
import itertools

import pytest
from eole.constants import CorpusTask
from eole.inputters.dynamic_iterator import build_dynamic_dataset_iter
from eole.train_single import TrainingInitializer

from eole_testkit import DATA

N_TRAIN = len((DATA / "src-train.txt").read_text().splitlines())


@pytest.fixture
def config(train_config):
    """The RNN example on the bundled sample (conftest's ``train_config``)."""
    return train_config


def _passes(config, n=2):
    """The file line numbers the training iterator's mixer hands to the buckets, pass by pass."""
    context = TrainingInitializer(config).initialize()
    it = build_dynamic_dataset_iter(context.config, context.transforms, context.vocabs, task=CorpusTask.TRAIN)
    read = [ex["cid_line_number"] for ex, _, _ in itertools.islice(it.mixer, n * N_TRAIN)]
    return [read[k * N_TRAIN:(k + 1) * N_TRAIN] for k in range(n)]


def test_every_pass_reads_each_line_once_in_a_new_order_that_the_seed_fixes(config):
    assert _passes(config()) == [list(range(N_TRAIN))] * 2  # Eole: file order, every pass
    first, second = _passes(config(shuffle_each_pass=True))
    assert sorted(first) == sorted(second) == list(range(N_TRAIN))
    assert first != second and list(range(N_TRAIN)) not in (first, second)
    assert _passes(config(shuffle_each_pass=True)) == [first, second]
    other = config(shuffle_each_pass=True)
    other.seed = 7
    assert _passes(other)[0] != first


def test_the_option_is_a_checked_training_field(config):
    assert config(shuffle_each_pass=True).training.shuffle_each_pass is True
    with pytest.raises(Exception, match="shuffle_each_pas"):
        config(shuffle_each_pas=True)
