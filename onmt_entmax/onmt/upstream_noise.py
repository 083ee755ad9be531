"""What OpenNMT-py 3.5.1 prints that tells our users nothing, filtered at its source.

- ``FutureWarning``s of the deprecated torch APIs that upstream's own modules call (the
  ``torch.cuda.amp.custom_fwd`` / ``custom_bwd`` decorators, six of them at ``import onmt``;
  ``torch.cuda.amp.autocast`` in the training loop, ``torch.cuda.amp.GradScaler`` with fp16,
  ``torch.backends.cuda.sdp_kernel`` in attention on CUDA). Each filter names the message *and* the
  upstream module that makes the call, so the same deprecation anywhere else (our code, the user's)
  and every other warning still show; the one exception is ``sdp_kernel``, whose warning Python
  attributes to ``contextlib`` whoever calls it.
- torch's warning that an ``nn.LSTM`` of one layer ignores its dropout, at every build of a 1-layer RNN
  (each ``onmt_translate``): upstream applies that dropout around the LSTM itself
  (``onmt_entmax.upstream_noise.ONE_LAYER_LSTM_DROPOUT``).
- "Weighted corpora loaded so far", logged by upstream's ``WeightedMixer`` at every pass over a
  training corpus (on a small corpus, a line pair every few steps): logged once a process.

``filter_upstream_warnings`` runs before upstream's modules execute (the import hook in
``onmt_entmax.autoload``); ``quiet`` (both filters) is the patch ``upstream_noise`` of ``patches.PATCHES``, so
activation by hand, after ``import onmt``, still filters what training and translation raise.
"""
from __future__ import annotations

import re
import warnings

from onmt_entmax.upstream_noise import CORPORA_LOADED, ONE_LAYER_LSTM_DROPOUT, CorporaLoadedOnce, ignore_warnings
from onmt_entmax.upstream_noise import log_corpora_once as _log_corpora_once

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

__all__ = ["CORPORA_LOADED", "CorporaLoadedOnce", "UPSTREAM_DEPRECATIONS", "filter_upstream_warnings",
           "log_corpora_once", "quiet"]


def filter_upstream_warnings() -> None:
    """Ignore exactly the deprecation warnings of ``UPSTREAM_DEPRECATIONS`` and the 1-layer LSTM's dropout
    warning (idempotent: warnings drops an equal filter before inserting it again)."""
    for api, callers, raised_in in UPSTREAM_DEPRECATIONS:
        modules = (raised_in,) if raised_in else callers
        warnings.filterwarnings("ignore", message=re.escape(f"`{api}` is deprecated"), category=FutureWarning,
                                module="(?:" + "|".join(re.escape(m) for m in modules) + r")\Z")
    ignore_warnings([ONE_LAYER_LSTM_DROPOUT])


def log_corpora_once() -> None:
    """The corpus line once on OpenNMT-py's logger."""
    _log_corpora_once("onmt")


def quiet() -> None:
    filter_upstream_warnings()
    log_corpora_once()
