"""How a command ends on bad input or a failed write: one line, exit status 1, no traceback.

``refuse`` and ``refusals`` serve the analysis commands (``onmt-entmax-alphas``, ``-head-diversity``,
``-alpha-relu-stats``): ``<prog>: error: <message>`` as the toolkits' commands refuse (argparse's own usage
errors keep its usage line and status 2). ``write_failure`` is the line both adapters' excepthooks print
for an ``OSError`` that ends a command while it writes (``-output /dev/full``: ENOSPC at a flush), naming
the file; other exceptions keep their traceback.
"""
from __future__ import annotations

import errno
import sys
from contextlib import contextmanager
from types import TracebackType
from typing import Iterator, NoReturn, Optional

from onmt_entmax.errors import CheckpointError, EntmaxOptionError

FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # the device (or the user's quota, or the file size) is full


def _open_for_writing(tb: Optional[TracebackType]) -> Optional[str]:
    """The name of a file open for writing that the innermost frame of ``tb`` holding one has (in its
    locals or its ``self``'s attributes): the file a flush or close without a ``filename`` failed on."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        held = list(frame.f_locals.values())
        held += list(getattr(frame.f_locals.get("self"), "__dict__", {}).values())
        for obj in held:
            name, mode = getattr(obj, "name", None), getattr(obj, "mode", None)
            if isinstance(name, str) and isinstance(mode, str) and set(mode) & set("wax+"):
                return name
    return None


def write_failure(err: BaseException, tb: Optional[TracebackType] = None) -> Optional[str]:
    """The one line for an ``OSError`` that names its file (``err.filename``) or is a full device (the file
    found in ``tb`` when the error names none); None for any other exception (its traceback stays)."""
    if not isinstance(err, OSError):
        return None
    path = err.filename if err.filename is not None else _open_for_writing(tb) if err.errno in FULL else None
    reason = err.strerror or str(err)
    if err.errno in FULL:
        where = f" writing {path}" if path else ""
        return f"{reason[:1].lower()}{reason[1:]}{where}: free space there or write to another device"
    return f"{path}: {reason}" if path is not None else None


def one_line(prog: str, message: object) -> str:
    return f"{prog}: error: {' '.join(str(message).split())}"


def refuse(prog: str, message: object) -> NoReturn:
    """End the command with ``prog: error: message`` on one line and exit status 1."""
    sys.stderr.write(one_line(prog, message) + "\n")
    raise SystemExit(1)


@contextmanager
def refusals(prog: str) -> Iterator[None]:
    """Inside: a refusal (``EntmaxOptionError``, ``CheckpointError``) or a failed write (``write_failure``)
    ends the command with one line and exit status 1."""
    try:
        yield
    except (EntmaxOptionError, CheckpointError) as err:
        refuse(prog, err)
    except OSError as err:
        line = write_failure(err, sys.exc_info()[2])
        if line is None:
            raise
        refuse(prog, line)


__all__ = ["refuse", "refusals", "write_failure"]
