"""The options of sparse models, shared by both adapters: one table of them, and their checks.

No toolkit here: each row of ``OPTIONS`` (``table.Option``: name, type, default, choices, help, section) is
rendered by ``onmt_entmax.onmt.options`` into OpenNMT-py's argparse group "Entmax" and by
``onmt_entmax.eole.options`` into fields of Eole's pydantic configs; both validate with the same functions.
"""
from onmt_entmax.errors import EntmaxOptionError

from .decoding import DECODING_OPTIONS, DecodingConfig
from .model import (
    ATTENTION_KINDS,
    DEFERRED_TAU,
    MODEL_OPTIONS,
    attention_spec,
    generator_transformation,
    inapplicable_options,
    model_option_names,
    validate_entmax_opts,
)
from .table import SECTIONS, TOOLKITS, Option, of_toolkit
from .training import TRAINING_OPTIONS

OPTIONS = MODEL_OPTIONS + TRAINING_OPTIONS + DECODING_OPTIONS  # every option of the plugin, by section in table order

__all__ = [
    "ATTENTION_KINDS", "DECODING_OPTIONS", "DEFERRED_TAU", "DecodingConfig", "EntmaxOptionError", "MODEL_OPTIONS",
    "OPTIONS", "Option", "SECTIONS", "TOOLKITS", "TRAINING_OPTIONS", "attention_spec", "generator_transformation",
    "inapplicable_options", "model_option_names", "of_toolkit", "validate_entmax_opts",
]
