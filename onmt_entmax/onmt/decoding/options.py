"""Translate-time decoding and analysis options (``onmt_translate``, group "Entmax").

The options themselves (names, types, defaults, help) and their checks are shared with the Eole
adapter: ``onmt_entmax.options.decoding``.
"""
from __future__ import annotations

from onmt_entmax.options.decoding import DECODING_OPTIONS, DecodingConfig

__all__ = ["DECODING_OPTIONS", "DecodingConfig", "add_decoding_options"]


def _group(parser):
    try:
        from ..options import _entmax_group  # the integration's shared "Entmax" group

        return _entmax_group(parser)
    except ImportError:  # pragma: no cover - integration not installed
        for g in parser._action_groups:
            if g.title == "Entmax":
                return g
        return parser.add_argument_group("Entmax")


def add_decoding_options(parser) -> None:
    """Add the sparse decoding / analysis options (idempotent)."""
    if any(a.dest == "enumerate_support" for a in parser._actions):
        return
    g = _group(parser)
    for o in DECODING_OPTIONS:
        if o.type is bool:
            g.add(f"--{o.name}", f"-{o.name}", action="store_true", help=o.help)
        else:
            g.add(f"--{o.name}", f"-{o.name}", type=o.type, default=o.default, help=o.help)
