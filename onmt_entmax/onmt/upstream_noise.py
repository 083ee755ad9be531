"""What OpenNMT-py 3.5.1 prints that tells our users nothing, filtered at its source.

- ``FutureWarning``s of the deprecated torch APIs that upstream's own modules call (the
  ``torch.cuda.amp.custom_fwd`` / ``custom_bwd`` decorators, six of them at ``import onmt``;
  ``torch.cuda.amp.autocast`` in the training loop, ``torch.cuda.amp.GradScaler`` with fp16,
  ``torch.backends.cuda.sdp_kernel`` in attention on CUDA). Each filter names the message *and* the
  upstream module that makes the call, so the same deprecation anywhere else (our code, the user's)
  and every other warning still show; the one exception is ``sdp_kernel``, whose warning Python
  attributes to ``contextlib`` whoever calls it.
- "Weighted corpora loaded so far", logged by upstream's ``WeightedMixer`` at every pass over a
  training corpus (on a small corpus, a line pair every few steps): logged once a process.

``filter_upstream_warnings`` runs before upstream's modules execute (the import hook in
``onmt_entmax.autoload``); ``quiet`` (both filters) is the patch ``upstream_noise`` of ``patches.PATCHES``, so
activation by hand, after ``import onmt``, still filters what training and translation raise.
"""
from __future__ import annotations

import logging
import re
import warnings

_AMP = ("onmt.modules.sparse_activations", "onmt.modules.sparse_losses", "onmt.modules.sru")
# (the torch API as its FutureWarning names it, the OpenNMT-py 3.5.1 modules that call it, the module
# Python attributes the warning to where that is not the caller)
UPSTREAM_DEPRECATIONS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("torch.cuda.amp.custom_fwd(args...)", _AMP, None),
    ("torch.cuda.amp.custom_bwd(args...)", _AMP, None),
    ("torch.cuda.amp.autocast(args...)", ("onmt.trainer",), None),
    ("torch.cuda.amp.GradScaler(args...)", ("onmt.utils.optimizers",), None),
    # torch stacks its deprecation under contextlib.contextmanager: every caller's warning is raised
    # from contextlib, so this one is filtered whoever calls it (upstream: every attention call on CUDA)
    ("torch.backends.cuda.sdp_kernel()", ("onmt.modules.multi_headed_attn",), "contextlib"),
)

CORPORA_LOADED = "Weighted corpora loaded so far:"  # onmt/inputters/dynamic_iterator.py, WeightedMixer._logging


def filter_upstream_warnings() -> None:
    """Ignore exactly the deprecation warnings of ``UPSTREAM_DEPRECATIONS`` (idempotent: warnings
    drops an equal filter before inserting it again)."""
    for api, callers, raised_in in UPSTREAM_DEPRECATIONS:
        modules = (raised_in,) if raised_in else callers
        warnings.filterwarnings("ignore", message=re.escape(f"`{api}` is deprecated"), category=FutureWarning,
                                module="(?:" + "|".join(re.escape(m) for m in modules) + r")\Z")


class CorporaLoadedOnce(logging.Filter):
    """Passes the first "Weighted corpora loaded so far" record of the process, on one line; drops the
    later ones (one for every further pass over a corpus). Other records pass untouched."""

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


def log_corpora_once() -> None:
    """Put the filter on OpenNMT-py's logger (``init_logger`` replaces its handlers, never its filters)."""
    logger = logging.getLogger("onmt")
    if not any(isinstance(f, CorporaLoadedOnce) for f in logger.filters):
        logger.addFilter(CorporaLoadedOnce())


def quiet() -> None:
    filter_upstream_warnings()
    log_corpora_once()
