"""Checkpoints are written whole or not at all: a save that fails half-way leaves no file under the
checkpoint's name and the checkpoint saved before it untouched."""
import errno

import pytest
import torch

from onmt_entmax.errors import CheckpointSaveError
from onmt_entmax.training.saving import atomic_save


def _full_disk_after(n_bytes: int):
    """A writer that puts ``n_bytes`` of the file on the disk, then finds it full (as ``torch.save`` would)."""

    def save(obj, f):
        f.write(b"x" * n_bytes)
        raise OSError(errno.ENOSPC, "No space left on device")

    return save


def test_a_save_is_the_whole_checkpoint_and_replaces_an_older_one(tmp_path):
    path = tmp_path / "m_step_20.pt"
    atomic_save({"step": 10}, path)
    atomic_save({"step": 20, "w": torch.arange(3)}, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["step"] == 20 and loaded["w"].tolist() == [0, 1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["m_step_20.pt"]


def test_a_full_disk_leaves_no_truncated_checkpoint_and_keeps_the_one_before(tmp_path):
    before = tmp_path / "m_step_10.pt"
    atomic_save({"step": 10}, before)
    saved = before.read_bytes()
    with pytest.raises(CheckpointSaveError, match=f"^no space left on {tmp_path}: the checkpoint \\S*m_step_20.pt"):
        atomic_save({"step": 20}, tmp_path / "m_step_20.pt", _full_disk_after(100))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m_step_10.pt"] and before.read_bytes() == saved
    # the same over an existing file: it keeps its bytes
    with pytest.raises(CheckpointSaveError):
        atomic_save({"step": 11}, before, _full_disk_after(10))
    assert before.read_bytes() == saved and torch.load(before, weights_only=True) == {"step": 10}


def test_other_failures_keep_their_own_error_and_leave_nothing(tmp_path):
    def broken(obj, f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_save({}, tmp_path / "m.pt", broken)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        atomic_save({}, tmp_path / "missing" / "m.pt")
