"""The options of sparse models, shared by both adapters: names, help texts, values and checks.

No toolkit here: ``onmt_entmax.onmt`` turns these into OpenNMT-py's argparse group "Entmax",
``onmt_entmax.eole`` into fields of Eole's pydantic configs; both validate with the same functions.
"""
from onmt_entmax.errors import EntmaxOptionError

from .decoding import DECODING_OPTIONS, DecodingConfig, DecodingOption
from .model import (ATTENTION_KINDS, DEFERRED_TAU, attention_spec, generator_transformation,
                    inapplicable_options, model_option_help, model_option_names, tau_value, validate_entmax_opts)

__all__ = [
    "ATTENTION_KINDS", "DECODING_OPTIONS", "DEFERRED_TAU", "DecodingConfig", "DecodingOption", "EntmaxOptionError",
    "attention_spec", "generator_transformation", "inapplicable_options", "model_option_help", "model_option_names",
    "tau_value", "validate_entmax_opts",
]
