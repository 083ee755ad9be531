"""``unpack``: put packed runs back under runs/ (checked against the pack's sha256s): --from DIR ... (then
train resumes them and evaluate scores them, as on the machine they came from; carry.py)."""
from __future__ import annotations

import argparse

import carry

from . import common


def run_step(a: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Unpack the batch folders ``--from`` names under the work folder."""
    if not a.from_:
        parser.error("unpack needs --from DIR [DIR ...]")
    try:
        written = carry.unpack(a.from_, common.WORK)
    except carry.CarryError as err:
        raise SystemExit(f"unpack: {err}") from None
    print(f"unpack: {len(written)} file(s) written under {common.WORK}")
