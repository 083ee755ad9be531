"""SIGMORPHON 2018 task 1 (morphological inflection) in OpenNMT-py format, and its metrics.

One example ``lemma<TAB>form<TAB>tags`` becomes

    source: ``lang TAG_1 ... TAG_k c_1 ... c_n``   (tags split on ``;``, lemma split into characters)
    target: ``f_1 ... f_m``                         (form split into characters)

OpenNMT-py splits lines on whitespace, so characters that are whitespace cannot be tokens. The
character encoding is a bijection between strings and token lists:

    " "                      -> SPACE  ("_")
    "_" or any other c.isspace()  -> "<U+XXXX>"  (its code point; multi-character, so it never
                                                  collides with a one-character token)
    any other character c    -> c

Metrics follow the shared task's official evaluation (``evalm.py``): per language, exact-match
accuracy (%) and mean Levenshtein distance between predicted and gold forms; the headline numbers
are their unweighted means over languages.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from typing import Iterable, Mapping, Sequence

SPACE = "_"
_ESCAPED = re.compile(r"^<U\+([0-9A-F]{4,6})>$")


def encode_chars(text: str) -> list[str]:
    """Split ``text`` into character tokens, escaping whitespace and ``_`` (see module docstring)."""
    out = []
    for ch in text:
        if ch == " ":
            out.append(SPACE)
        elif ch == SPACE or ch.isspace():
            out.append(f"<U+{ord(ch):04X}>")
        else:
            out.append(ch)
    return out


def decode_chars(tokens: Iterable[str]) -> str:
    """Inverse of :func:`encode_chars`; tokens that are not characters (e.g. ``<unk>``) are kept."""
    out = []
    for tok in tokens:
        if tok == SPACE:
            out.append(" ")
        elif (m := _ESCAPED.match(tok)) is not None:
            out.append(chr(int(m.group(1), 16)))
        else:
            out.append(tok)
    return "".join(out)


def split_tags(tags: str) -> list[str]:
    """UniMorph feature bundle ``V;PTCP;PST`` -> ``["V", "PTCP", "PST"]`` (the release has a few
    bundles like ``ADJ;ABL; PL``: spaces around a tag are dropped)."""
    parts = [t.strip() for t in tags.split(";") if t.strip()]
    if not parts or any(any(c.isspace() for c in t) for t in parts):
        raise ValueError(f"bad UniMorph tag bundle {tags!r}: expected ';'-separated tags without spaces")
    return parts


def encode_example(lang: str, lemma: str, tags: str, form: str | None = None) -> tuple[str, str | None]:
    """One SIGMORPHON line -> (source line, target line or None if no gold form)."""
    if not lang or any(c.isspace() for c in lang):
        raise ValueError(f"language token {lang!r} must be non-empty without whitespace")
    if not lemma:
        raise ValueError(f"empty lemma for language {lang!r}")
    src = " ".join([lang, *split_tags(tags), *encode_chars(lemma)])
    tgt = None if form is None else " ".join(encode_chars(form))
    return src, tgt


def read_sigmorphon(lines: Iterable[str]) -> list[tuple[str, str | None, str]]:
    """Parse ``lemma<TAB>form<TAB>tags`` (or covered ``lemma<TAB>tags``) -> [(lemma, form, tags)]."""
    out = []
    for i, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) == 3:
            out.append((cols[0], cols[1], cols[2]))
        elif len(cols) == 2:
            out.append((cols[0], None, cols[1]))
        else:
            raise ValueError(f"line {i}: expected 2 or 3 tab-separated columns, got {len(cols)}: {line!r}")
    return out


def language_of(src_line: str) -> str:
    """The language token of an encoded source line (its first token)."""
    return src_line.split(maxsplit=1)[0]


def levenshtein(a: Sequence, b: Sequence) -> int:
    """Edit distance with unit insertion, deletion and substitution costs (two-row DP, O(|a||b|))."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def score_language(predictions: Sequence[str], golds: Sequence[str]) -> dict[str, float]:
    """Accuracy (% exact match) and mean Levenshtein distance over decoded strings of one language."""
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions but {len(golds)} gold forms")
    if not golds:
        raise ValueError("no examples to score")
    n = len(golds)
    acc = 100.0 * sum(p == g for p, g in zip(predictions, golds)) / n
    lev = sum(levenshtein(p, g) for p, g in zip(predictions, golds)) / n
    return {"accuracy": acc, "levenshtein": lev, "n": n}


def score_multilingual(
    src_lines: Sequence[str], hyp_lines: Sequence[str], ref_lines: Sequence[str]
) -> "OrderedDict[str, dict[str, float]]":
    """Per-language scores from encoded files (language read from each source line), plus
    ``"average"``: the unweighted mean over languages of accuracy and Levenshtein distance."""
    if not (len(src_lines) == len(hyp_lines) == len(ref_lines)):
        raise ValueError(
            f"line counts differ: src {len(src_lines)}, hyp {len(hyp_lines)}, ref {len(ref_lines)}"
        )
    groups: dict[str, tuple[list[str], list[str]]] = OrderedDict()
    for s, h, r in zip(src_lines, hyp_lines, ref_lines):
        hyp, ref = groups.setdefault(language_of(s), ([], []))
        hyp.append(decode_chars(h.split()))
        ref.append(decode_chars(r.split()))
    scores = OrderedDict((lang, score_language(h, r)) for lang, (h, r) in groups.items())
    scores["average"] = macro_average(scores)
    return scores


def macro_average(per_language: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Unweighted mean over languages (the shared task's headline numbers)."""
    langs = [v for k, v in per_language.items() if k != "average"]
    if not langs:
        raise ValueError("no languages to average")
    return {
        "accuracy": sum(v["accuracy"] for v in langs) / len(langs),
        "levenshtein": sum(v["levenshtein"] for v in langs) / len(langs),
        "n": sum(v["n"] for v in langs),
    }
