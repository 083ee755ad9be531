"""Checkpoints written whole or not at all.

A save that stops half-way (the disk full, the process killed) must not leave a truncated file under
the checkpoint's name: ``-train_from`` and ``onmt_translate`` would pick it as the newest. So each file
is written to a temporary name in its own folder, flushed to the disk, and renamed over the final name
(a rename within one file system is atomic). A full disk ends the save with one line naming the file,
and the checkpoints saved before stay complete.
"""
from __future__ import annotations

import errno
import os
from typing import Any, BinaryIO, Callable

import torch

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class CheckpointSaveError(RuntimeError):
    """A checkpoint that could not be written whole; a refusal (one line when it ends a command)."""

    onmt_entmax_refusal = True


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
    except OSError as err:
        _remove(partial)
        if err.errno in NO_SPACE:
            folder = os.path.dirname(os.path.abspath(path))
            raise CheckpointSaveError(f"no space left on {folder}: the checkpoint {path} was not saved (the ones "
                                      "saved before are complete); free some space and resume with -train_from the "
                                      "newest") from None
        raise
    except BaseException:
        _remove(partial)
        raise


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


__all__ = ["CheckpointSaveError", "atomic_save"]
