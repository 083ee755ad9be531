"""The model's own log-probabilities where an OpenNMT-family translator calls ``log_softmax``.

OpenNMT-py's and Eole's ``Inference._decode_and_generate`` compute ``log_softmax(generator(h))`` with a
module-level ``log_softmax``. While ``_decode_and_generate`` runs (``wrap_decode_and_generate``), that
name (``make_log_softmax``) resolves to ``generator_log_probs`` of the running model's generator: log of
the sparse probabilities, -inf for zeros, the mapping training used (alpha-ReLU: log of its
unnormalized scores); stock softmax generators get ``log_softmax`` exactly as before; an ensemble that
averages raw probabilities already returns log((1/M) sum_m p_m), passed through (``ensemble.LOG_PROBS_OUT``).
No toolkit is imported: each adapter lists these two wrappers in its patches.
"""
from __future__ import annotations

import contextvars
from typing import Callable

from onmt_entmax.modules.models import generator_log_probs

from .ensemble import returns_log_probs

_GENERATOR = contextvars.ContextVar("onmt_entmax_generator", default=None)


def make_log_softmax(upstream_log_softmax: Callable) -> Callable:
    """Replacement for a translator module's ``log_softmax``."""

    def log_softmax(input, dim=-1, *args, **kwargs):  # noqa: A002 (upstream signature)
        generator = _GENERATOR.get()
        if generator is None or dim not in (-1, input.dim() - 1):
            return upstream_log_softmax(input, dim, *args, **kwargs)
        if returns_log_probs(generator):
            return input
        return generator_log_probs(generator, input)

    return log_softmax


def wrap_decode_and_generate(upstream: Callable) -> Callable:
    """``Inference._decode_and_generate``: makes the running model's generator visible to ``log_softmax``."""

    def _decode_and_generate(self, *args, **kwargs):
        token = _GENERATOR.set(getattr(self.model, "generator", None))
        try:
            return upstream(self, *args, **kwargs)
        finally:
            _GENERATOR.reset(token)

    return _decode_and_generate
