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


def _tgz(path, files: dict):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            data = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _bytes_of_tgz(files: dict) -> bytes:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        _tgz(Path(d) / "x.tgz", files)
        return (Path(d) / "x.tgz").read_bytes()


def test_iwslt17_training_release_layout(tmp_path):
    """The WIT3 multilingual release: a .tgz inside the .tgz, tags files and XML dev sets."""
    inner = _bytes_of_tgz({
        "DeEnItNlRo-DeEnItNlRo/train.tags.de-en.de": "<url>u</url>\nHallo Welt.\n<talkid>1</talkid>\nDanke.\n",
        "DeEnItNlRo-DeEnItNlRo/train.tags.de-en.en": "<url>u</url>\nHello world.\n<talkid>1</talkid>\nThanks.\n",
        "DeEnItNlRo-DeEnItNlRo/IWSLT17.TED.dev2010.de-en.de.xml": '<seg id="1"> Ja . </seg>',
        "DeEnItNlRo-DeEnItNlRo/IWSLT17.TED.dev2010.de-en.en.xml": '<seg id="1"> Yes . </seg>',
    })
    dl = tmp_path / "dl"
    dl.mkdir()
    _tgz(dl / "2017-01-trnmted.tgz", {"2017-01-trnmted/texts/DeEnItNlRo/DeEnItNlRo/DeEnItNlRo-DeEnItNlRo.tgz": inner})
    tests = T / "iwslt17-de-en"
    if not tests.exists():
        pytest.skip("needs the IWSLT'17 test archives in ../shared/data")
    extract.extract_iwslt17(dl, tmp_path / "out", tests)
    assert (tmp_path / "out/train.en").read_text() == "Hello world.\nThanks.\n"
    assert (tmp_path / "out/dev.de").read_text() == "Ja .\n"


def test_wmt_training_archives_are_paired_by_name(tmp_path):
    import zipfile

    dl = tmp_path / "dl"
    dl.mkdir()
    _tgz(dl / "training-parallel-nc-v8.tgz", {
        "training/news-commentary-v8.ru-en.ru": "привет\nмир\n", "training/news-commentary-v8.ru-en.en": "hello\nworld\n",
        "training/news-commentary-v8.de-en.de": "hallo\n", "training/news-commentary-v8.de-en.en": "hello\n",
    })
    _tgz(dl / "wiki-headlines.tgz", {"wiki/ru-en/guessed-names.ru-en": "Москва ||| Moscow\nbad line\n"})
    with zipfile.ZipFile(dl / "extra.zip", "w") as z:  # OPUS moses zips hold X.<a>-<b>.<lang> files
        z.writestr("SETIMES.en-ru.en", "one\n")
        z.writestr("SETIMES.en-ru.ru", "один\n")
    tests = tmp_path / "tests"
    _write(tests, "newstest2012", {"en": ["a"], "ru": ["б"]})
    _write(tests, "newstest2013", {"en": ["c"], "ru": ["д"]})
    extract.EXTRACTORS["wmt13-en-ru"](dl, tmp_path / "out", tests)
    en = (tmp_path / "out/train.en").read_text(encoding="utf-8").splitlines()
    ru = (tmp_path / "out/train.ru").read_text(encoding="utf-8").splitlines()
    assert sorted(zip(en, ru)) == sorted([("hello", "привет"), ("world", "мир"), ("Moscow", "Москва"), ("one", "один")])
    assert (tmp_path / "out/test.ru").read_text(encoding="utf-8") == "д\n"


def test_kftt_release_layout(tmp_path):
    files = {}
    for split, stem in (("train", "train.cln"), ("dev", "dev"), ("test", "test")):
        for lang, tok, orig in (("en", "It is .", "It is."), ("ja", "そう だ 。", "そうだ。")):
            n = 10 if split == "train" else 1  # enough repeated pairs for BPE merges
            files[f"kftt-data-1.0/data/tok/kyoto-{stem}.{lang}"] = (tok + "\n") * n
            files[f"kftt-data-1.0/data/orig/kyoto-{stem}.{lang}"] = (orig + "\n") * n
    (tmp_path / "dl").mkdir()
    _tgz(tmp_path / "dl/kftt-data-1.0.tar.gz", files)
    extract.extract_kftt(tmp_path / "dl", tmp_path / "out")
    assert (tmp_path / "out/train.ja").read_text(encoding="utf-8") == "そう だ 。\n" * 10
    assert (tmp_path / "out/test.orig.ja").read_text(encoding="utf-8") == "そうだ。\n"
    summary = prep.prepare("kftt-ja-en", tmp_path / "out", tmp_path / "prep", merges=5)
    assert (tmp_path / "prep/test.raw.ja").read_text(encoding="utf-8") == "そうだ。\n"  # SacreBLEU's reference
    assert (tmp_path / "prep/test.tok.ja").read_text(encoding="utf-8") == "そう だ 。\n"  # KFTT's tokens kept
    assert summary["lines"]["train"] == 10


@needs_shared("multi30k")
def test_sentencepiece_option_segments_the_same_tokens(tmp_path):
    pytest.importorskip("sentencepiece")
    from onmt_entmax.evaluation.bleu import remove_sentencepiece

    extract.extract_multi30k(SHARED / "multi30k", tmp_path / "raw")
    summary = prep.prepare("multi30k", tmp_path / "raw", tmp_path / "out", max_lines=300, merges=300,
                           subword="sentencepiece")
    assert summary["subword"] == "sentencepiece" and (tmp_path / "out/bpe.codes.spm.model").exists()
    for split in ("train", "test"):
        pieces = (tmp_path / f"out/{split}.bpe.en").read_text(encoding="utf-8").splitlines()
        tok = (tmp_path / f"out/{split}.tok.en").read_text(encoding="utf-8").splitlines()
        assert [remove_sentencepiece(p) for p in pieces] == tok
    with pytest.raises(ValueError, match="--subword"):
        prep.prepare("multi30k", tmp_path / "raw", tmp_path / "o2", subword="wordpiece")
