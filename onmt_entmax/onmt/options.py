"""The "Entmax" option group of ``onmt_train`` / ``onmt_translate``, generated from the registry.

Model options go into ``onmt.opts.model_opts`` (so they are saved in every checkpoint, and
``ckpt_model_opts`` gives stock checkpoints their defaults). The two stock options
``generator_function`` and ``global_attention_function`` are extended in place (more choices,
new help) and moved into the group. ``onmt_translate`` gets the same names as optional overrides.
"""
from __future__ import annotations

import difflib
import re
from typing import Iterable, Optional

from onmt_entmax.options.model import ATTENTION_KINDS, model_option_help, model_option_names, tau_value
from onmt_entmax.registry import transformation_names

GROUP = "Entmax"
STOCK_OPTIONS = ("generator_function", "global_attention_function")


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


def add_model_options(parser) -> None:
    """Add the Entmax group to a parser that already has the stock ``model_opts``."""
    group = _entmax_group(parser)
    names = transformation_names()
    attn_names = transformation_names(for_attention=True)
    text = model_option_help()
    for dest, choices in (("generator_function", names), ("global_attention_function", attn_names)):
        action = _find_action(parser, dest)
        if action is None:  # a parser without the stock option: declare it
            action = group.add(f"--{dest}", f"-{dest}", type=str, default="softmax")
        action.choices = choices
        action.help = text[dest]
        _move_to_group(parser, action, group)

    group.add("--generator_alpha", "-generator_alpha", type=float, default=None, help=text["generator_alpha"])
    group.add("--generator_tau", "-generator_tau", type=tau_value, default=None, help=text["generator_tau"])
    group.add("--bisect_iter", "-bisect_iter", type=int, default=None, help=text["bisect_iter"])
    group.add("--global_attention_alpha", "-global_attention_alpha", type=float, default=None,
              help=text["global_attention_alpha"])
    group.add("--attention_function", "-attention_function", type=str, default="softmax", choices=attn_names,
              help=text["attention_function"])
    group.add("--attention_alpha", "-attention_alpha", type=float, default=None, help=text["attention_alpha"])
    group.add("--learn_alpha", "-learn_alpha", action="store_true", help=text["learn_alpha"])
    for kind in ATTENTION_KINDS:
        group.add(f"--{kind}_attention_function", f"-{kind}_attention_function", type=str, default=None,
                  choices=attn_names, help=text[f"{kind}_attention_function"])
        group.add(f"--{kind}_attention_alpha", f"-{kind}_attention_alpha", type=float, default=None,
                  help=text[f"{kind}_attention_alpha"])


def translate_option_names() -> list[str]:
    """Model options ``onmt_translate`` may override (learn_alpha changes parameters: not overridable)."""
    return [n for n in model_option_names() if n != "learn_alpha"]


def add_translate_options(parser) -> None:
    """Optional overrides of the checkpoint's Entmax options at translation time (default: the model's)."""
    group = _entmax_group(parser)
    attn_names = transformation_names(for_attention=True)
    for name in translate_option_names():
        if _find_action(parser, name) is not None:
            continue
        if name.endswith("_function"):
            choices = transformation_names() if name == "generator_function" else attn_names
            group.add(f"--{name}", f"-{name}", type=str, default=None, choices=choices,
                      help=f"Override the model's {name} (default: the value stored in the checkpoint).")
        elif name == "generator_tau":
            group.add(f"--{name}", f"-{name}", type=tau_value, default=None,
                      help="Override the model's alpha_relu threshold (default: the checkpoint's).")
        elif name == "bisect_iter":
            group.add(f"--{name}", f"-{name}", type=int, default=None,
                      help="Override the model's bisection iterations (default: the checkpoint's).")
        else:
            group.add(f"--{name}", f"-{name}", type=float, default=None,
                      help=f"Override the model's {name} (default: the checkpoint's).")


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


def wrap_train_opts(upstream, *adders):
    """``onmt.opts._add_train_general_opts``: the training options of the plugin's modules (``adders``:
    functions that add options to a group) join the Entmax group."""

    def _add_train_general_opts(parser):
        upstream(parser)
        for add in adders:
            add(_entmax_group(parser))

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
