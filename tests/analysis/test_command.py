"""A command that fails writing (a full device, a file it may not write) ends in one line naming the file;
any other exception keeps its traceback."""
import codecs
import errno
import os
import sys

import pytest

from onmt_entmax.analysis.command import refusals, write_failure

needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")


class Writer:
    """Holds its output as OpenNMT-py's translator holds ``-output`` (``codecs.open``, flushed per batch)."""

    def __init__(self, path):
        self.out_file = codecs.open(path, "w+", "utf-8")

    def write(self):
        self.out_file.write("a line\n")
        self.out_file.flush()


def full_device_error():
    """The ENOSPC (no filename) and traceback that ``onmt_translate -output /dev/full`` ends with."""
    try:
        Writer("/dev/full").write()
    except OSError as err:
        return err, sys.exc_info()[2]
    raise AssertionError("writing /dev/full did not fail")


@needs_dev_full
def test_a_full_device_is_named_from_the_file_being_written():
    err, tb = full_device_error()
    assert err.errno == errno.ENOSPC and err.filename is None
    line = write_failure(err, tb)
    assert "/dev/full" in line and "\n" not in line


def test_an_os_error_naming_a_file_is_one_line_and_others_keep_their_traceback(tmp_path):
    try:
        open(tmp_path / "no" / "such", "w")
    except OSError as err:
        assert str(tmp_path / "no" / "such") in write_failure(err)
    assert write_failure(OSError(errno.EIO, "Input/output error")) is None  # (no file to name)
    assert write_failure(RuntimeError("a bug")) is None


def test_inside_refusals_a_write_failure_ends_the_command_with_status_1_and_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        with refusals("cmd"):
            open(tmp_path / "no" / "such", "w")
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and str(tmp_path / "no" / "such") in err
    with pytest.raises(RuntimeError):
        with refusals("cmd"):
            raise RuntimeError("a bug keeps its traceback")
