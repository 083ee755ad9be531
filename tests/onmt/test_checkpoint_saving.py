"""OpenNMT-py's checkpoint saves (``ModelSaver._save``, ``onmt_average_models -output``) are written whole
or not at all: a save that fails half-way leaves no file under the checkpoint's name."""
import errno

import pytest
import torch

pytest.importorskip("onmt")

import onmt_entmax.onmt  # noqa: E402,F401  (the patches applied)
from onmt_entmax.errors import CheckpointSaveError  # noqa: E402


class FullDisk:
    """Pickling this raises what a write to a full disk raises, after the file was opened."""

    def __reduce__(self):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("module", ["onmt.models.model_saver", "onmt.bin.average_models"])
def test_a_checkpoint_save_that_fails_leaves_nothing_under_its_name(tmp_path, module):
    import importlib

    saving_torch = importlib.import_module(module).torch
    path = tmp_path / "m_step_20.pt"
    with pytest.raises(CheckpointSaveError, match="no space left on"):
        saving_torch.save({"model": {"w": torch.zeros(2)}, "bad": FullDisk()}, str(path))
    assert list(tmp_path.iterdir()) == []
    saving_torch.save({"model": {"w": torch.ones(2)}}, str(path))
    assert torch.load(path, weights_only=True)["model"]["w"].tolist() == [1.0, 1.0]
