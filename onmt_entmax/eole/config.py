"""Our options in Eole's pydantic configs: the same names and values as in OpenNMT-py YAML.

Eole's configs forbid unknown keys (``extra="forbid"``) and type ``generator_function`` /
``global_attention_function`` as ``Literal["softmax", "sparsemax"]``. ``extend_configs`` adds the model
options (``onmt_entmax.options.model``) as fields of every model config (``model:`` section; the
model-level ``global_attention_function`` reaches the RNN decoder as Eole's other model-level fields
do), widens the two stock ``Literal``s to the registry's names, adds the decoding options to
``PredictConfig`` and the training options ``shuffle_each_pass``, ``rnn_cuda_graphs``,
``valid_lr_halving``, ``valid_lr_halving_every`` and ``adam_fused`` to ``TrainingConfig``, and rebuilds the pydantic
schemas that embed them. Unknown or misspelled keys are still refused; the field types
refuse bad values (a name not in the registry, alpha < 1, a tau that is neither a number nor
auto/formula, a YAML boolean where a number belongs). Cross-option checks (``validate_entmax_opts``) run when
a run's config is built (``wrap_build_config``) and again when a model is built; a training run's config also
gets OpenNMT-py's training checks (``check_train_config``: options the model would not use), a predict
config its search sizes, all from the shared code of ``onmt_entmax.options.model``. A config error is one line:
the option's path, what is wrong and, for an unknown key, the closest known one.
"""
from __future__ import annotations

import difflib
from types import SimpleNamespace
from typing import Annotated, Callable, Literal, Optional, Union

from pydantic import BeforeValidator, Field, ValidationError, create_model

from onmt_entmax.errors import ConfigError, EntmaxOptionError
from onmt_entmax.training import data_order
from onmt_entmax.options.decoding import DECODING_OPTIONS, DecodingConfig
from onmt_entmax.options.model import (ATTENTION_KINDS, check_applicable, check_label_smoothing,
                                       check_search_sizes, generator_transformation, model_option_help,
                                       model_option_names, validate_entmax_opts)
from onmt_entmax.registry import transformation_names

from . import adam_fused, cuda_graphs, lr_halving
from .files import check_predict_files, check_train_files
from .training import eole_logger



def _not_a_bool(value):
    """pydantic's lax mode reads YAML ``true`` as 1 / 1.0 (an alpha of softmax, one bisection step);
    OpenNMT-py refuses it as a number: refuse it here too."""
    if isinstance(value, bool):
        raise ValueError(f"a number is expected, not the boolean {str(value).lower()}")
    return value


NoBool = BeforeValidator(_not_a_bool)
Alpha = Optional[Annotated[float, Field(ge=1.0, allow_inf_nan=False), NoBool]]


def _literal(names: list) -> object:
    return Literal[tuple(names)]


def model_fields() -> dict:
    """pydantic ``FieldInfo`` of each model option, built from the registry and the shared help."""
    help_ = model_option_help()
    names, attn = _literal(transformation_names()), _literal(transformation_names(for_attention=True))
    spec: dict = {
        "generator_function": (names, "softmax"),
        "generator_alpha": (Alpha, None),
        "generator_tau": (Optional[Union[Annotated[float, Field(allow_inf_nan=False), NoBool],
                                         Literal["auto", "formula"]]], None),
        "bisect_iter": (Optional[Annotated[int, Field(ge=1), NoBool]], None),
        "global_attention_function": (attn, "softmax"),
        "global_attention_alpha": (Alpha, None),
        "attention_function": (attn, "softmax"),
        "attention_alpha": (Alpha, None),
        "learn_alpha": (bool, False),
    }
    for kind in ATTENTION_KINDS:
        spec[f"{kind}_attention_function"] = (Optional[attn], None)
        spec[f"{kind}_attention_alpha"] = (Alpha, None)
    assert set(spec) == set(model_option_names())
    made = create_model("EntmaxModelOptions", **{n: (t, Field(default=d, description=help_[n]))
                                                   for n, (t, d) in spec.items()})
    return dict(made.__pydantic_fields__)


