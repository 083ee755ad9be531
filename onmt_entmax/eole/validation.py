"""Checks of our options in Eole's configs, and every config error as one line naming the option.

The fields themselves are declared from the option table (``options.py``); pydantic refuses a bad value of
one field (a name not in the registry, alpha < 1, a tau that is neither a number nor auto/formula, a YAML
boolean where a number belongs) and an unknown or misspelled key. Cross-option checks (``validate_entmax_opts``)
run when a run's config is built (``wrap_build_config``) and again when a model is built; a training run's
config also gets OpenNMT-py's training checks (``check_train_config``: options the model would not use), a
predict config its search sizes, all from the shared code of ``onmt_entmax.options.model``. A config error is
one line: the option's path, what is wrong and, for an unknown key, the closest known one.
"""
from __future__ import annotations

import difflib
from types import SimpleNamespace
from typing import Callable

from pydantic import ValidationError

from onmt_entmax.errors import ConfigError, EntmaxOptionError
from onmt_entmax.options.decoding import DecodingConfig
from onmt_entmax.options.model import (
    check_applicable,
    check_label_smoothing,
    check_search_sizes,
    generator_transformation,
    model_option_names,
    validate_entmax_opts,
)

from .files import check_predict_files, check_train_files
from .options import family
from .training.loss import eole_logger


# --- cross-option checks ----------------------------------------------------------------------------
def flat_options(model_config) -> SimpleNamespace:
    """The model options as attributes, as ``validate_entmax_opts`` and the builders read them."""
    values = {n: getattr(model_config, n, None) for n in model_option_names()}
    decoder = getattr(model_config, "decoder", None)
    encoder = getattr(model_config, "encoder", None)
    if getattr(decoder, "global_attention_function", None) not in (None, "softmax"):
        values["global_attention_function"] = decoder.global_attention_function
    values["generator_function"] = values["generator_function"] or "softmax"
    values["attention_function"] = values["attention_function"] or "softmax"
    values["global_attention_function"] = values["global_attention_function"] or "softmax"
    values["encoder_type"] = getattr(encoder, "encoder_type", "")
    values["decoder_type"] = getattr(decoder, "decoder_type", "")
    values["model_task"] = "seq2seq" if encoder is not None else "lm"  # (a decoder alone has no context attention)
    return SimpleNamespace(**values)


def check_model_config(model_config) -> None:
    """``validate_entmax_opts`` of a model config, as a one-line ``ConfigError``."""
    try:
        validate_entmax_opts(flat_options(model_config))
    except EntmaxOptionError as err:
        raise ConfigError(f"model: {err}") from None


def check_train_config(config) -> list[str]:
    """What OpenNMT-py's ``validate_train_opts`` refuses, by the same shared checks: training.label_smoothing in
    [0, 1); a sparse function for an attention the model does not have (a ``ConfigError``); an alpha, tau or
    bisect_iter the model ignores (a warning, returned). A ``train_from`` run keeps its checkpoint's model."""
    try:
        check_label_smoothing(getattr(getattr(config, "training", None), "label_smoothing", None),
                              "training.label_smoothing")
        if getattr(config, "model", None) is None or getattr(getattr(config, "training", None), "train_from", None):
            return []
        return check_applicable(flat_options(config.model), where="model: ", warn=lambda m: eole_logger().warning(m))
    except EntmaxOptionError as err:
        raise ConfigError(str(err)) from None


def check_predict_config(config) -> None:
    """beam_size and n_best >= 1; the decoding options against the checkpoint's output layer, before any weight
    is loaded."""
    model = getattr(config, "model", None)
    try:
        check_search_sizes(config)
        if model is not None:
            DecodingConfig.from_opts(config, [generator_transformation(flat_options(model))])
    except ValueError as err:
        raise ConfigError(str(err)) from None


# --- one-line errors ----------------------------------------------------------------------------------
def _known_keys() -> list:
    """Every key of every Eole config section (ours included): where a misspelling's match is found."""
    from eole.config.config import Config

    keys = set()
    for cls in family(Config):
        keys.update(cls.__pydantic_fields__)
    return sorted(keys)


