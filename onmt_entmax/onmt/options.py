"""The "Entmax" option group of ``onmt_train`` / ``onmt_translate``, rendered from the option table.

Each row of ``onmt_entmax.options.OPTIONS`` that OpenNMT-py has becomes one argparse option, by its
section: ``model`` rows join ``onmt.opts.model_opts`` (so they are saved in every checkpoint, and
``ckpt_model_opts`` gives stock checkpoints their defaults), ``training`` rows the training options and
``decoding`` rows ``onmt_translate``'s. A ``stock`` row (``generator_function``,
``global_attention_function``) is the upstream option extended in place (more choices, new help) and
moved into the group. ``onmt_translate`` gets the model rows with an ``override_help`` as optional
overrides of the checkpoint's values.
"""
from __future__ import annotations

import difflib
import re
from typing import Iterable, Optional

from onmt_entmax.options import OPTIONS, Option, model_option_names, of_toolkit

GROUP = "Entmax"


def _find_action(parser, dest: str):
    for action in parser._actions:
        if action.dest == dest:
            return action
    return None


def _move_to_group(parser, action, group) -> None:
    for g in parser._action_groups:
        if action in g._group_actions:
            g._group_actions.remove(action)
    group._group_actions.append(action)


def _entmax_group(parser):
    for g in parser._action_groups:
        if g.title == GROUP:
            return g
    return parser.add_argument_group(GROUP, "Sparse transformations (onmt-entmax): output layer, loss and "
                                            "attention. Stored in the checkpoint.")


def argparse_spec(option: Option, override: bool = False) -> dict:
    """The keyword arguments of ``parser.add`` for ``option`` (as an ``onmt_translate`` override of the
    checkpoint's value when ``override``: default None, the override's help)."""
    help_ = option.override_help if override else option.help_for("onmt")
    if option.type is bool:
        return dict(action="store_true", help=help_)
    spec = dict(type=option.text_type(), default=None if override else option.default, help=help_)
    if option.choices is not None:
        spec["choices"] = option.choice_names()
    return spec


def _add(group, option: Option, override: bool = False) -> None:
    group.add(f"--{option.name}", f"-{option.name}", **argparse_spec(option, override))


def _add_section(parser, section: str) -> None:
    """The rows of ``section`` into the Entmax group of ``parser``: the stock ones first (the upstream
    option widened and moved into the group; declared where the parser lacks it), then the others."""
    group = _entmax_group(parser)
    rows = of_toolkit(OPTIONS, "onmt", section)
    for option in (o for o in rows if o.stock):
        action = _find_action(parser, option.name)
        if action is None:  # a parser without the stock option: declare it
            action = group.add(f"--{option.name}", f"-{option.name}", type=option.text_type(), default=option.default)
        action.choices = argparse_spec(option)["choices"]
        action.help = option.help_for("onmt")
        _move_to_group(parser, action, group)
    for option in (o for o in rows if not o.stock):
        _add(group, option)


def add_model_options(parser) -> None:
    """Add the Entmax group to a parser that already has the stock ``model_opts``."""
    _add_section(parser, "model")


def add_training_options(parser) -> None:
    """The training rows, into the Entmax group."""
    _add_section(parser, "training")


def add_decoding_options(parser) -> None:
    """The sparse decoding / analysis options (idempotent)."""
    if _find_action(parser, "enumerate_support") is None:
        _add_section(parser, "decoding")


def translate_option_names() -> list[str]:
    """Model options ``onmt_translate`` may override (learn_alpha changes parameters: not overridable)."""
    return [o.name for o in of_toolkit(OPTIONS, "onmt", "model") if o.override_help is not None]


def add_translate_options(parser) -> None:
    """Optional overrides of the checkpoint's Entmax options at translation time (default: the model's)."""
    group = _entmax_group(parser)
    for option in of_toolkit(OPTIONS, "onmt", "model"):
        if option.override_help is not None and _find_action(parser, option.name) is None:
            _add(group, option, override=True)


_HINTS = re.compile(r"entmax|sparsemax|alpha|tau|bisect|attention_f|generator_")


def _unknown_names(unknown: Iterable[str]) -> list[str]:
    names = []
    for arg in unknown:
        if arg.startswith("-") and not re.fullmatch(r"-\d.*", arg):
            names.append(arg.lstrip("-").split("=", 1)[0])
    return names


def check_unknown(unknown: Iterable[str], known: Optional[Iterable[str]] = None) -> None:
    """Raise on an unknown option that looks like one of ours (stock ``onmt_train`` ignores it silently).

    ``known``: the parser's option names, so that e.g. ``-coverage_attn`` never counts as a typo.
    """
    ours = model_option_names()
    known = set(known or ())
    for name in _unknown_names(unknown):
        if name in known:
            continue
        close = difflib.get_close_matches(name, ours, n=1, cutoff=0.75)
        if close or _HINTS.search(name):
            hint = f"; did you mean '{close[0]}'?" if close else f"; Entmax options are: {', '.join(ours)}"
            raise ValueError(f"unknown option '{name}'{hint}")


# --- wrappers installed by patches.py ----------------------------------------------------------
def wrap_error(upstream):
    """``onmt.utils.parse.ArgumentParser.error`` (``onmt_train``, ``onmt_translate``, ``onmt_build_vocab``):
    a usage error (an unknown or misspelled key, a bad choice, a missing option) is one line and exit
    status 2; upstream prints the whole usage first, some 200 lines above the error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())} (-h lists the options)\n")

    return error


def wrap_model_opts(upstream):
    def model_opts(parser):
        upstream(parser)
        add_model_options(parser)

    return model_opts


def wrap_train_opts(upstream):
    """``onmt.opts._add_train_general_opts``: the training rows of the table join the Entmax group."""

    def _add_train_general_opts(parser):
        upstream(parser)
        add_training_options(parser)

    return _add_train_general_opts


def wrap_translate_opts(upstream):
    def translate_opts(parser, *args, **kwargs):
        upstream(parser, *args, **kwargs)
        add_translate_options(parser)

    return translate_opts


def wrap_parse_known_args(upstream):
    """``onmt.utils.parse.ArgumentParser.parse_known_args``: refuse misspelled Entmax options."""

    def parse_known_args(self, *args, **kwargs):
        opt, unknown = upstream(self, *args, **kwargs)
        known = {a.dest for a in self._actions}
        if unknown and "generator_tau" in known:  # a parser that carries our options
            try:
                check_unknown(unknown, known)
            except ValueError as err:
                self.error(str(err))
        return opt, unknown

    return parse_known_args
