"""valid_batches_once in Eole: the validation iterator reads its corpus once and replays the batches."""
import pytest
import torch
import yaml
from eole.config.run import TrainConfig
from eole.constants import CorpusTask
from eole.inputters.dynamic_iterator import build_dynamic_dataset_iter
from eole.inputters.text_corpus import ParallelCorpus
from eole.train_single import TrainingInitializer

from eole_testkit import sample_vocabs, small_config


@pytest.fixture
def context(tmp_path):
    """The RNN example on the bundled sample, with a vocabulary of every training token."""
    sample_vocabs(tmp_path)
    path = small_config("rnn-entmax15", tmp_path, steps=2, num_workers=0)
    return TrainingInitializer(TrainConfig(**yaml.safe_load(path.read_text()))).initialize()


def test_the_validation_batches_are_read_once_and_replayed_the_training_ones_are_not(context, monkeypatch):
    loads = []
    load = ParallelCorpus.load

    def counted(self, offset=0, stride=1):
        loads.append(self.id)
        return load(self, offset, stride)

    monkeypatch.setattr(ParallelCorpus, "load", counted)
    valid = build_dynamic_dataset_iter(context.config, context.transforms, context.vocabs, task=CorpusTask.VALID)
    first, second = list(valid), list(valid)
    assert loads.count("valid") == 1 and len(first) == len(second) > 0
    assert all(torch.equal(a[0]["src"], b[0]["src"]) and torch.equal(a[0]["tgt"], b[0]["tgt"])
               for a, b in zip(first, second))
    train = build_dynamic_dataset_iter(context.config, context.transforms, context.vocabs, task=CorpusTask.TRAIN)
    assert type(train).__name__ != "ReplayedPasses"
