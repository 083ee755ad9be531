"""What Eole 0.6.4 prints that tells our users nothing, filtered at its source.

- Two ``RuntimeWarning``s at ``import eole`` (``eole/ops/__init__.py``, attributed to the Eole module that
  first imports ``eole.ops``): its optional C++ extension ``eole._ops`` and ``flash_attn`` are not
  installed. Eole falls back to PyTorch for both; the sparse attention and output layers never use them.
- pydantic's "A custom validator is returning a value other than `self`" at ``eole build_vocab``: upstream's
  ``BuildVocabConfig._validate_build_vocab_config`` returns None (pydantic keeps the model; attributed to
  ``eole.bin.run``, where every command builds its config).
- torch's warning that an ``nn.LSTM`` of one layer ignores its dropout, at every build of a 1-layer RNN
  (each ``eole predict``): Eole applies that dropout around the LSTM itself
  (``onmt_entmax.upstream_noise.ONE_LAYER_LSTM_DROPOUT``).
- "Weighted corpora loaded so far", logged by Eole's ``WeightedMixer`` at every pass over a training
  corpus (on a small corpus, a line pair every few steps): logged once a process.

``filter_upstream_warnings`` runs before Eole's modules execute (the import hook in ``onmt_entmax.autoload``);
``quiet`` (both filters) is the patch ``upstream_noise`` of ``patches.PATCHES``, so activation by hand,
after ``import eole``, still filters what the commands raise later.
"""
from __future__ import annotations

from onmt_entmax.upstream_noise import ONE_LAYER_LSTM_DROPOUT, WarningRow, ignore_warnings, log_corpora_once

_EOLE = r"eole(?:\..+)?"  # any Eole module: the one that first imports eole.ops is attributed the warning
UPSTREAM_WARNINGS: tuple[WarningRow, ...] = (
    ("Could not import eole._ops C++ extension: ", RuntimeWarning, _EOLE),
    ("Could not import flash_attn: ", RuntimeWarning, _EOLE),
    ("A custom validator is returning a value other than `self`.", UserWarning, r"eole\.bin\.run"),
    ONE_LAYER_LSTM_DROPOUT,
)


def filter_upstream_warnings() -> None:
    """Ignore exactly the warnings of ``UPSTREAM_WARNINGS`` (idempotent)."""
    ignore_warnings(UPSTREAM_WARNINGS)


def quiet() -> None:
    filter_upstream_warnings()
    log_corpora_once("eole")
