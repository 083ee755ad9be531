"""The model's own log-probabilities in the translator.

Upstream ``Inference._decode_and_generate`` computes ``log_softmax(generator(h))``. While it runs
we make the module-level ``log_softmax`` of ``onmt.translate.translator`` resolve to the model's
``generator_log_probs`` (log of the sparse probabilities, -inf for zeros, the mapping training
used); stock softmax models get ``log_softmax`` exactly as before.
"""
from __future__ import annotations

import contextvars
from typing import Callable

from ..model.surgery import generator_log_probs

_GENERATOR = contextvars.ContextVar("onmt_entmax_generator", default=None)


def make_log_softmax(upstream_log_softmax: Callable) -> Callable:
    """Replacement for ``onmt.translate.translator.log_softmax``."""

    def log_softmax(input, dim=-1, *args, **kwargs):  # noqa: A002 (upstream signature)
        generator = _GENERATOR.get()
        if generator is None or dim not in (-1, input.dim() - 1):
            return upstream_log_softmax(input, dim, *args, **kwargs)
        return generator_log_probs(generator, input)

    return log_softmax


def wrap_decode_and_generate(upstream: Callable) -> Callable:
    def _decode_and_generate(self, *args, **kwargs):
        token = _GENERATOR.set(getattr(self.model, "generator", None))
        try:
            return upstream(self, *args, **kwargs)
        finally:
            _GENERATOR.reset(token)

    return _decode_and_generate


__all__ = ["make_log_softmax", "wrap_decode_and_generate"]
