"""-inf-correct beam search for OpenNMT-py 3.5.1: the OpenNMT-family hooks of
``onmt_entmax.decoding.beam_hooks`` installed into ``onmt.translate`` (docs/decoding.md)."""
from __future__ import annotations

from onmt_entmax.decoding.beam_hooks import BeamRecord, install, wrap_method

_wrap = wrap_method  # (the other decoding modules wrap with it)

__all__ = ["BeamRecord", "apply"]


def apply() -> None:
    """Install the -inf beam-search patches (idempotent)."""
    from onmt.translate import beam_search, decode_strategy

    install(decode_strategy.DecodeStrategy, beam_search.BeamSearchBase)
