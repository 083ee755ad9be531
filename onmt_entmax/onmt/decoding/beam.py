"""-inf-correct beam search for OpenNMT-py 3.5.1: the OpenNMT-family hooks of
``onmt_entmax.decoding.beam_hooks``, rows of ``onmt_entmax.onmt.patches`` on ``onmt.translate`` (docs/decoding.md)."""
from __future__ import annotations

from onmt_entmax.decoding.beam_hooks import BeamRecord, rows

ROWS = rows("onmt.translate.decode_strategy:DecodeStrategy", "onmt.translate.beam_search:BeamSearchBase",
            "onmt.translate.penalties:PenaltyBuilder")

__all__ = ["BeamRecord", "ROWS"]
