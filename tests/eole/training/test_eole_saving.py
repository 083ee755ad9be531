"""Eole's checkpoints are written whole or not at all: a save that fails half-way (a full disk) leaves the
model folder's links on the last complete step folder and no step folder of its own, in one line."""
import os

import pytest
import torch
from eole.models.model_saver import TrainingModelSaver
from eole.utils.optimizers import Optimizer

from eole_testkit import RNN, build

from onmt_entmax.errors import CheckpointSaveError

FILES = ("config.json", "model.00.safetensors", "optimizer.pt", "vocab.json")


def _saver(tmp_path, train_config):
    net, _, vocabs = build(RNN)
    config = train_config()
    optim = Optimizer.from_config(net, config)
    return TrainingModelSaver(str(tmp_path / "model"), net, config, vocabs, optim), net


def _targets(model_dir):
    return {name: os.readlink(model_dir / name) for name in FILES}


def test_a_save_publishes_its_step_folder_and_links_whole(tmp_path, train_config):
    saver, _ = _saver(tmp_path, train_config)
    saver.save(2)
    model_dir = tmp_path / "model"
    assert sorted(os.listdir(model_dir)) == sorted([*FILES, "step_2"])
    assert _targets(model_dir) == {name: f"step_2/{name}" for name in FILES}
    assert all((model_dir / name).is_file() for name in FILES)


def test_a_full_disk_half_way_keeps_the_last_complete_checkpoint(tmp_path, train_config, monkeypatch):
    import eole.models.model_saver as model_saver

    saver, net = _saver(tmp_path, train_config)
    saver.save(2)
    model_dir = tmp_path / "model"
    before = {name: (model_dir / name).read_bytes() for name in FILES}

    def full_disk(state, path, *args, **kwargs):
        with open(path, "wb") as f:
            f.write(b"half a checkpoint")
        raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(model_saver, "save_file", full_disk)
    with torch.no_grad():
        next(net.parameters()).add_(1.0)
    with pytest.raises(CheckpointSaveError, match=r"^no space left on \S+model: the checkpoint \S+step_4 was not"):
        saver.save(4)
    assert sorted(os.listdir(model_dir)) == sorted([*FILES, "step_2"])
    assert _targets(model_dir) == {name: f"step_2/{name}" for name in FILES}
    assert {name: (model_dir / name).read_bytes() for name in FILES} == before