def _sections_of(key: str) -> list:
    """The config sections that have a key ``key``: "" (the top level), "training", "model"."""
    from eole.config import models, run, training

    where = {"": [run.TrainConfig, run.PredictConfig], "training": family(training.TrainingConfig),
             "model": family(models.BaseModelConfig)}
    return [section for section, classes in where.items() if any(key in c.__pydantic_fields__ for c in classes)]


def _section_name(section: str) -> str:
    return f"{section}: section" if section else "top level"


def describe(err: ValidationError, known: Callable[[], list] = lambda: model_option_names()) -> str:
    """One line for a pydantic error: ``model.generator_alpha: Input should be ... (got 0.5)``, with a
    suggestion for an unknown key."""
    parts = []
    for e in err.errors():
        loc = [str(x) for x in e.get("loc", ()) if "[" not in str(x)]
        path = ".".join(_drop_tags(loc))
        if e.get("type") == "extra_forbidden":
            key = str(loc[-1]) if loc else ""
            elsewhere = [s for s in _sections_of(key) if s != (loc[0] if len(loc) > 1 else "")]
            close = difflib.get_close_matches(key, known(), n=1, cutoff=0.75)
            hint = (f"; it belongs in the {' or '.join(map(_section_name, elsewhere))}" if elsewhere
                    else f"; did you mean '{close[0]}'?" if close else "")
            parts.append(f"{path}: unknown option{' here' if elsewhere else ''}{hint}")
        else:
            parts.append(f"{path}: {e.get('msg')} (got {e.get('input')!r})")
    return "; ".join(parts)


def _union_tags() -> set:
    """The labels pydantic puts in an error's location for the member of a union it tried: the
    architecture / encoder_type / decoder_type of Eole's model configs, and plain type names."""
    from eole.config import models

    tags = {"float", "int", "str", "bool", "none"}
    for base, field in ((models.BaseModelConfig, "architecture"), (models.EncoderConfig, "encoder_type"),
                        (models.DecoderConfig, "decoder_type")):
        for cls in family(base):
            info = cls.__pydantic_fields__.get(field)
            tags.update(getattr(info.annotation, "__args__", ()) if info is not None else ())
    return {t for t in tags if isinstance(t, str)}


def _drop_tags(loc: list) -> list:
    """Error locations name the union member they tried (``model.rnn.generator_alpha``): keep the keys."""
    tags = _union_tags()
    return [x for i, x in enumerate(loc) if not (i > 0 and x in tags)]


def wrap_build_config(upstream: Callable) -> Callable:
    """``RunBin.build_config`` (``eole train`` / ``predict`` / ``build_vocab``): every config error as one line
    naming the option, and the model's cross-option checks. The rows stacked on it in patches.py
    (``wrap_config_check``) check the rest, in table order."""

    def build_config(cls, args):
        try:
            config = upstream(cls, args)
        except ValidationError as err:
            where = f"{args.config}: " if getattr(args, "config", None) else ""
            raise ConfigError(where + describe(err, _known_keys)) from None
        if getattr(config, "model", None) is not None:
            check_model_config(config.model)
        return config

    return build_config


def wrap_config_check(upstream: Callable, check: Callable[[object], None]) -> Callable:
    """``RunBin.build_config`` of a row stacked on ``wrap_build_config``'s: the config built and checked by the
    rows below this one, then ``check(config)``, one feature's refusals: the first refusal in table order ends
    the command."""

    def build_config(cls, args):
        config = upstream(cls, args)
        check(config)
        return config

    return build_config


def check_command_config(config) -> None:
    """The checks of the command a config is for: ``eole predict``'s files and decoding options; ``eole
    train``'s (and ``build_vocab``'s) training options and files."""
    if hasattr(config, "entmax_report"):
        check_predict_files(config)
        check_predict_config(config)
    else:
        check_train_config(config)
        check_train_files(config)
