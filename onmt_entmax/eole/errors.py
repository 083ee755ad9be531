"""Refusals a user reads as one line (no traceback) when left uncaught: the Eole adapter's excepthook.

The ``OneLine`` errors of ``onmt_entmax.errors`` (``ConfigError``, ``UnsupportedEole``), raised out of a
command, are printed by ``sys.excepthook`` as ``onmt-entmax: <message>``; other exceptions keep the
interpreter's hook, except an ``OSError`` raised while writing (a full device, a file it may not write): one
line naming the file (``analysis.command.write_failure``).
"""
from __future__ import annotations

import sys

from onmt_entmax.analysis.command import write_failure
from onmt_entmax.errors import OneLine


def install_one_line_hook() -> None:
    """Print uncaught ``OneLine`` errors as one line (idempotent)."""
    if getattr(sys.excepthook, "_onmt_entmax", False):
        return
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        failure = write_failure(value, tb)
        if isinstance(value, OneLine) or failure is not None:
            sys.stderr.write(f"onmt-entmax: {failure or value}\n")
        else:
            previous(kind, value, tb)

    excepthook._onmt_entmax = True
    sys.excepthook = excepthook
