"""Our options in Eole's pydantic configs, rendered from the option table: the same names and values as
in OpenNMT-py YAML.

Eole's configs forbid unknown keys (``extra="forbid"``) and type ``generator_function`` /
``global_attention_function`` as ``Literal["softmax", "sparsemax"]``. ``extend_configs`` turns each row of
``onmt_entmax.options.OPTIONS`` that Eole has into a field, by its section: ``model`` rows into every model
config (``model:`` section; a row ``on_decoder``, the model-level ``global_attention_function``, also into
every decoder config, from which the RNN decoder builds its attention, and reaches it as Eole's other
model-level fields do), ``training`` rows into ``TrainingConfig`` (``training:`` section), ``decoding`` rows
into ``PredictConfig``; a ``stock`` row's field replaces Eole's (the ``Literal`` widened to the registry's
names). Then it rebuilds the pydantic schemas that embed them. A field's type refuses what the row does not
take: a name outside ``choices``, a number below ``minimum`` or not finite, a YAML boolean where a number
belongs. The checks across options are in ``validation.py``.
"""
from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BeforeValidator, Field, Strict, create_model
from pydantic.fields import FieldInfo

from onmt_entmax.options import OPTIONS, Option, of_toolkit


def _not_a_bool(value):
    """pydantic's lax mode reads YAML ``true`` as 1 / 1.0 (an alpha of softmax, one bisection step);
    OpenNMT-py refuses it as a number: refuse it here too."""
    if isinstance(value, bool):
        raise ValueError(f"a number is expected, not the boolean {str(value).lower()}")
    return value


NoBool = BeforeValidator(_not_a_bool)


def field_type(option: Option) -> object:
    """The pydantic type of ``option``: a ``Literal`` of its choices; a number with its bounds (finite, at least
    ``minimum``) that takes no boolean (``strict``: nothing but an ``int``); or one of its ``words``; Optional
    where the default is None."""
    if option.choices is not None:
        kind = Literal[tuple(option.choice_names())]
    elif option.type in (int, float):
        bounds = {"ge": option.minimum} if option.minimum is not None else {}
        if option.type is float:
            bounds["allow_inf_nan"] = False
        meta = ([Field(**bounds)] if bounds else []) + [Strict() if option.strict else NoBool]
        kind = Annotated[(option.type, *meta)]
    else:
        kind = option.type
    if option.words:
        kind = Union[kind, Literal[option.words]]
    return kind if option.default is not None else Optional[kind]


def fields(section: str) -> dict[str, FieldInfo]:
    """pydantic ``FieldInfo`` of each row of ``section`` that Eole has, in table order."""
    spec = {o.name: (field_type(o), Field(default=o.default, description=o.help_for("eole")))
            for o in of_toolkit(OPTIONS, "eole", section)}
    return dict(create_model(f"Entmax{section.title()}Options", **spec).__pydantic_fields__)


def family(cls: type) -> list:
    """``cls`` and all its subclasses, parents first."""
    out = [cls]
    for sub in cls.__subclasses__():
        out += [c for c in family(sub) if c not in out]
    return out


def extend_configs() -> None:
    """Add our fields to Eole's config classes and rebuild every schema that embeds them (idempotent)."""
    from eole.config import models, run, training

    model = fields("model")
    if "generator_alpha" in models.BaseModelConfig.__pydantic_fields__:
        return
    trainings, train_options = family(training.TrainingConfig), fields("training")
    for cls in trainings:
        cls.__pydantic_fields__.update(train_options)
    decoders = family(models.DecoderConfig)
    on_decoder = {o.name: model[o.name] for o in of_toolkit(OPTIONS, "eole", "model") if o.on_decoder}
    for cls in decoders:
        cls.__pydantic_fields__.update(on_decoder)
    model_configs = family(models.BaseModelConfig)
    for cls in model_configs:
        cls.__pydantic_fields__.update(model)
    run.PredictConfig.__pydantic_fields__.update(fields("decoding"))
    for cls in trainings + decoders + model_configs + [run.TrainConfig, run.PredictConfig]:
        cls.model_rebuild(force=True)
    models.build_model_config.__self__.rebuild(force=True)  # the TypeAdapter of the ModelConfig union