def decoding_fields() -> dict:
    """pydantic ``FieldInfo`` of each decoding / analysis option of ``eole predict``."""
    def typed(o):  # (a number option takes no boolean, as for the model options)
        t = Annotated[o.type, NoBool] if o.type in (int, float) else o.type
        return t if o.default is not None else Optional[t]

    spec = {o.name: (typed(o), Field(default=o.default, description=o.help)) for o in DECODING_OPTIONS}
    return dict(create_model("EntmaxDecodingOptions", **spec).__pydantic_fields__)


def training_fields() -> dict:
    """pydantic ``FieldInfo`` of our training options (``training:`` section)."""
    made = create_model("EntmaxTrainingOptions",
                        shuffle_each_pass=(bool, Field(default=False, description=data_order.HELP)),
                        rnn_cuda_graphs=(bool, Field(default=False, description=cuda_graphs.HELP)),
                        **lr_halving.fields(), **adam_fused.fields())
    return dict(made.__pydantic_fields__)


def _family(cls: type) -> list:
    """``cls`` and all its subclasses, parents first."""
    out = [cls]
    for sub in cls.__subclasses__():
        out += [c for c in _family(sub) if c not in out]
    return out


def extend_configs() -> None:
    """Add our fields to Eole's config classes and rebuild every schema that embeds them (idempotent)."""
    from eole.config import models, run, training

    model = model_fields()
    if "generator_alpha" in models.BaseModelConfig.__pydantic_fields__:
        return
    trainings, train_options = _family(training.TrainingConfig), training_fields()
    for cls in trainings:
        cls.__pydantic_fields__.update(train_options)
    decoders = _family(models.DecoderConfig)
    for cls in decoders:  # the RNN decoder builds its GlobalAttention from its own copy
        cls.__pydantic_fields__["global_attention_function"] = model["global_attention_function"]
    model_configs = _family(models.BaseModelConfig)
    for cls in model_configs:
        cls.__pydantic_fields__.update(model)
    run.PredictConfig.__pydantic_fields__.update(decoding_fields())
    for cls in trainings + decoders + model_configs + [run.TrainConfig, run.PredictConfig]:
        cls.model_rebuild(force=True)
    models.build_model_config.__self__.rebuild(force=True)  # the TypeAdapter of the ModelConfig union


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
    for cls in _family(Config):
        keys.update(cls.__pydantic_fields__)
    return sorted(keys)


def _sections_of(key: str) -> list:
    """The config sections that have a key ``key``: "" (the top level), "training", "model"."""
    from eole.config import models, run, training

    where = {"": [run.TrainConfig, run.PredictConfig], "training": _family(training.TrainingConfig),
             "model": _family(models.BaseModelConfig)}
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
        for cls in _family(base):
            info = cls.__pydantic_fields__.get(field)
            tags.update(getattr(info.annotation, "__args__", ()) if info is not None else ())
    return {t for t in tags if isinstance(t, str)}


def _drop_tags(loc: list) -> list:
    """Error locations name the union member they tried (``model.rnn.generator_alpha``): keep the keys."""
    tags = _union_tags()
    return [x for i, x in enumerate(loc) if not (i > 0 and x in tags)]


def wrap_build_config(upstream: Callable) -> Callable:
    """``RunBin.build_config`` (``eole train`` / ``predict`` / ``build_vocab``): our cross-option checks on
    the built config, and every config error as one line naming the option."""

    def build_config(cls, args):
        try:
            config = upstream(cls, args)
        except ValidationError as err:
            where = f"{args.config}: " if getattr(args, "config", None) else ""
            raise ConfigError(where + describe(err, _known_keys)) from None
        if getattr(config, "model", None) is not None:
            check_model_config(config.model)
            cuda_graphs.check(config)
        lr_halving.check(config)
        adam_fused.check(config)
        if hasattr(config, "entmax_report"):
            check_predict_files(config)
            check_predict_config(config)
        else:
            check_train_config(config)
            check_train_files(config)
        return config

    return build_config
