"""-inf-correct beam search for Eole: the OpenNMT-family hooks of ``onmt_entmax.decoding.beam_hooks``,
rows of ``onmt_entmax.eole.patches`` on ``eole.predict`` (docs/decoding.md)."""
from __future__ import annotations

from onmt_entmax.decoding.beam_hooks import rows

ROWS = rows("eole.predict.decode_strategy:DecodeStrategy", "eole.predict.beam_search:BeamSearchBase",
            "eole.predict.penalties:PenaltyBuilder")
