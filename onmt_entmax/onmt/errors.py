"""A refusal ends a command with one line, not a traceback.

What the plugin refuses (a bad option, an output path that would write over an input, a checkpoint
that would run code, ...) is raised as a ``ValueError`` subclass, so that library callers
(``SparseDecoder``, the analysis functions) catch it like any other bad argument. When one ends an
``onmt_*`` command uncaught, this process's ``sys.excepthook`` prints ``<command>: error:
<message>`` on one line and Python exits with status 1; ``ONMT_ENTMAX_TRACEBACK=1`` adds the
traceback. An ``OSError`` raised while writing (a full device, a file it may not write) is one line naming
the file (``analysis.command.write_failure``). Every other exception keeps Python's own report.
"""
from __future__ import annotations

import os
import sys
import traceback

from onmt_entmax.analysis.command import write_failure
from onmt_entmax.errors import CheckpointError, EntmaxOptionError

USER_ERRORS = (EntmaxOptionError, CheckpointError)


def one_line(err: BaseException, prog: str | None = None) -> str:
    prog = prog or os.path.basename(sys.argv[0] or "onmt") or "onmt"
    text = " ".join(str(err).split())  # one line, whatever the message's layout
    return f"{prog}: error: {text}"


def is_refusal(err: BaseException) -> bool:
    """One of ours (or an error any adapter marks ``onmt_entmax_refusal``, as the Eole adapter's)."""
    return isinstance(err, USER_ERRORS) or bool(getattr(err, "onmt_entmax_refusal", False))


def _make_hook(previous):
    def excepthook(kind, value, tb):
        failure = write_failure(value, tb)
        if is_refusal(value) or failure is not None:
            if os.environ.get("ONMT_ENTMAX_TRACEBACK", "") not in ("", "0"):
                traceback.print_exception(kind, value, tb)
            sys.stderr.write(one_line(failure or value) + "\n")
            return
        previous(kind, value, tb)

    excepthook._onmt_entmax_onmt = True  # (the Eole adapter's hook has its own mark: they chain)
    return excepthook


def install_excepthook() -> None:
    """Print refusals on one line when they end the process (idempotent)."""
    if not getattr(sys.excepthook, "_onmt_entmax_onmt", False):
        sys.excepthook = _make_hook(sys.excepthook)


__all__ = ["USER_ERRORS", "install_excepthook", "is_refusal", "one_line"]
