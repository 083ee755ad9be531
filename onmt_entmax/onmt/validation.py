"""Checks of the Entmax options, run by ``validate_model_opts`` before any model is built."""
from __future__ import annotations

from onmt_entmax.options.model import EntmaxOptionError, attention_spec, validate_entmax_opts

__all__ = ["EntmaxOptionError", "attention_spec", "validate_entmax_opts", "wrap_validate_model_opts"]


def wrap_validate_model_opts(upstream):
    """``ArgumentParser.validate_model_opts`` (classmethod): stock checks, then ours."""

    def validate_model_opts(cls, model_opt):
        upstream(cls, model_opt)
        validate_entmax_opts(model_opt)

    return validate_model_opts
