"""The Eole tests' fixtures; their helpers (and the adapter's activation) are in eole_testkit.py."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("eole")

from eole_testkit import sample_vocabs, small_config  # noqa: E402


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("eole")


@pytest.fixture
def train_config(tmp_path):
    """``make(**training)``: the RNN example on the bundled sample (a vocabulary of every training token)
    as Eole's ``TrainConfig``, with ``training`` options added."""
    from eole.config.run import TrainConfig

    sample_vocabs(tmp_path)

    def make(**training):
        path = small_config("rnn-entmax15", tmp_path, steps=2, num_workers=0, **training)
        return TrainConfig(**yaml.safe_load(path.read_text()))

    return make
