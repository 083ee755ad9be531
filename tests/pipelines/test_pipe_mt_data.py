"""MT data: extraction of the released test sets, and the Moses + subword-nmt recipes."""
import json
import shutil

import pytest
from sacremoses import MosesTokenizer

from pipeline_helpers import MULTI30K_SAMPLE, SHARED, load_script, needs_shared

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
    assert ((tmp_path / "test.ja").read_text(encoding="utf-8")
            == (T / "kftt/kyoto-test.tok.ja").read_text(encoding="utf-8"))
    assert ((tmp_path / "test.orig.ja").read_text(encoding="utf-8")
            == (T / "kftt/kyoto-test.ja").read_text(encoding="utf-8"))


def _write(d, split, pairs):
    d.mkdir(parents=True, exist_ok=True)
    for lang, lines in pairs.items():
        (d / f"{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def test_multi30k_recipe_bpe_undoes_to_moses_tokens(tmp_path):
    raw = tmp_path / "raw"
    extract.extract_multi30k(MULTI30K_SAMPLE, raw)  # the release's first 400 lines a split, in its layout
    assert len((raw / "train.de").read_text(encoding="utf-8").splitlines()) == 400
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
    pairs = {"ro": ["Ştiu că ţara e aici .", "Începe în România ."] * 20,
             "en": ["I know the country is here .", "It starts in Romania ."] * 20}
    for split in ("train", "dev", "test"):
        _write(tmp_path / "raw", split, pairs)
    prep.prepare("wmt16-ro-en", tmp_path / "raw", tmp_path / "ro", merges=20)
    assert (tmp_path / "ro/bpe.codes.ro").exists() and (tmp_path / "ro/bpe.codes.en").exists()
    assert not (tmp_path / "ro/bpe.codes").exists()
    # Sennrich et al. 2016b: cedilla forms normalised, then diacritics removed
    assert (tmp_path / "ro/test.tok.ro").read_text(encoding="utf-8").splitlines()[:2] == ["Stiu ca tara e aici .",
                                                                                           "Incepe in Romania ."]
    pairs = {"de": pairs["en"], "en": pairs["en"]}
    for split in ("train", "dev", "test"):
        _write(tmp_path / "raw2", split, pairs)
    prep.prepare("iwslt17-de-en", tmp_path / "raw2", tmp_path / "de", merges=20)
    assert (tmp_path / "de/bpe.codes").exists() and not (tmp_path / "de/bpe.codes.de").exists()


def test_training_pairs_are_cleaned_but_test_pairs_never():
    src, tgt = prep.clean_pairs(["a b", "", "a " * 10, "x"], ["c d", "e", "b", "y " * 4], max_len=8, max_ratio=1.5)
    assert (src, tgt) == (["a b"], ["c d"])


def test_cleaning_is_moses_clean_corpus_n():
    """clean-corpus-n.perl: | deleted unless the first pair has one, 1000-character words, ratio both ways."""
    src = ["p  q", "x " * 3, "w" * 1001, "a | b", "one two three four"]
    tgt = ["r s", "y", "v", "c d", "1 2"]
    kept = prep.moses_clean(src, tgt, max_len=10, max_ratio=1.5)
    assert kept == [(0, "p q", "r s"), (3, "a b", "c d")]
    assert prep.moses_clean(["f|N b", "a | b"], ["g|N", "c d"])[1] == (1, "a | b", "c d")  # factored: kept
    assert prep.moses_clean(["w" * 1000], ["v"]) == [(0, "w" * 1000, "v")]


def test_unknown_recipe_step_is_named():
    with pytest.raises(ValueError, match="tokenise"):
        prep.Recipe(("de", "en"), 10, train_steps=("tokenise",))


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
        "training/news-commentary-v8.ru-en.ru": "привет\nмир\n",
        "training/news-commentary-v8.ru-en.en": "hello\nworld\n",
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


def test_sentencepiece_option_segments_the_same_tokens(tmp_path):
    pytest.importorskip("sentencepiece")
    from onmt_entmax.evaluation.bleu import remove_sentencepiece

    extract.extract_multi30k(MULTI30K_SAMPLE, tmp_path / "raw")
    summary = prep.prepare("multi30k", tmp_path / "raw", tmp_path / "out", max_lines=300, merges=300,
                           subword="sentencepiece")
    assert summary["subword"] == "sentencepiece" and (tmp_path / "out/bpe.codes.spm.model").exists()
    for split in ("train", "test"):
        pieces = (tmp_path / f"out/{split}.bpe.en").read_text(encoding="utf-8").splitlines()
        tok = (tmp_path / f"out/{split}.tok.en").read_text(encoding="utf-8").splitlines()
        assert [remove_sentencepiece(p) for p in pieces] == tok
    with pytest.raises(ValueError, match="--subword"):
        prep.prepare("multi30k", tmp_path / "raw", tmp_path / "o2", subword="wordpiece")


def test_fairseq_iwslt14_readers_keep_what_prepare_iwslt14_keeps():
    tags = ("<url>http://x</url>\n<keywords>k</keywords>\n<speaker>S</speaker>\n<talkid>1</talkid>\n"
            "<title>A talk</title>\n<description>About it</description>\n Hello  there. \n")
    # grep -v url/talkid/keywords; sed removes the title/description tags, their text stays
    assert extract.fairseq_tags_lines(tags) == ["<speaker>S</speaker>", "A talk", "About it", "Hello there."]
    xml = '<doc>\n<seg id="1"> R&amp;D \u2019s  </seg>\n<seg id="2">B</seg>\n</doc>'
    assert extract.fairseq_xml_lines(xml) == ["R&amp;D \u2019s", "B"]  # entities left for the tokenizer


def _iwslt14_release(path, n=100, dirty=(5, 30, 31, 60)):
    """A de-en.tgz laid out as the IWSLT'14 release; pair i in ``dirty`` is one clean-corpus-n drops."""
    de, en = ["<url>u</url>", "<keywords>k</keywords>", "<talkid>1</talkid>", "<title>Titel</title>"], \
        ["<url>u</url>", "<keywords>k</keywords>", "<talkid>1</talkid>", "<title>Title</title>"]
    pairs = []
    for i in range(n):
        if i == 5:
            d, e = "ein zwei drei vier", "one"  # ratio 4
        elif i == 30:
            d, e = "w" * 1001, "long"  # a 1001-character word
        elif i == 31:
            d, e = " ".join(["x"] * 176), " ".join(["y"] * 170)  # 176 tokens
        elif i == 60:
            d, e = "", "empty"
        else:
            d, e = f"Satz {i} ist's | gut.", f"Sentence {i} is 'fine' | here."
        pairs.append((d, e))
        de.append(d)
        en.append(e)
    files = {"de-en/train.tags.de-en.de": "\n".join(de) + "\n", "de-en/train.tags.de-en.en": "\n".join(en) + "\n"}
    for t in extract.IWSLT14_TEST:
        for lang, text in (("de", "F&amp;E\u2019s gut"), ("en", "R&amp;D\u2019s fine")):
            files[f"de-en/{t}.de-en.{lang}.xml"] = f'<doc>\n<seg id="1"> {text} {t} </seg>\n</doc>\n'
    _tgz(path, files)
    return [p for i, p in enumerate(pairs) if i not in dirty]


def test_iwslt14_release_is_prepared_as_fairseq_prepare_iwslt14(tmp_path):
    (tmp_path / "dl").mkdir()
    clean = _iwslt14_release(tmp_path / "dl/de-en.tgz")
    extract.extract_iwslt14(tmp_path / "dl", tmp_path / "raw")
    assert not (tmp_path / "raw/dev.en").exists()  # made after cleaning by prepare_mt
    assert (tmp_path / "raw/test.orig.en").read_text().splitlines()[0] == "R&D\u2019s fine IWSLT14.TED.dev2010"
    summary = prep.prepare("iwslt14-de-en", tmp_path / "raw", tmp_path / "out", merges=30)
    read = lambda name: (tmp_path / "out" / name).read_text(encoding="utf-8").splitlines()
    mt = MosesTokenizer(lang="en")
    expected = ["title"] + [mt.tokenize(e, escape=True, return_str=True).lower() for _, e in clean]
    # awk 'NR%23 == 0' after cleaning: the title line is pair 1, so dev holds cleaned pairs 23, 46, 69, ...
    assert read("dev.tok.en") == expected[22::23]
    assert read("train.tok.en") == [x for i, x in enumerate(expected) if (i + 1) % 23]
    assert summary["lines"] == {"dev": len(expected) // 23, "test": 5, "train": len(expected) - len(expected) // 23}
    assert read("train.tok.en")[2] == "sentence 1 is &apos; fine &apos; &#124; here ."  # escaped, lower-cased
    assert read("test.tok.en")[0] == "r &amp; amp ; d &apos;s fine iwslt14.ted.dev2010"  # ’ -> ' on test sets only
    assert read("test.raw.en")[0] == "R&D\u2019s fine IWSLT14.TED.dev2010"  # SacreBLEU's reference: plain text
    assert read("dev.raw.en")[0] == clean[21][1]


@needs_shared("mt-testsets", "iwslt14-de-en")
def test_iwslt14_shared_test_sets_are_fairseqs_output_and_passed_through(tmp_path):
    extract.extract_iwslt14(T / "iwslt14-de-en", tmp_path, T / "iwslt14-de-en")
    _write(tmp_path, "train", {"de": ["ein kleiner satz ."] * 50, "en": ["a small sentence ."] * 50})
    summary = prep.prepare("iwslt14-de-en", tmp_path, tmp_path / "out", merges=20)
    assert summary["pretokenized"] == ["test"]
    shared = sum(((T / "iwslt14-de-en" / f"{t}.de-en.en").read_text(encoding="utf-8").splitlines()
                  for t in extract.IWSLT14_TEST), [])
    assert (tmp_path / "out/test.tok.en").read_text(encoding="utf-8").splitlines() == shared  # not re-tokenized
    assert "&amp; amp ;" in (tmp_path / "out/test.tok.en").read_text(encoding="utf-8")
    raw = (tmp_path / "out/test.raw.en").read_text(encoding="utf-8")
    assert "&apos;" not in raw and "isn't" in raw  # detokenized for SacreBLEU


@needs_shared("mt-testsets", "iwslt14-de-en")
def test_iwslt14_recipe_reproduces_fairseqs_tokens_on_the_real_test_set():
    """Detokenize fairseq's tst2010 and tokenize it again with the recipe: XML escaping is what makes the
    lines equal (the rest differ where the lower-cased text lost a sentence-final period's capital)."""
    import dataclasses

    from sacremoses import MosesDetokenizer

    recipe = prep.RECIPES["iwslt14-de-en"]
    lines = (T / "iwslt14-de-en/IWSLT14.TED.tst2010.de-en.en").read_text(encoding="utf-8").splitlines()
    detok = [MosesDetokenizer(lang="en").detokenize(x.split()) for x in lines]
    rate = {}
    for escape in (True, False):
        r = dataclasses.replace(recipe, escape=escape)
        rate[escape] = sum(a == b for a, b in zip(prep.tokenize_lines(detok, "en", r, 1, r.eval_steps),
                                                  lines)) / len(lines)
    assert rate[True] > 0.9 > 0.5 > rate[False]  # measured: 93.1 % and 49.3 % of 1,565 lines


def test_wmt_recipe_follows_fairseq_prepare_wmt14en2de(tmp_path):
    """-a hyphen splitting, escaping, non-printing characters removed on train; clean-corpus-n on the BPE
    output, so a pair of 200 words but over 250 subwords is dropped; dev/test never filtered."""
    long_de = " ".join(f"Qzx{i}vyw" for i in range(200))
    long_en = " ".join(f"Kqj{i}wvz" for i in range(200))
    train = {"en": ["A well-known \u200bfact."] * 30 + [long_en], "de": ["Eine bekannte Tatsache."] * 30 + [long_de]}
    _write(tmp_path / "raw", "train", train)
    _write(tmp_path / "raw", "dev", {"en": [long_en, "It\u2019s"], "de": [long_de, "Es ist"]})
    _write(tmp_path / "raw", "test", {"en": ["x"], "de": ["y"]})
    summary = prep.prepare("wmt14-en-de", tmp_path / "raw", tmp_path / "out", merges=10)
    read = lambda name: (tmp_path / "out" / name).read_text(encoding="utf-8").splitlines()
    assert summary["train_pairs_before_cleaning"] == 31 and summary["lines"]["train"] == 30
    assert read("train.tok.en")[0] == "A well @-@ known fact ."
    assert read("dev.tok.en")[1] == "It &apos;s" and summary["lines"]["dev"] == 2
    assert [b.replace("@@ ", "") for b in read("train.bpe.de")] == read("train.tok.de")  # still aligned
    assert len(read("train.raw.en")) == 30


@needs_shared("mt-testsets", "wmt13-en-ru")
def test_wmt13_dev_set_comes_from_the_wmt_dev_archive(tmp_path):
    """SacreBLEU has no wmt12 en-ru: newstest2012 is read from the dev archive download.py fetches."""
    shared = T / "wmt13-en-ru"
    dl_dir = tmp_path / "dl"
    dl_dir.mkdir()
    _tgz(dl_dir / "dev.tgz", {f"dev/newstest2012.{l}": (shared / f"newstest2012.{l}").read_text(encoding="utf-8")
                              for l in ("en", "ru")})
    _tgz(dl_dir / "training-parallel-nc-v8.tgz", {"training/news-commentary-v8.ru-en.ru": "мир\n",
                                                  "training/news-commentary-v8.ru-en.en": "world\n"})
    tests = tmp_path / "tests"
    tests.mkdir()
    for l in ("en", "ru"):
        shutil.copy(shared / f"newstest2013.{l}", tests / f"newstest2013.{l}")
    extract.EXTRACTORS["wmt13-en-ru"](dl_dir, tmp_path / "out", tests)
    assert ((tmp_path / "out/dev.ru").read_text(encoding="utf-8")
            == (shared / "newstest2012.ru").read_text(encoding="utf-8"))
    assert len((tmp_path / "out/dev.en").read_text(encoding="utf-8").splitlines()) == 3003
    assert (tmp_path / "out/train.en").read_text(encoding="utf-8") == "world\n"  # nothing read from dev.tgz
    (dl_dir / "dev.tgz").unlink()
    with pytest.raises(FileNotFoundError, match="dev.tgz"):
        extract.EXTRACTORS["wmt13-en-ru"](dl_dir, tmp_path / "out2", tests)


def test_iwslt17_bilingual_fallback_release_is_read_like_the_multilingual_one(tmp_path):
    (tmp_path / "dl").mkdir()
    _tgz(tmp_path / "dl/2017-01-trnted-de-en.tgz", {
        "de-en/train.tags.de-en.de": "<url>u</url>\nHallo Welt.\n",
        "de-en/train.tags.de-en.en": "<url>u</url>\nHello world.\n",
        "de-en/IWSLT17.TED.dev2010.de-en.de.xml": '<seg id="1"> Ja . </seg>',
        "de-en/IWSLT17.TED.dev2010.de-en.en.xml": '<seg id="1"> Yes . </seg>',
    })
    tests = T / "iwslt17-de-en"
    if not tests.exists():
        pytest.skip("needs the IWSLT'17 test archives in ../shared/data")
    extract.extract_iwslt17(tmp_path / "dl", tmp_path / "out", tests)
    assert ((tmp_path / "out/train.en").read_text() == "Hello world.\n"
            and (tmp_path / "out/dev.de").read_text() == "Ja .\n")
