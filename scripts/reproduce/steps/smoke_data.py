"""``smoke-data``: work/smoke/multi30k, the data of the MT smoke configs, from the bundled Multi30k sample."""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from . import common

MULTI30K_SAMPLE, SAMPLE_LINES = common.ROOT / "data/multi30k-sample", 400  # the release's first 400 lines a split


def smoke_data(cwd: Path | None = None, lines: int = 400, merges: int = 300) -> None:
    """work/smoke/multi30k: the first ``lines`` Multi30k pairs of each split, BPE with ``merges`` merges,
    from the bundled sample (the release's first lines: the same files) unless more lines are asked for."""
    cwd = cwd or common.WORK
    out = cwd / "work/smoke/multi30k"
    if (out / "prepare.json").exists():
        return
    raw = cwd / "work/smoke/multi30k-raw"
    source = MULTI30K_SAMPLE if lines <= SAMPLE_LINES else common.SHARED / "multi30k"
    common.run([sys.executable, common.ROOT / "scripts/data/extract.py", "multi30k", "--downloads", source,
                "--out", raw], cwd=cwd)
    common.run([sys.executable, common.ROOT / "scripts/data/prepare_mt.py", "multi30k", "--raw", raw, "--out", out,
                "--max-lines", str(lines), "--merges", str(merges)], cwd=cwd)
    shutil.rmtree(raw)


def run_step(a: argparse.Namespace) -> None:
    """The smoke data under the work folder."""
    smoke_data()
