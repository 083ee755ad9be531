#!/usr/bin/env python3
"""Downloaded archives -> plain parallel text ``OUT/{train,dev,test}.{lang}`` (one sentence a line).

    python3 scripts/data/extract.py multi30k --downloads work/downloads/multi30k --out work/data/multi30k/raw

Splits per corpus (dev / test): Multi30k val / test_2016_flickr; IWSLT'17 dev2010 / tst2017 (also
tst2016 as ``test2016``); IWSLT'14 no dev here (``prepare_mt.py`` takes every 23rd pair of the cleaned
training set, as fairseq's prepare-iwslt14.sh) / dev2010+TEDX.dev2012+tst2010-12 (the 6,750-line fairseq
set); KFTT dev / test (the released tokenization, ``data/tok``); WMT'16 newsdev2016 / newstest2016,
WMT'14 newstest2013 / newstest2014 (full), WMT'13 newstest2012 (from the WMT dev archive: SacreBLEU has no
wmt12 en-ru) / newstest2013 -- the other WMT dev/test sets come from SacreBLEU's own checked downloads,
or from ``--testsets DIR`` holding ``<name>.<lang>`` files (e.g. ../shared/data). Training parallel files
inside WMT archives are found by name (``X.<l1>-<l2>.<l>``).

``{split}.orig.{lang}`` files hold the untokenized references of SacreBLEU where ``{split}.{lang}`` is not
plain text (KFTT's tokens, IWSLT'14's XML-escaped segments); ``pretokenized.txt`` lists the splits
already in their recipe's tokenization, which ``prepare_mt.py`` passes through (IWSLT'14 test sets
given as fairseq's output).
"""
from __future__ import annotations

import argparse
import fnmatch
import gzip
import html
import io
import re
import tarfile
import zipfile
from pathlib import Path

_SEG = re.compile(r"<seg[^>]*>(.*?)</seg>", re.S)


def xml_segments(text: str) -> list[str]:
    """``<seg id=..> text </seg>`` contents of an IWSLT / WMT XML or SGML file, entities unescaped."""
    return [" ".join(html.unescape(m).split()) for m in _SEG.findall(text)]


def tags_file_lines(text: str) -> list[str]:
    """IWSLT ``train.tags.*`` files: talk metadata lines are XML tags (``<url>``, ``<talkid>``...)."""
    return [" ".join(line.split()) for line in text.splitlines() if not line.strip().startswith("<")]


_FAIRSEQ_DROP = ("<url>", "<talkid>", "<keywords>")
_FAIRSEQ_UNTAG = re.compile(r"</?(title|description)>")


def fairseq_tags_lines(text: str) -> list[str]:
    """``train.tags.*`` as fairseq's prepare-iwslt14.sh reads it: lines containing ``<url>``, ``<talkid>``
    or ``<keywords>`` dropped, the ``<title>`` / ``<description>`` tags removed and their text kept."""
    return [" ".join(_FAIRSEQ_UNTAG.sub("", line).split()) for line in text.splitlines()
            if not any(tag in line for tag in _FAIRSEQ_DROP)]


_FAIRSEQ_SEG_OPEN = re.compile(r'<seg id="[0-9]*">\s*')
_FAIRSEQ_SEG_CLOSE = re.compile(r"\s*</seg>\s*")


def fairseq_xml_lines(text: str) -> list[str]:
    """Segments as fairseq's prepare-iwslt14.sh reads them: every line holding ``<seg id``, its tags
    removed, XML entities left as they are (its tokenizer then escapes ``&amp;`` to ``&amp; amp ;``)."""
    return [_FAIRSEQ_SEG_CLOSE.sub("", _FAIRSEQ_SEG_OPEN.sub("", line))
            for line in text.splitlines() if "<seg id" in line]


