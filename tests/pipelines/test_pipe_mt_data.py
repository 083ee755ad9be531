"""MT data: extraction of the released test sets, and the Moses + subword-nmt recipes."""
import json

import pytest
from sacremoses import MosesTokenizer

from pipeline_helpers import SHARED, load_script, needs_shared

extract = load_script("scripts/data/extract.py")
prep = load_script("scripts/data/prepare_mt.py")
T = SHARED / "mt-testsets"


@needs_shared("mt-testsets", "iwslt17-de-en")
def test_iwslt17_test_sets_are_parallel_plain_text(tmp_path):
    extract.extract_iwslt17(T / "iwslt17-de-en", tmp_path, T / "iwslt17-de-en")
    de = (tmp_path / "test.de").read_text(encoding="utf-8").splitlines()
    en = (tmp_path / "test.en").read_text(encoding="utf-8").splitlines()
    assert len(de) == len(en) == 1138  # tst2017
    assert len((tmp_path / "test2016.de").read_text(encoding="utf-8").splitlines()) == 1133
    assert en[0] == "So this is James Risen."  # <seg id="1"> So this is James Risen.    </seg>
    assert not any("<" in line and ">" in line for line in de + en)  # no markup left
    assert all(line == line.strip() and line for line in de + en)


def test_xml_and_tags_readers():
    xml = '<doc docid="1">\n<url>u</url>\n<seg id="1"> A &amp; B  </seg>\n<seg id="2">C &lt;3</seg>\n</doc>'
    assert extract.xml_segments(xml) == ["A & B", "C <3"]
    tags = "<url>http://x</url>\n<talkid>1</talkid>\n Hello there. \n<description>d</description>\nBye.\n"
    assert extract.tags_file_lines(tags) == ["Hello there.", "Bye."]


@needs_shared("mt-testsets", "iwslt14-de-en")
def test_iwslt14_test_is_the_6750_line_concatenation(tmp_path):
    extract.extract_iwslt14(T / "iwslt14-de-en", tmp_path, T / "iwslt14-de-en")
    assert len((tmp_path / "test.de").read_text(encoding="utf-8").splitlines()) == 6750


@needs_shared("mt-testsets", "kftt")
def test_kftt_keeps_released_tokenization_and_originals(tmp_path):
    extract.extract_kftt(T / "kftt", tmp_path, T / "kftt")
    assert (tmp_path / "test.ja").read_text(encoding="utf-8") == (T / "kftt/kyoto-test.tok.ja").read_text(encoding="utf-8")
    assert (tmp_path / "test.orig.ja").read_text(encoding="utf-8") == (T / "kftt/kyoto-test.ja").read_text(encoding="utf-8")


def _write(d, split, pairs):
    d.mkdir(parents=True, exist_ok=True)
    for lang, lines in pairs.items():
        (d / f"{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")


@needs_shared("multi30k")
def test_multi30k_recipe_bpe_undoes_to_moses_tokens(tmp_path):
    raw = tmp_path / "raw"
    extract.extract_multi30k(SHARED / "multi30k", raw)
    assert len((raw / "train.de").read_text(encoding="utf-8").splitlines()) == 29000
    summary = prep.prepare("multi30k", raw, tmp_path / "out", max_lines=300, merges=200)
    out = tmp_path / "out"
    assert summary["lines"] == {"dev": 300, "test": 300, "train": 300}
    en_raw = (raw / "test.en").read_text(encoding="utf-8").splitlines()[:300]
    tok = (out / "test.tok.en").read_text(encoding="utf-8").splitlines()
    mt = MosesTokenizer(lang="en")
    assert tok == [mt.tokenize(x, escape=False, return_str=True) for x in en_raw]  # sacremoses, no escaping
    for split in ("train", "dev", "test"):
        for lang in ("de", "en"):
            bpe = (out / f"{split}.bpe.{lang}").read_text(encoding="utf-8")
            assert bpe.replace("@@ ", "") == (out / f"{split}.tok.{lang}").read_text(encoding="utf-8")
    assert "@@" in (out / "train.bpe.de").read_text(encoding="utf-8")  # merges < vocabulary: words get split
    assert (out / "test.raw.en").read_text(encoding="utf-8").splitlines() == en_raw
    assert json.loads((out / "prepare.json").read_text())["merges"] == 200


def test_joint_recipe_learns_one_code_file_separate_recipe_two(tmp_path):
    pairs = {"ro": ["Ştiu că ţara e aici .", "Începe în România ."] * 20, "en": ["I know the country is here .", "It starts in Romania ."] * 20}
    for split in ("train", "dev", "test"):
        _write(tmp_path / "raw", split, pairs)
    prep.prepare("wmt16-ro-en", tmp_path / "raw", tmp_path / "ro", merges=20)
    assert (tmp_path / "ro/bpe.codes.ro").exists() and (tmp_path / "ro/bpe.codes.en").exists()
    assert not (tmp_path / "ro/bpe.codes").exists()
    # Sennrich et al. 2016b: cedilla forms normalised, then diacritics removed
    assert (tmp_path / "ro/test.tok.ro").read_text(encoding="utf-8").splitlines()[:2] == ["Stiu ca tara e aici .", "Incepe in Romania ."]
    pairs = {"de": pairs["en"], "en": pairs["en"]}
    for split in ("train", "dev", "test"):
        _write(tmp_path / "raw2", split, pairs)
    prep.prepare("iwslt17-de-en", tmp_path / "raw2", tmp_path / "de", merges=20)
    assert (tmp_path / "de/bpe.codes").exists() and not (tmp_path / "de/bpe.codes.de").exists()


def test_training_pairs_are_cleaned_but_test_pairs_never():
    src, tgt = prep.clean_pairs(["a b", "", "a " * 10, "x"], ["c d", "e", "b", "y " * 4], max_len=8, max_ratio=1.5)
    assert (src, tgt) == (["a b"], ["c d"])


def test_missing_bpe_split_is_named(tmp_path):
    _write(tmp_path, "test", {"de": ["a"], "en": ["b"]})
    with pytest.raises(FileNotFoundError, match="train.de"):
        prep.prepare("multi30k", tmp_path, tmp_path / "out")
