"""The Eole tests' fixtures; their helpers (and the adapter's activation) are in eole_testkit.py."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

pytest.importorskip("eole")

from eole_testkit import sample_vocabs, small_config  # noqa: E402

_SDPA = ("flash", "mem_efficient", "math", "cudnn")
_SDPA_AT_START = {name: getattr(torch.backends.cuda, f"{name}_sdp_enabled")() for name in _SDPA}


@pytest.fixture(autouse=True)
def sdpa_backends_as_at_start():
    """Eole's ``configure_cuda_backends`` (every ``eole train`` / ``predict`` run in this process) turns SDPA's
    math and flash backends off for the whole process: on the CPU no backend is left, and a later test on the
    same worker (OpenNMT-py's) would fail in ``scaled_dot_product_attention``. Put them back after each test."""
    yield
    for name, on in _SDPA_AT_START.items():
        getattr(torch.backends.cuda, f"enable_{name}_sdp")(on)


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
