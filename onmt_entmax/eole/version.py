"""The Eole versions this adapter is tested with, and a one-line refusal of the others.

Every patch targets Eole internals by name (``patches.py``), which move between releases (the torch pin
changed with nearly every one): outside the tested range the adapter does not activate at all. The
refusal is an ``ImportError`` raised while ``import eole`` runs (library callers can catch it); left
uncaught, it prints one line, not a traceback.
"""
from __future__ import annotations

import re

from onmt_entmax.errors import UnsupportedEole

from .errors import install_one_line_hook

TESTED = "0.6.4"
SUPPORTED = ((0, 6, 4), (0, 7))  # first supported release, first unsupported one


def _parse(version: str) -> tuple:
    """(0, 7, 0) for "0.7.0", "0.7.0rc1" or "0.7.0+cu130": the leading numbers of the release."""
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.group() != piece:
            break
    return tuple(parts)


def supported(version: str) -> bool:
    low, high = SUPPORTED
    return low <= _parse(version) < high


def check_version(version: str) -> None:
    """Raise ``UnsupportedEole`` (one line when uncaught) unless ``version`` is in the supported range."""
    if supported(version):
        return
    low, high = (".".join(map(str, v)) for v in SUPPORTED)
    install_one_line_hook()
    raise UnsupportedEole(
        f"Eole {version} is not supported (onmt-entmax works with Eole >= {low}, < {high}; tested: {TESTED}). "
        f"Install it with `pip install eole=={TESTED}`, or set ONMT_ENTMAX_DISABLE=1 to run Eole without "
        "onmt-entmax.")
