"""The file checks' notion of one file (onmt_entmax/options/files.py): outputs are compared with inputs by
the file they name, not by their spelling, so none is written over through another name."""
import os

from onmt_entmax.options.files import same_file


def test_two_spellings_of_one_not_yet_existing_path_are_one_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert same_file("./x", "x") and same_file("x", str(tmp_path / "x"))
    assert same_file("link/out.txt", "real/out.txt") and same_file("real/../link/out.txt", "./real/out.txt")
    assert not (tmp_path / "x").exists() and not (tmp_path / "real/out.txt").exists()
    assert not same_file("x", "y") and not same_file("link/out.txt", "out.txt")
