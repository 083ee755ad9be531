"""Upstream noise: what both toolkits print that tells our users nothing, filtered at its source.

Each adapter's ``upstream_noise.py`` lists its toolkit's rows and installs them; the rows and filters both
need are here. This module imports neither toolkit."""
from __future__ import annotations

import logging
from typing import Iterable

# (message prefix, category, the modules Python attributes it to: a regex matched against the whole name)
WarningRow = tuple[str, type, str]

# torch's nn.LSTM(num_layers=1, dropout>0) warns that its dropout acts between layers only; both toolkits'
# 1-layer RNNs pass their dropout there and apply it around the LSTM themselves, so the warning (at every
# model build: each translate) says nothing about the model. torch raises it in its own module.
ONE_LAYER_LSTM_DROPOUT: WarningRow = ("dropout option adds dropout after all but last recurrent layer",
                                      UserWarning, r"torch\.nn\.modules\.rnn")


def ignore_warnings(rows: Iterable[WarningRow]) -> None:
    """Ignore exactly the warnings of ``rows``: message (a prefix), category and attributed module all
    match, so the same message from anywhere else and every other warning still show (idempotent:
    ``warnings`` drops an equal filter before inserting it again)."""
    import re
    import warnings

    for message, category, modules in rows:
        warnings.filterwarnings("ignore", message=re.escape(message), category=category,
                                module=f"(?:{modules})\\Z")


CORPORA_LOADED = "Weighted corpora loaded so far:"  # both toolkits' WeightedMixer._logging


class CorporaLoadedOnce(logging.Filter):
    """Passes the first "Weighted corpora loaded so far" record of the process, on one line; drops the
    later ones (one for every further pass over a corpus: on a small corpus a line pair every few steps).
    Other records pass untouched."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(CORPORA_LOADED)):
            return True
        if self.seen:
            return False
        self.seen = True
        counts = [line.strip(" \t*") for line in record.getMessage()[len(CORPORA_LOADED):].splitlines()]
        record.msg = f"{CORPORA_LOADED} {', '.join(c for c in counts if c)} (logged once a process)"
        record.args = ()
        return True


def log_corpora_once(logger: str) -> None:
    """Put the filter on the toolkit's logger ``logger`` once (their ``init_logger`` replaces its
    handlers, never its filters)."""
    log = logging.getLogger(logger)
    if not any(isinstance(f, CorporaLoadedOnce) for f in log.filters):
        log.addFilter(CorporaLoadedOnce())
