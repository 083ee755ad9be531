"""One row per option of the plugin, the declaration both adapters render: ``Option``.

A row says what a user sees of an option in either toolkit: its name, its value's type and default, the
values it may take (``choices``, ``minimum``, ``words``) and its help; ``section`` says which part of a run
it belongs to: ``model`` (saved with the model: OpenNMT-py's ``model_opts``, Eole's ``model:`` section),
``training`` (OpenNMT-py's training options, Eole's ``training:`` section) or ``decoding`` (``onmt_translate``,
Eole's predict config). The remaining columns are where the toolkits differ. ``onmt_entmax.onmt.options``
turns the rows into the argparse group "Entmax", ``onmt_entmax.eole.options`` into pydantic fields; neither
repeats a name, type, default or help text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence, Union

SECTIONS = ("model", "training", "decoding")
TOOLKITS = ("onmt", "eole")

Text = Union[str, Callable[[], str]]  # a callable: text drawn from the registry when the option is rendered
Names = Union[Sequence[str], Callable[[], Sequence[str]]]


@dataclass(frozen=True)
class Option:
    name: str
    type: type  # bool (a flag, default False), int, float or str
    default: object
    help: Text
    section: str  # one of SECTIONS
    choices: Optional[Names] = None  # the values a str option takes (a callable: the registry's names)
    minimum: Optional[float] = None  # the least value a number takes (Eole's field refuses less; OpenNMT-py's checks)
    words: tuple = ()  # besides a number, these words (generator_tau: auto, formula)
    strict: bool = False  # a typed config gives a value of exactly this type (no 2.0 or "2" for an int)
    toolkits: tuple = TOOLKITS  # the toolkits that have the option
    toolkit_help: Mapping[str, str] = field(default_factory=dict)  # per toolkit, where the help differs
    stock: bool = False  # an upstream option of that name that we widen (more choices, our help)
    on_decoder: bool = False  # Eole: also a field of each decoder config (the RNN decoder reads its own copy)
    override_help: Optional[str] = None  # onmt_translate takes it as an override of the checkpoint's value

    def help_for(self, toolkit: str) -> str:
        """The help text ``toolkit`` shows."""
        text = self.toolkit_help.get(toolkit, self.help)
        return text() if callable(text) else text

    def choice_names(self) -> Optional[list[str]]:
        """The values the option takes, or None where any value of its type does."""
        if self.choices is None:
            return None
        return list(self.choices() if callable(self.choices) else self.choices)

    def text_type(self) -> Callable[[str], object]:
        """A command line's text to the value: the type itself, or a number-or-word parser for ``words``."""
        if not self.words:
            return self.type
        words, name = self.words, self.name

        def number_or_word(text: Union[str, float, None]) -> Union[str, float, None]:
            if text is None or isinstance(text, float):
                return text
            if str(text).strip().lower() in words:
                return str(text).strip().lower()
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"{name} must be a {_alternatives(words)}, got {text!r}") from None
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {text!r}")
            return value

        number_or_word.__name__ = _alternatives(words)  # argparse names the type in its error message
        return number_or_word


def _alternatives(words: Sequence[str]) -> str:
    """``number, 'auto' or 'formula'``."""
    quoted = [f"'{w}'" for w in words]
    return "number, " + (", ".join(quoted[:-1]) + " or " if len(quoted) > 1 else "") + quoted[-1]


def of_toolkit(options: Sequence[Option], toolkit: str, section: Optional[str] = None) -> list[Option]:
    """The rows ``toolkit`` has (of ``section``, when given), in table order."""
    return [o for o in options if toolkit in o.toolkits and (section is None or o.section == section)]
