"""Checks of the Entmax options (``options.model``), run by ``validate_model_opts`` before any model is built,
``validate_train_opts`` (training) and ``validate_translate_opts`` (before the model loads)."""
from __future__ import annotations

from typing import Callable, Optional

from onmt_entmax.errors import EntmaxOptionError
from onmt_entmax.options.model import (
    attention_spec,
    check_label_smoothing,
    check_search_sizes,
    inapplicable_options,
    validate_entmax_opts,
)
from onmt_entmax.options.model import check_applicable as refuse_inapplicable

__all__ = ["EntmaxOptionError", "attention_spec", "check_applicable", "check_training_opts", "inapplicable_options",
           "validate_entmax_opts", "wrap_get_model_opts", "wrap_validate_model_opts", "wrap_validate_train_opts",
           "wrap_validate_translate_opts"]


def wrap_validate_train_opts(upstream, check: Callable[[object], None]):
    """``ArgumentParser.validate_train_opts`` (classmethod, training only): what it checked before (stock, then
    the rows of patches.py stacked below this one), then ``check(opt)``, one feature's refusals: the rows'
    checks run in table order and the first refusal ends the run."""

    def validate_train_opts(cls, opt):
        upstream(cls, opt)
        check(opt)

    return validate_train_opts


def wrap_validate_model_opts(upstream):
    """``ArgumentParser.validate_model_opts`` (classmethod): stock checks, then ours."""

    def validate_model_opts(cls, model_opt):
        upstream(cls, model_opt)
        validate_entmax_opts(model_opt)

    return validate_model_opts


def wrap_validate_translate_opts(upstream):
    """``ArgumentParser.validate_translate_opts`` (classmethod): stock checks, then beam_size and n_best >= 1
    (upstream's beam search fails on less with a traceback), before the model loads."""

    def validate_translate_opts(cls, opt):
        upstream(cls, opt)
        check_search_sizes(opt)

    return validate_translate_opts


# --- options that would be ignored (``options.model.inapplicable_options``) -----------------------
def check_applicable(opt, names: Optional[set] = None, where: str = "") -> list[str]:
    """``options.model.check_applicable`` with OpenNMT-py's logger: raise for an ignored sparse function;
    log (and return) a warning for each ignored parameter."""
    from onmt.utils.logging import logger

    return refuse_inapplicable(opt, names, where, lambda message: logger.warning("%s", message))


def check_training_opts(opt) -> None:
    """Training-only checks (``validate_train_opts``): label_smoothing in [0, 1); options the new model
    would ignore; a ``-train_from`` run takes the checkpoint's model options (compared in
    ``wrap_get_model_opts``)."""
    check_label_smoothing(getattr(opt, "label_smoothing", None))
    if getattr(opt, "train_from", None) and not getattr(opt, "override_opts", False):
        return
    check_applicable(opt)


# --- -train_from: the checkpoint's model options win -------------------------------------------
_IGNORED_IN_COMPARISON = {"update_vocab", "freeze_encoder", "freeze_decoder", "tensorboard_log_dir_dated"}
# options upstream's update_model_opts sets from another one: named only when that one is not
_DERIVED = {"enc_hid_size": "hidden_size", "dec_hid_size": "hidden_size", "enc_layers": "layers",
            "dec_layers": "layers", "src_word_vec_size": "word_vec_size", "tgt_word_vec_size": "word_vec_size",
            "brnn": "encoder_type"}


def _option_defaults(add_options) -> dict:
    """{name: default} of the options ``add_options(parser)`` adds to a fresh OpenNMT-py parser."""
    from onmt.utils.parse import ArgumentParser

    parser = ArgumentParser(description="options")
    add_options(parser)
    return {a.dest: a.default for a in parser._actions if a.dest != "help"}


def model_option_defaults() -> dict:
    """{name: default} of every option of ``onmt.opts.model_opts`` (stock and ours)."""
    import onmt.opts

    return _option_defaults(onmt.opts.model_opts)


# training options that upstream builds the model's modules from, so that -train_from takes the
# checkpoint's values for them as for the model options
BUILT_FROM_TRAINING_OPTIONS = ("dropout", "attention_dropout", "embeddings_dropout")


def built_from_training_defaults() -> dict:
    """{name: default} of ``BUILT_FROM_TRAINING_OPTIONS`` (``onmt.opts._add_train_general_opts``)."""
    import onmt.opts

    defaults = _option_defaults(onmt.opts._add_train_general_opts)
    return {name: defaults[name] for name in BUILT_FROM_TRAINING_OPTIONS}


def overridden_by_checkpoint(opt, model_opt) -> list[tuple[str, object, object]]:
    """(name, value given, checkpoint's value) for each model option (or training option the model is
    built from) set away from its default and different from the checkpoint's: what a ``-train_from``
    run ignores."""
    out = []
    for name, default in sorted({**model_option_defaults(), **built_from_training_defaults()}.items()):
        if name in _IGNORED_IN_COMPARISON or not hasattr(opt, name):
            continue
        mine, theirs = getattr(opt, name), getattr(model_opt, name, default)
        if mine != default and mine != theirs:
            out.append((name, mine, theirs))
    named = {n for n, _, _ in out}
    return [o for o in out if _DERIVED.get(o[0]) not in named]


def wrap_get_model_opts(upstream):
    """``train_single._get_model_opts``: with ``-train_from`` (no ``-override_opts``) upstream takes
    the checkpoint's model options and drops the config's without a word; name what it drops."""

    def _get_model_opts(opt, checkpoint=None):
        model_opt = upstream(opt, checkpoint=checkpoint)
        if checkpoint is not None and not getattr(opt, "override_opts", False):
            dropped = overridden_by_checkpoint(opt, model_opt)
            if dropped:
                from onmt.utils.logging import logger

                logger.warning("-train_from uses the checkpoint's model options; these given ones are ignored "
                               "(-override_opts would use them): "
                               + ", ".join(f"{n}={v!r} (checkpoint: {c!r})" for n, v, c in dropped))
        return model_opt

    return _get_model_opts
