"""The OpenNMT-py tests' fixtures; their helpers (and the plugin's activation) are in onmt_testkit.py."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onmt")

from onmt_testkit import reversal_corpus  # noqa: E402


@pytest.fixture
def toy(tmp_path) -> Path:
    return reversal_corpus(tmp_path / "toy", n_train=200, n_test=20)