class Archive:
    """Uniform read access to .tgz / .tar.gz / .zip files (nested archives by path), or folders."""

    def __init__(self, path: Path, data: bytes | None = None):
        self.path = Path(path)
        if data is None and self.path.is_dir():
            self.files = {str(p.relative_to(self.path)): p for p in self.path.rglob("*") if p.is_file()}
            self._read = lambda name: self.files[name].read_bytes()
            return
        raw = data if data is not None else self.path.read_bytes()
        if zipfile.is_zipfile(io.BytesIO(raw)):
            zf = zipfile.ZipFile(io.BytesIO(raw))
            self.files = {n: n for n in zf.namelist() if not n.endswith("/")}
            self._read = zf.read
        else:
            tf = tarfile.open(fileobj=io.BytesIO(raw))
            members = {m.name.lstrip("./"): m for m in tf.getmembers() if m.isfile()}
            self.files = members
            self._read = lambda name: tf.extractfile(members[name]).read()  # type: ignore[union-attr]

    def names(self, pattern: str = "*") -> list[str]:
        return sorted(n for n in self.files if fnmatch.fnmatch(n, pattern))

    def one(self, pattern: str) -> str:
        found = self.names(pattern)
        if len(found) != 1:
            raise FileNotFoundError(f"{self.path}: expected one file matching {pattern!r}, found {found}")
        return found[0]

    def text(self, name: str) -> str:
        data = self._read(name)
        if name.endswith(".gz"):
            data = gzip.decompress(data)
        return data.decode("utf-8")

    def nested(self, pattern: str) -> "Archive":
        name = self.one(pattern)
        return Archive(Path(f"{self.path}/{name}"), self._read(name))


