"""What ends an ``onmt_*`` command: a refusal or a failed write in one line, anything else its traceback."""
import os
import sys

import pytest

pytest.importorskip("onmt")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "analysis"))
from test_command import full_device_error, needs_dev_full  # noqa: E402


def _hook(monkeypatch):
    """The excepthook ``install_excepthook`` chains in front of ``seen`` (the interpreter's)."""
    from onmt_entmax.onmt.errors import install_excepthook

    seen = []
    monkeypatch.setattr(sys, "excepthook", lambda *exc: seen.append(exc))
    install_excepthook()
    return sys.excepthook, seen


@needs_dev_full
def test_a_full_output_device_ends_the_command_in_one_line_naming_the_file(monkeypatch, capsys):
    """``onmt_translate -output /dev/full``: ENOSPC at the translator's flush, without a file name."""
    hook, seen = _hook(monkeypatch)
    err, tb = full_device_error()
    hook(type(err), err, tb)
    lines = capsys.readouterr().err.splitlines()
    assert not seen and len(lines) == 1 and "/dev/full" in lines[0]


def test_other_exceptions_keep_the_interpreters_report(monkeypatch, capsys):
    hook, seen = _hook(monkeypatch)
    for err in (RuntimeError("a bug"), OSError(5, "Input/output error")):
        hook(type(err), err, None)
    assert len(seen) == 2 and capsys.readouterr().err == ""
