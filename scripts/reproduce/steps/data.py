"""``data``: prepare work/data/<corpus> for each experiment of a table (SIGMORPHON from ../shared/data or
--sigmorphon ARCHIVE; MT: download.py + extract.py + prepare_mt.py), skipping a corpus already prepared."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import experiments as E

from . import common

SHARED_TESTSETS = {"iwslt17-de-en": "iwslt17-de-en", "kftt-ja-en": "kftt", "wmt16-ro-en": "wmt16-ro-en",
                   "wmt14-en-de": "wmt14-en-de", "wmt13-en-ru": "wmt13-en-ru"}


def prepare_data(e: E.Experiment, sigmorphon_archive: Path | None) -> None:
    """work/data/<corpus> of ``e`` (nothing to do when it was prepared before); SIGMORPHON from
    ``sigmorphon_archive`` (default: the archive in ../shared/data), MT downloaded unless it is there."""
    out = common.WORK / E.DATA / e.corpus
    if e.task == "sigmorphon":
        if (out / "src-train.txt").exists():
            return
        archive = sigmorphon_archive or common.SHARED / "sigmorphon2018-task1.tar.gz"
        if not archive.exists():
            given = f"--sigmorphon {archive}: no such archive or folder" if sigmorphon_archive else \
                f"no SIGMORPHON 2018 archive at {archive}"
            raise SystemExit(f"data {e.table}: {given}; fetch it with `python3 scripts/data/download.py "
                             "sigmorphon2018 --out work/downloads` and give --sigmorphon work/downloads/sigmorphon2018")
        common.run([sys.executable, common.ROOT / "scripts/data/prepare_sigmorphon2018.py", "--source", archive,
                    "--out", out, "--setting", e.corpus.rsplit("-", 1)[1]])
        return
    if (out / "prepare.json").exists():
        return
    downloads = common.WORK / "work/downloads"
    if e.corpus == "multi30k" and (common.SHARED / "multi30k").exists():  # the full corpus is in ../shared/data
        source = common.SHARED / "multi30k"
    else:
        common.run([sys.executable, common.ROOT / "scripts/data/download.py", e.corpus, "--out", downloads])
        source = downloads / e.corpus
    extra = []
    if e.corpus == "iwslt17-de-en":
        common.run([sys.executable, common.ROOT / "scripts/data/download.py", "iwslt17-de-en-test", "--out",
                    downloads])
        extra = ["--testsets", downloads / "iwslt17-de-en-test"]
    shared_tests = common.SHARED / "mt-testsets" / SHARED_TESTSETS.get(e.corpus, "-")
    if shared_tests.exists() and e.corpus != "iwslt14-de-en":  # dev/test sets already here: no SacreBLEU download
        extra = ["--testsets", shared_tests]
    common.run([sys.executable, common.ROOT / "scripts/data/extract.py", e.corpus, "--downloads", source,
                "--out", out / "raw", *extra])
    common.run([sys.executable, common.ROOT / "scripts/data/prepare_mt.py", e.corpus, "--raw", out / "raw",
                "--out", out, "--jobs", "8"])


def run_step(a: argparse.Namespace, todo: list[E.Experiment]) -> None:
    """The data of each experiment in ``todo``."""
    for e in todo:
        prepare_data(e, a.sigmorphon)
