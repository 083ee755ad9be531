"""Checkpoints written whole or not at all.

A save that stops half-way (the disk full, the process killed) must not leave a truncated file under
the checkpoint's name: ``-train_from`` and ``onmt_translate`` would pick it as the newest. So each file
is written to a temporary name in its own folder, flushed to the disk, and renamed over the final name
(a rename within one file system is atomic); a checkpoint that is a folder (Eole's ``step_N/`` and the
links to its files beside it) is written in a staging folder and renamed into place the same way. A full
disk ends the save with one line naming the checkpoint, and the checkpoints saved before stay complete.
"""
from __future__ import annotations

import errno
import os
import shutil
from typing import Any, BinaryIO, Callable

import torch

from onmt_entmax.errors import CheckpointSaveError

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def is_no_space(err: BaseException) -> bool:
    """``err`` says the disk is full: an ``OSError`` ENOSPC / EDQUOT, or a library's own error carrying the
    OS's words (safetensors: "No space left on device (os error 28)")."""
    return (isinstance(err, OSError) and err.errno in NO_SPACE) or "No space left on device" in str(err)


def no_space(path: str, err: BaseException) -> CheckpointSaveError:
    folder = os.path.dirname(os.path.abspath(path))
    return CheckpointSaveError(f"no space left on {folder}: the checkpoint {path} was not saved (the ones saved "
                               "before are complete); free some space and resume with -train_from the newest")


def atomic_save(obj: Any, path: str | os.PathLike, save: Callable[[Any, BinaryIO], None] = torch.save) -> None:
    """``save(obj, file)`` into ``<path>.tmp-<pid>`` beside ``path``, then renamed to ``path``: ``path`` is either
    the new checkpoint whole or as it was. Out of space: ``CheckpointSaveError`` naming ``path``, no file left."""
    path = os.fspath(path)
    partial = f"{path}.tmp-{os.getpid()}"
    try:
        with open(partial, "wb") as f:
            save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException as err:
        _remove(partial)
        if is_no_space(err):
            raise no_space(path, err) from None
        raise


def staging_folder(root: str, step_dir: str) -> str:
    """Where a checkpoint folder ``root/step_dir`` is written before ``publish_folder`` renames it into place."""
    return os.path.join(root, f".{step_dir}.partial")


def publish_folder(staging: str, root: str, step_dir: str) -> None:
    """Move the checkpoint written under ``staging`` into ``root``: ``staging/step_dir`` renamed to
    ``root/step_dir`` (one rename), then each link ``staging/<name>`` (to ``step_dir/<name>``) put over
    ``root/<name>`` by a rename too, so ``root``'s links always name one complete step folder."""
    target = os.path.join(root, step_dir)
    if os.path.isdir(target):  # (the same step saved again: the new one replaces it)
        shutil.rmtree(target)
    os.replace(os.path.join(staging, step_dir), target)
    for name in sorted(os.listdir(staging)):
        os.replace(os.path.join(staging, name), os.path.join(root, name))
    os.rmdir(staging)


def torch_save(obj: Any, f, *args, **kwargs) -> None:
    """``torch.save(obj, f, ...)``, through ``atomic_save`` when ``f`` is a path (a file object is the caller's)."""
    if not isinstance(f, (str, os.PathLike)):
        return torch.save(obj, f, *args, **kwargs)
    atomic_save(obj, f, lambda value, file: torch.save(value, file, *args, **kwargs))


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


__all__ = ["CheckpointSaveError", "atomic_save", "is_no_space", "no_space", "publish_folder", "staging_folder",
           "torch_save"]
