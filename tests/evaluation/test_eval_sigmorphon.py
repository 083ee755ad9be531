"""SIGMORPHON 2018 format and metrics: the encoding is lossless on the real data, the metrics are the
shared task's (exact match, Levenshtein, unweighted mean over languages)."""
import random
import tarfile
from pathlib import Path

import pytest
from rapidfuzz.distance import Levenshtein as RFLevenshtein

from onmt_entmax.evaluation import sigmorphon as S

ARCHIVE = Path(__file__).resolve().parents[2].parent / "shared/data/sigmorphon2018-task1.tar.gz"


def test_example_line_format():
    src, tgt = S.encode_example("english", "draw", "V;PTCP;PST", "drawn")
    assert src == "english V PTCP PST d r a w"
    assert tgt == "d r a w n"


def test_spaces_underscores_and_other_whitespace_roundtrip():
    for text in ["brochten troch", "se_rčnar", "a\u00a0b", "x  y", "_ _", "<U+005F>"]:
        tokens = S.encode_chars(text)
        line = " ".join(tokens)
        assert line.split() == tokens  # OpenNMT-py's whitespace split gives back exactly these tokens
        assert S.decode_chars(line.split()) == text


@pytest.mark.skipif(not ARCHIVE.exists(), reason="needs ../shared/data/sigmorphon2018-task1.tar.gz")
def test_every_lemma_and_form_of_the_release_roundtrips():
    """Every string of the whole release (all languages, settings, splits) survives encode -> split -> decode.

    The encoding works character by character, so it suffices to check every distinct character alone
    and every string that holds a character needing an escape (whitespace, ``_``) in full."""
    chars: set[str] = set()
    special: set[str] = set()
    bundles: set[str] = set()
    with tarfile.open(ARCHIVE) as tar:
        for m in tar:
            if not m.isfile() or m.name.endswith("covered-test"):
                continue
            for lemma, form, tags in S.read_sigmorphon(tar.extractfile(m).read().decode("utf-8").splitlines()):
                for text in (lemma, form):
                    chars.update(text)
                    if "_" in text or any(c.isspace() for c in text):
                        special.add(text)
                bundles.add(tags)
    assert len(chars) > 500 and " " in chars and "_" in chars and "\u00a0" in chars
    for text in sorted(chars) + sorted(special):
        tokens = " ".join(S.encode_chars(text)).split()
        assert S.decode_chars(tokens) == text, text
    for tags in bundles:
        src, _ = S.encode_example("lang", "x", tags)
        assert src.split()[1:-1] == [t.strip() for t in tags.split(";") if t.strip()], tags


def test_levenshtein_matches_an_independent_implementation():
    rng = random.Random(0)
    assert S.levenshtein("kitten", "sitting") == 3
    for _ in range(300):
        a = "".join(rng.choice("abcд_ ") for _ in range(rng.randint(0, 9)))
        b = "".join(rng.choice("abcд_ ") for _ in range(rng.randint(0, 9)))
        assert S.levenshtein(a, b) == RFLevenshtein.distance(a, b)


def test_language_scores_and_unweighted_average():
    src = ["english V d r a w", "german N H u n d", "german N K a t z e", "german V g e h e n"]
    ref = ["d r a w n", "H u n d e", "K a t z e n", "g i n g"]
    hyp = ["d r a w n", "H u n d", "K a t z e", "g e h t"]
    scores = S.score_multilingual(src, hyp, ref)
    assert scores["english"] == {"accuracy": 100.0, "levenshtein": 0.0, "n": 1}
    assert scores["german"]["accuracy"] == 0.0
    assert scores["german"]["levenshtein"] == pytest.approx((1 + 1 + 3) / 3)
    # the shared task averages languages, not examples: (100 + 0) / 2, not 1/4 correct
    assert scores["average"]["accuracy"] == 50.0
    assert scores["average"]["levenshtein"] == pytest.approx((0 + 5 / 3) / 2)


def test_spaces_in_forms_are_compared_as_spaces():
    scores = S.score_multilingual(["frisian V b r i n g e"], ["b r o c h t _ t r o c h"], ["b r o c h t _ t r o c h"])
    assert scores["average"]["accuracy"] == 100.0


def test_forms_differing_only_in_case_are_wrong():
    """German nouns are capitalized: "hund" for "Hund" is a wrong form (one edit), as in the shared task."""
    scores = S.score_multilingual(["german N H u n d", "german N K a t z e"], ["h u n d", "K a t z e"],
                                  ["H u n d", "K a t z e"])
    assert scores["german"] == {"accuracy": 50.0, "levenshtein": 0.5, "n": 2}


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="line counts differ"):
        S.score_multilingual(["a x"], [], ["x"])
    with pytest.raises(ValueError, match="tab-separated"):
        S.read_sigmorphon(["only-one-column"])
    with pytest.raises(ValueError, match="tag bundle"):
        S.encode_example("english", "draw", "V;P TCP")
