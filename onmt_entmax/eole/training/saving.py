"""Eole's checkpoints written whole or not at all (``onmt_entmax.training.saving``).

``TrainingModelSaver._save`` writes ``<model_path>/step_N/`` file by file (optimizer, weights, vocab,
config) and points the links ``<model_path>/<file>`` at each as soon as it is written: a save that stops
half-way (a full disk, a kill) leaves links to a step folder without its weights. Here the whole save
runs in a staging folder beside it (upstream's code unchanged, its ``model_path`` pointed there), and the
step folder and its links are renamed into place only once every file is written; the saver's
``keep_checkpoint`` clean-up runs after that, on the real folder. The module's ``torch.save`` is the
atomic one, so a full disk is reported as such (torch's own error only says "unexpected pos").
"""
from __future__ import annotations

import importlib
import os
import shutil
import types
from typing import Callable

import torch

from onmt_entmax.training.saving import is_no_space, no_space, publish_folder, staging_folder, torch_save

SAVER_MODULE = "eole.models.model_saver"


class AtomicSaveTorch(types.ModuleType):
    """``torch`` as Eole's model saver sees it: ``save`` to a path is ``atomic_save``."""

    def __init__(self) -> None:
        super().__init__("torch", "torch, with an atomic torch.save (onmt_entmax.eole.training.saving)")

    def __getattr__(self, name: str):
        return getattr(torch, name)

    save = staticmethod(torch_save)


def install_atomic_torch_save() -> None:
    """Bind ``torch`` of Eole's model saver module to ``AtomicSaveTorch`` (idempotent)."""
    module = importlib.import_module(SAVER_MODULE)
    if not isinstance(module.torch, AtomicSaveTorch):
        module.torch = AtomicSaveTorch()


def _writes_here() -> bool:
    """This process writes the checkpoint (one process, or rank 0 of several)."""
    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


def wrap_save(upstream: Callable) -> Callable:
    """``TrainingModelSaver._save(self, step)`` in a staging folder, published whole (module docstring)."""

    def _save(self, step, *args, **kwargs):
        if not _writes_here():
            return upstream(self, step, *args, **kwargs)
        root, step_dir = self.model_path, f"step_{step}"
        staging = staging_folder(root, step_dir)
        shutil.rmtree(staging, ignore_errors=True)  # (a save killed before this one)
        os.makedirs(staging)
        self.model_path, self.cleanup = staging, lambda: None
        try:
            upstream(self, step, *args, **kwargs)
        except BaseException as err:
            shutil.rmtree(staging, ignore_errors=True)
            if is_no_space(err):
                raise no_space(os.path.join(root, step_dir), err) from None
            raise
        finally:
            self.model_path = root
            del self.cleanup
        publish_folder(staging, root, self.step_dir)
        self.cleanup()

    return _save


__all__ = ["AtomicSaveTorch", "install_atomic_torch_save", "wrap_save"]
