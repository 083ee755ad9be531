"""Refusals a user reads as one line (no traceback) when left uncaught, and can catch as library callers.

``OneLine`` errors carry ``onmt_entmax_refusal`` (the import hook then adds nothing) and, raised out of
a command, are printed by ``sys.excepthook`` as ``onmt-entmax: <message>``; other exceptions keep the
interpreter's hook, except an ``OSError`` raised while writing (a full device, a file it may not write): one
line naming the file (``analysis.command.write_failure``).
"""
from __future__ import annotations

import sys

from onmt_entmax.analysis.command import write_failure


class OneLine(Exception):
    onmt_entmax_refusal = True


class ConfigError(OneLine, ValueError):
    """A bad option in an Eole config (YAML or command line); the message names it."""


class UnsupportedEole(OneLine, ImportError):
    """Eole outside the tested range: onmt-entmax refuses to patch it."""


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
