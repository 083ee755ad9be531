"""What ends an ``eole`` command under the adapter: a refusal or a failed write in one line, anything else
its traceback."""
import os
import sys

import pytest

pytest.importorskip("eole")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "analysis"))
from test_command import full_device_error, needs_dev_full  # noqa: E402


def _hook(monkeypatch):
    from onmt_entmax.eole.errors import install_one_line_hook

    seen = []
    monkeypatch.setattr(sys, "excepthook", lambda *exc: seen.append(exc))
    install_one_line_hook()
    return sys.excepthook, seen


@needs_dev_full
def test_a_full_output_device_ends_predict_in_one_line_naming_the_file(monkeypatch, capsys):
    """``eole predict -output /dev/full``: ENOSPC when the output is flushed, without a file name."""
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