def write_split(out: Path, split: str, pair: dict[str, list[str]]) -> None:
    (l1, s1), (l2, s2) = pair.items()
    if len(s1) != len(s2):
        raise ValueError(f"{split}: {len(s1)} {l1} lines but {len(s2)} {l2} lines")
    out.mkdir(parents=True, exist_ok=True)
    for lang, lines in pair.items():
        (out / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def parallel_in_archive(arch: Archive, l1: str, l2: str) -> dict[str, list[str]]:
    """Concatenate every ``X.<a>-<b>.<l1>`` / ``X.<a>-<b>.<l2>`` pair ({a, b} = {l1, l2}) in an archive;
    ``X.<a>-<b>`` files without a language suffix are ``l_a ||| l_b`` lines (WMT wiki headlines)."""
    out: dict[str, list[str]] = {l1: [], l2: []}
    for a, b in ((l1, l2), (l2, l1)):
        for name in arch.names(f"*.{a}-{b}.{l1}"):
            other = name[: -len(l1)] + l2
            if other in arch.files:
                s1, s2 = arch.text(name).splitlines(), arch.text(other).splitlines()
                if len(s1) != len(s2):
                    raise ValueError(f"{arch.path}: {name} and {other} differ in length")
                out[l1] += s1
                out[l2] += s2
        for name in arch.names(f"*.{a}-{b}"):
            for line in arch.text(name).splitlines():
                cols = line.split(" ||| ")
                if len(cols) == 2:
                    out[a].append(cols[0])
                    out[b].append(cols[1])
    return out


def sacrebleu_testset(name: str, src: str, tgt: str, testsets: Path | None, file_stem: str) -> dict[str, list[str]]:
    """A WMT test set from ``testsets/<file_stem>.<lang>`` if given, else via SacreBLEU (checked download)."""
    if testsets is not None:
        return {lang: (testsets / f"{file_stem}.{lang}").read_text(encoding="utf-8").splitlines()
                for lang in (src, tgt)}
    from sacrebleu.utils import get_reference_files, get_source_file

    pair = f"{src}-{tgt}"
    return {
        src: Path(get_source_file(name, pair)).read_text(encoding="utf-8").splitlines(),
        tgt: Path(get_reference_files(name, pair)[0]).read_text(encoding="utf-8").splitlines(),
    }


def extract_multi30k(dl: Path, out: Path, testsets: Path | None = None) -> None:
    arch = Archive(dl)
    for split, stem in (("train", "train"), ("dev", "val"), ("test", "test_2016_flickr")):
        write_split(out, split, {lang: arch.text(arch.one(f"*{stem}.{lang}.gz")).splitlines() for lang in ("de", "en")})


def extract_iwslt17(dl: Path, out: Path, testsets: Path | None = None) -> None:
    """Training and dev2010 from the multilingual release (torchtext's) or, downloaded as its fallback,
    the bilingual de-en release of the same campaign (same file names inside)."""
    train = None
    if (dl / "2017-01-trnmted.tgz").exists():
        train = Archive(dl / "2017-01-trnmted.tgz").nested("*DeEnItNlRo-DeEnItNlRo.tgz")
    elif (dl / "2017-01-trnted-de-en.tgz").exists():
        train = Archive(dl / "2017-01-trnted-de-en.tgz")
    if train is not None:
        write_split(out, "train", {l: tags_file_lines(train.text(train.one(f"*train.tags.de-en.{l}")))
                                   for l in ("de", "en")})
        write_split(out, "dev", {l: xml_segments(train.text(train.one(f"*IWSLT17.TED.dev2010.de-en.{l}.xml")))
                                 for l in ("de", "en")})
    tests = testsets or dl
    src_side = {"de": Archive(tests / "de-en.tgz"), "en": Archive(tests / "en-de.tgz")}
    for split, year in (("test", "tst2017"), ("test2016", "tst2016")):
        write_split(out, split, {
            l: xml_segments(a.text(a.one(f"*IWSLT17.TED.{year}.*.{l}.xml"))) for l, a in src_side.items()
        })


PRETOKENIZED = "pretokenized.txt"  # splits already in their recipe's tokenization, one a line
IWSLT14_TEST = ("IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010", "IWSLT14.TED.tst2011",
                "IWSLT14.TED.tst2012")


def extract_iwslt14(dl: Path, out: Path, testsets: Path | None = None) -> None:
    """fairseq's prepare-iwslt14.sh reading of the release: training lines (no dev split: prepare_mt.py
    holds out every 23rd pair after cleaning, as fairseq) and the concatenated test talks; ``test.orig``
    holds the same segments as plain text (entities unescaped), the references of SacreBLEU."""
    if (dl / "de-en.tgz").exists():
        arch = Archive(dl / "de-en.tgz")
        write_split(out, "train", {l: fairseq_tags_lines(arch.text(arch.one(f"*train.tags.de-en.{l}")))
                                   for l in ("de", "en")})
        xml = {(t, l): arch.text(arch.one(f"*{t}.de-en.{l}.xml")) for t in IWSLT14_TEST for l in ("de", "en")}
        test = {l: sum((fairseq_xml_lines(xml[t, l]) for t in IWSLT14_TEST), []) for l in ("de", "en")}
        plain = {l: sum((xml_segments(xml[t, l]) for t in IWSLT14_TEST), []) for l in ("de", "en")}
        if any(len(test[l]) != len(plain[l]) for l in test):
            raise ValueError(f"{dl / 'de-en.tgz'}: <seg id lines and <seg> elements differ in number")
        write_split(out, "test", test)
        write_split(out, "test.orig", plain)
        return
    # ../shared/data/mt-testsets/iwslt14-de-en: the same sets as fairseq's script writes them (tokenized,
    # escaped, lower-cased); their SacreBLEU references are those lines detokenized (no originals there)
    from sacremoses import MosesDetokenizer

    src = testsets or dl
    test = {l: sum(((src / f"{t}.de-en.{l}").read_text(encoding="utf-8").splitlines() for t in IWSLT14_TEST), [])
            for l in ("de", "en")}
    write_split(out, "test", test)
    write_split(out, "test.orig", {l: [MosesDetokenizer(lang=l).detokenize(x.split()) for x in v]
                                   for l, v in test.items()})
    (out / PRETOKENIZED).write_text("test\n", encoding="utf-8")


def extract_kftt(dl: Path, out: Path, testsets: Path | None = None) -> None:
    """Writes the released tokenization as ``{split}.{lang}`` and the originals as ``{split}.orig.{lang}``."""
    if (dl / "kftt-data-1.0.tar.gz").exists():
        arch = Archive(dl / "kftt-data-1.0.tar.gz")
        read = lambda stem, l, tok: (arch.text(arch.one(f"*data/{'tok' if tok else 'orig'}/kyoto-{stem}.{l}"))
                                     .splitlines())
        splits = (("train", "train.cln"), ("dev", "dev"), ("test", "test"))
    else:
        src = testsets or dl
        read = lambda stem, l, tok: ((src / f"kyoto-{stem}.{'tok.' if tok else ''}{l}").read_text(encoding="utf-8")
                                     .splitlines())
        splits = (("dev", "dev"), ("test", "test"))
    for split, stem in splits:
        write_split(out, split, {l: read(stem, l, True) for l in ("ja", "en")})
        if split != "train":
            write_split(out, f"{split}.orig", {l: read(stem, l, False) for l in ("ja", "en")})


DEV_ARCHIVES = ("dev.tgz", "dev-wmt17.tgz")  # download.py's WMT dev archives (the primary and its fallback)


def dev_archive_testset(dl: Path, stem: str, langs: tuple[str, str]) -> dict[str, list[str]]:
    """``dev/<stem>.<lang>`` (plain text) from the WMT dev archive download.py fetched into ``dl``."""
    found = [dl / name for name in DEV_ARCHIVES if (dl / name).exists()]
    if not found:
        raise FileNotFoundError(f"{dl}: no {' or '.join(DEV_ARCHIVES)} (download.py fetches it) for {stem}, "
                                "and no --testsets folder given")
    arch = Archive(found[0])
    return {lang: arch.text(arch.one(f"*dev/{stem}.{lang}")).splitlines() for lang in langs}


def _wmt(pair: tuple[str, str], dev: tuple[str, str], test: tuple[str, str]):
    """``dev`` / ``test``: (SacreBLEU test set, file stem); ``"dev-archive"``: the WMT dev archive in the
    downloads folder, unless ``--testsets`` holds ``<stem>.<lang>``."""
    def extract(dl: Path, out: Path, testsets: Path | None = None) -> None:
        l1, l2 = pair
        archives = [p for p in sorted(dl.glob("*")) if p.suffix in (".tgz", ".zip", ".gz")
                    and p.name not in DEV_ARCHIVES] if dl.is_dir() else []
        if archives:
            train: dict[str, list[str]] = {l1: [], l2: []}
            for path in archives:
                for l, lines in parallel_in_archive(Archive(path), l1, l2).items():
                    train[l] += lines
            write_split(out, "train", train)
        for split, (name, stem) in (("dev", dev), ("test", test)):
            given = testsets is not None and all((testsets / f"{stem}.{l}").exists() for l in pair)
            if name == "dev-archive" and not given:
                write_split(out, split, dev_archive_testset(dl, stem, pair))
            else:
                write_split(out, split, sacrebleu_testset(name, l1, l2, testsets, stem))
    return extract


EXTRACTORS = {
    "multi30k": extract_multi30k,
    "iwslt17-de-en": extract_iwslt17,
    "iwslt14-de-en": extract_iwslt14,
    "kftt-ja-en": extract_kftt,
    "wmt16-ro-en": _wmt(("ro", "en"), ("wmt16/dev", "newsdev2016"), ("wmt16", "newstest2016")),
    "wmt14-en-de": _wmt(("en", "de"), ("wmt13", "newstest2013"), ("wmt14/full", "newstest2014")),
    "wmt13-en-ru": _wmt(("en", "ru"), ("dev-archive", "newstest2012"), ("wmt13", "newstest2013")),
}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", choices=sorted(EXTRACTORS))
    p.add_argument("--downloads", type=Path, required=True, help="folder written by download.py for this corpus")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--testsets", type=Path,
                   help="folder with the dev/test files (e.g. ../shared/data/mt-testsets/<corpus>)")
    a = p.parse_args(argv)
    EXTRACTORS[a.corpus](a.downloads, a.out, a.testsets)
    for f in sorted(a.out.glob("*")):
        print(f"{f}\t{sum(1 for _ in open(f, encoding='utf-8'))} lines")


if __name__ == "__main__":
    main()
