#!/usr/bin/env python3
"""Download the corpora of the reproduction pipelines from the URLs maintained references use today.

    python3 scripts/data/download.py wmt14-en-de --out work/downloads
    python3 scripts/data/download.py sigmorphon2018 --out work/downloads   # git clone at a pinned commit
    python3 scripts/data/download.py --list

A file is fetched through ``<name>.part`` with HTTP range requests: a cut connection is resumed where it
stopped, in the same run and by the next one (the reason this is not ``pooch``: its HTTP downloader, 1.9.0,
sends no range request and starts a cut download again from its first byte, and the WMT archives are
gigabytes). A file is tried at its URLs in order (the one a reference
uses, then a mirror or an equivalent release where one exists); a URL that fails (404, refused, ...)
passes to the next.

Every complete file is checked before use against the size and digest a reference publishes for it
(``pinned_by`` names it: tensorflow-datasets' url_checksums, SacreBLEU's dataset table, torchtext, ...).
A mismatch is refused in one line naming the file and both digests, and the file is moved to
``<name>.rejected`` (never left as if complete); ``--no-verify`` accepts a file whose upstream changed.
Files that no maintained reference pins (``pinned_by=None``: IWSLT'14 de-en.tgz, SETIMES2) are checked
against the SHA-256 recorded at their first download in ``<out>/checksums.lock`` (trust on first use: a
second machine must get the same bytes).

WMT dev/test sets are fetched and MD5-checked by SacreBLEU (``scripts/data/extract.py``), except
newstest2012 EN-RU, which SacreBLEU lacks: it comes from the WMT dev archive below.
"""
from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """One file: its URL, local name, and the size / digests a reference publishes for its bytes."""

    url: str
    name: str  # file name under <out>/<corpus>/
    md5: str | None = None
    sha1: str | None = None
    sha256: str | None = None
    size: int | None = None  # bytes
    pinned_by: str | None = None  # the reference publishing the digest; None: no maintained reference does

    @property
    def digests(self) -> dict[str, str]:
        return {a: d for a, d in (("md5", self.md5), ("sha1", self.sha1), ("sha256", self.sha256)) if d}


@dataclass(frozen=True)
class GitSource:
    url: str
    commit: str  # the pin: a clone must be checked out at exactly this commit


class DownloadError(RuntimeError):
    """A file could not be fetched from any of its URLs, or its bytes were refused."""


# References (read 2025): tfds = tensorflow-datasets tensorflow_datasets/url_checksums/<file> (size, SHA-256);
# sacrebleu = SacreBLEU 2.6 sacrebleu/dataset/__init__.py (MD5); torchtext = pytorch/text torchtext/datasets.
_TFDS = "tensorflow-datasets url_checksums/{}"
_STATMT = "http://www.statmt.org"
# the official repository's files, as torchtext read them (raw.githubusercontent.com), else through github.com
_M30K = ("https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw",
         "https://github.com/multi30k/dataset/raw/master/data/task1/raw")
_WIT3 = "https://raw.githubusercontent.com/hlt-mt/WIT3/master/archive"
_SACREBLEU = "sacrebleu 2.6 DATASETS['{}']"
_COMMONCRAWL = Source(f"{_STATMT}/wmt13/training-parallel-commoncrawl.tgz", "training-parallel-commoncrawl.tgz",
                      size=918311367, sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
                      pinned_by=_TFDS.format("wmt14_translate.txt"))
# Multi30k task 1 raw text; MD5s as torchtext's experimental raw datasets (multi30k.py, 2021) publish them
_M30K_MD5 = {
    "train.de": "81ff90b99829c0cd4b1b587d394afd39", "train.en": "0065d13af80720a55ca8153d126e6627",
    "val.de": "6e0e229eb049e3fc99a1ef02fb2d5f91", "val.en": "2b69aa9253948ac9f67e94917272dd40",
    "test_2016_flickr.de": "efd67d314d98489b716b145475101932",
    "test_2016_flickr.en": "ff2c0fcb4893a13bd73414306bc250ae",
}

# corpus -> files; each file is a tuple of alternatives tried in order (the first one a reference uses)
CORPORA: dict[str, list[tuple[Source, ...]]] = {
    "multi30k": [
        tuple(Source(f"{base}/{stem}.gz", f"{stem}.gz", md5=md5,
                     pinned_by="torchtext experimental/datasets/raw/multi30k.py")
              for base in _M30K)
        for stem, md5 in _M30K_MD5.items()
    ],
    # IWSLT 2017 multilingual training release: torchtext's FBK SharePoint URL (its Google Drive id is gone);
    # if it fails, the bilingual de-en release of the same campaign from FBK's WIT3 repository (SacreBLEU's
    # source for iwslt17/dev2010; same train.tags.de-en / dev2010 file names, not byte-compared here)
    "iwslt17-de-en": [(
        Source("https://fbk.sharepoint.com/sites/MTUnit/_layouts/15/download.aspx?SourceUrl=%2Fsites%2FMTUnit"
               "%2FShared%20Documents%2Fwebsites%2FWIT3%2Dlibrary%2F2017%2D01%2Dtrnmted%2Etgz",
               "2017-01-trnmted.tgz", md5="aca701032b1c4411afc4d9fa367796ba",
               pinned_by="torchtext datasets/iwslt2017.py"),
        Source(f"{_WIT3}/2017-01-trnted/texts/de/en/de-en.tgz", "2017-01-trnted-de-en.tgz",
               md5="ca2b94d694150d4d6c5dc64c200fa589", pinned_by=_SACREBLEU.format("iwslt17/dev2010")),
    )],
    # IWSLT 2017 official test archives (source sides: de-en.tgz holds German, en-de.tgz English), from
    # FBK's WIT3 repository as SacreBLEU fetches them (wit3.fbk.eu stopped serving them in 2021); the
    # SHA-256 values were measured on the copies in ../shared/data, whose MD5s equal SacreBLEU's
    "iwslt17-de-en-test": [
        (Source(f"{_WIT3}/2017-01-ted-test/texts/de/en/de-en.tgz", "de-en.tgz", md5="e3f5b2a075a2da1a395c8b60bf1e9be1",
                sha256="b0034e3c957da26eaf3c573390c3fc669d509ea94c0b398889ad74bddadb4974",
                pinned_by=_SACREBLEU.format("iwslt17")),),
        (Source(f"{_WIT3}/2017-01-ted-test/texts/en/de/en-de.tgz", "en-de.tgz", md5="b68e7097b179491f6c466ef41ad72b9b",
                sha256="0c786a6905618af716da365592594473481ba9548a922506aaf6c17f1aee27e4",
                pinned_by=_SACREBLEU.format("iwslt17")),),
    ],
    # IWSLT 2014 TED de-en, the URL of fairseq's examples/translation/prepare-iwslt14.sh; no maintained
    # reference publishes its digest (unpinned upstream: trust on first use)
    "iwslt14-de-en": [(Source("http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz", "de-en.tgz"),)],
    # Kyoto Free Translation Task 1.0 (Neubig, 2011); SHA-1 as daac-tools/vibrato checks it
    "kftt-ja-en": [(Source("http://www.phontron.com/kftt/download/kftt-data-1.0.tar.gz", "kftt-data-1.0.tar.gz",
                           sha1="0e1f5a9dc993b7d74ca6a0521232d17ce94c8cb4",
                           pinned_by="daac-tools/vibrato scripts/prepare_ipadic-mecab-2_7_0.sh"),)],
    # WMT16 news task ro-en: Europarl v8 + SETimes2 (newsdev2016 / newstest2016 via SacreBLEU)
    "wmt16-ro-en": [
        (Source("http://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz",
                "training-parallel-ep-v8.tgz",
                size=225018324, sha256="8917bd3bef3bc894c8519ca1f8a4c7c330aad08a1263655a9d99ee13d532e3c7",
                pinned_by=_TFDS.format("wmt16_translate.txt")),),
        # OPUS's Moses-format release, the URL form mozilla/firefox-translations-training fetches; OPUS
        # publishes no digest (unpinned upstream: trust on first use)
        (Source("https://object.pouta.csc.fi/OPUS-SETIMES/v2/moses/en-ro.txt.zip", "setimes2-en-ro.txt.zip"),),
    ],
    # WMT14 en-de: Europarl v7, Common Crawl, News Commentary v9 (fairseq prepare-wmt14en2de.sh --icml17)
    "wmt14-en-de": [
        (Source(f"{_STATMT}/wmt13/training-parallel-europarl-v7.tgz", "training-parallel-europarl-v7.tgz",
                size=657632379, sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
                pinned_by=_TFDS.format("wmt14_translate.txt")),),
        (_COMMONCRAWL,),
        (Source(f"{_STATMT}/wmt14/training-parallel-nc-v9.tgz", "training-parallel-nc-v9.tgz",
                size=80418416, sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
                pinned_by=_TFDS.format("wmt14_translate.txt")),),
    ],
    # WMT13 en-ru without the Yandex corpus (licence), as Tezekbayev et al.: Common Crawl, News Commentary
    # v8 and the Wiki Headlines as tfds' wmt13 builds them; newstest2012 (dev) from the WMT dev archive
    "wmt13-en-ru": [
        (_COMMONCRAWL,),
        (Source(f"{_STATMT}/wmt13/training-parallel-nc-v8.tgz", "training-parallel-nc-v8.tgz",
                size=92821866, sha256="df5801d6776190ea48e7241ee97100d81e2f89d7c352c9cd11432c8855c73c28",
                pinned_by=_TFDS.format("wmt13_translate.txt")),),
        # tfds reads wiki/ru-en/wiki.ru-en from the WMT15 release and notes the WMT14 one holds the same file
        (Source(f"{_STATMT}/wmt15/wiki-titles.tgz", "wiki-titles.tgz",
                size=9487481, sha256="cd7cf81dbc99ef00b57e3106a4731b54cebcb7cff19088913cdab1c8114d3660",
                pinned_by=_TFDS.format("wmt17_translate.txt")),
         Source(f"{_STATMT}/wmt14/wiki-titles.tgz", "wiki-titles-wmt14.tgz",
                size=8168057, sha256="3a0bbb5d05cb9c3daccfab2078b0044f34f3b8b8bdd54b185b84ade36eadb9b6",
                pinned_by=_TFDS.format("wmt14_translate.txt"))),
        # dev/newstest2012.{en,ru}: tfds' source (WMT19 dev archive), else fairseq's (WMT17 dev archive);
        # extract.py reads no training pairs from these two (its DEV_ARCHIVES)
        (Source("http://data.statmt.org/wmt19/translation-task/dev.tgz", "dev.tgz",
                size=38654961, sha256="7a7deccf82ebb05ba508dba5eb21356492224e8f630ec4f992132b029b4b25e7",
                pinned_by=_TFDS.format("wmt13_translate.txt")),
         Source("http://data.statmt.org/wmt17/translation-task/dev.tgz", "dev-wmt17.tgz",
                md5="9b1aa63c1cf49dccdd20b962fe313989", pinned_by="awslabs/sockeye contrib/autopilot/tasks.py")),
    ],
}
# CoNLL-SIGMORPHON 2018 (git); task1/ at this commit is byte-identical to ../shared/data's archive (604 files)
GIT = {"sigmorphon2018": GitSource("https://github.com/sigmorphon/conll2018",
                                   "490e2e0693241f708670d9d1c56803b754fab7cd")}


_LABEL = {"md5": "MD5", "sha1": "SHA-1", "sha256": "SHA-256"}


def file_digests(path: Path, algos: list[str]) -> dict[str, str]:
    """Hex digests of ``path`` for each algorithm, in one pass over the file."""
    hs = {a: hashlib.new(a) for a in algos}
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            for h in hs.values():
                h.update(block)
    return {a: h.hexdigest() for a, h in hs.items()}


class _Cut(Exception):
    """The transfer stopped before the announced length: resume with a Range request."""


def _fetch_once(url: str, part: Path, chunk: int, progress: bool, timeout: float) -> None:
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"User-Agent": "onmt-entmax-download"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # the range starts past the end: the part file is not this file
            part.unlink()
            raise _Cut("range not satisfiable") from err
        raise
    with resp:
        if have and resp.status == 206 and not (resp.headers.get("Content-Range") or "").startswith(f"bytes {have}-"):
            part.unlink()  # another range than asked for: start over
            raise _Cut("the server answered another range")
        if have and resp.status != 206:
            have = 0  # the server ignored the range and sends the whole file
        total = have + resp.length if resp.length is not None else None
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=have, unit="B", unit_scale=True, desc=part.name[:-5])
        try:
            with open(part, "ab" if have else "wb") as out:
                while block := resp.read(chunk):
                    out.write(block)
                    if bar is not None:
                        bar.update(len(block))
        except (http.client.HTTPException, OSError) as err:
            raise _Cut(str(err)) from err
        finally:
            if bar is not None:
                bar.close()
    got = part.stat().st_size
    if total is not None and got < total:  # http.client returns b"" when the peer closes early
        raise _Cut(f"{got} of {total} bytes")


def fetch(url: str, dest: Path, chunk: int = 1 << 16, progress: bool = True, retries: int = 5,
          timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` through ``dest.part``, resuming a cut transfer with a Range request
    (``retries`` times in this call; a later call resumes from the part file). Errors of the first
    response (HTTP 404, refused connection, ...) are raised as ``urllib.error.URLError``."""
    if dest.exists():
        return dest
    part = dest.with_name(dest.name + ".part")
    for attempt in range(retries + 1):
        try:
            _fetch_once(url, part, chunk, progress, timeout)
        except _Cut as cut:
            if attempt == retries:
                raise DownloadError(f"{url}: transfer cut {retries + 1} times ({cut}); {part} is kept and "
                                    "the next run resumes it") from cut
            continue
        part.rename(dest)
        return dest
    raise AssertionError("unreachable")


def _reject(path: Path, reason: str) -> DownloadError:
    rejected = path.with_name(path.name + ".rejected")
    path.replace(rejected)
    return DownloadError(f"{path}: {reason}; moved to {rejected.name} (rerun with --no-verify if the upstream "
                         "file changed)")


def verify(path: Path, src: Source, lock: Path, check: bool = True) -> None:
    """Refuse ``path`` unless its size and digests equal the published ones, or, for a file no reference
    pins, the SHA-256 recorded at its first download in ``lock`` (recorded now if absent).
    ``check=False`` (``--no-verify``) accepts the file and records its SHA-256 as the new reference."""
    algos = sorted(set(src.digests) | {"sha256"})
    got = file_digests(path, algos)
    recorded = json.loads(lock.read_text()) if lock.exists() else {}
    key = f"{path.parent.name}/{path.name}"
    if check and src.digests:
        size = path.stat().st_size
        if src.size is not None and size != src.size:
            raise _reject(path, f"{size} bytes, not the {src.size} published by {src.pinned_by}")
        for algo, expected in src.digests.items():
            if got[algo] != expected:
                raise _reject(path, f"{_LABEL[algo]} {got[algo]} differs from {expected} published by {src.pinned_by}")
    elif check and key in recorded and recorded[key] != got["sha256"]:
        raise _reject(path, f"SHA-256 {got['sha256']} differs from {recorded[key]} recorded in {lock} at its first "
                            "download (no reference publishes one)")
    if not check:
        print(f"{path}: not verified (--no-verify); SHA-256 {got['sha256']}", file=sys.stderr)
    if not src.digests or not check:
        recorded[key] = got["sha256"]
        lock.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def _reason(err: Exception) -> str:
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code} {err.reason}"
    return str(getattr(err, "reason", err))


def download_file(alternatives: tuple[Source, ...], folder: Path, lock: Path, check: bool = True,
                  progress: bool = True) -> Path:
    """The first alternative that downloads and verifies (a complete file already here is checked first)."""
    errors = []
    for src in alternatives:
        if (folder / src.name).exists():
            try:
                verify(folder / src.name, src, lock, check)
                return folder / src.name
            except DownloadError as err:
                errors.append(str(err))
                print(err, file=sys.stderr)
    for i, src in enumerate(alternatives):
        dest = folder / src.name
        try:
            fetch(src.url, dest, progress=progress)
            verify(dest, src, lock, check)
            return dest
        except (DownloadError, http.client.HTTPException, OSError) as err:  # OSError: URLError, timeouts
            errors.append(str(err) if isinstance(err, DownloadError) else f"{src.url}: {_reason(err)}")
            if i + 1 < len(alternatives):
                print(f"{errors[-1]}; trying {alternatives[i + 1].url}", file=sys.stderr)
    raise DownloadError(" | ".join(errors))


def clone(src: GitSource, dest: Path) -> Path:
    """``git clone`` ``src.url`` into ``dest`` checked out at ``src.commit`` (an existing clone is checked)."""
    def head() -> str:
        return subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()

    if not (dest / ".git").exists():
        if dest.exists() and any(dest.iterdir()):
            raise DownloadError(f"{dest} exists and is not a git clone of {src.url}; move it away")
        for cmd in (["git", "clone", "--quiet", "--no-checkout", src.url, str(dest)],
                    ["git", "-C", str(dest), "checkout", "--quiet", "--detach", src.commit]):
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
                raise DownloadError(f"{' '.join(cmd)} failed: {last}")
    if head() != src.commit:
        raise DownloadError(f"{dest} is checked out at {head()}, not the pinned {src.commit} of {src.url}")
    return dest


def download(corpus: str, out: Path, progress: bool = True, check: bool = True) -> list[Path]:
    if corpus in GIT:
        return [clone(GIT[corpus], out / corpus)]
    if corpus not in CORPORA:
        raise KeyError(f"unknown corpus {corpus!r}; known: {', '.join(sorted([*CORPORA, *GIT]))}")
    folder = out / corpus
    folder.mkdir(parents=True, exist_ok=True)
    return [download_file(alts, folder, out / "checksums.lock", check, progress) for alts in CORPORA[corpus]]


def describe(src: Source) -> str:
    if not src.digests:
        return "unpinned upstream (trust on first use)"
    pins = " ".join(f"{a}={d}" for a, d in src.digests.items()) + (f" size={src.size}" if src.size else "")
    return f"{pins} ({src.pinned_by})"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", nargs="*", help=f"any of: {', '.join(sorted([*CORPORA, *GIT]))}")
    p.add_argument("--out", type=Path, default=Path("work/downloads"))
    p.add_argument("--list", action="store_true", help="print the sources and their pins, then exit")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-verify", action="store_true",
                   help="accept files whose size or digest differs from the published one (a changed upstream); "
                        "their SHA-256 is printed and recorded in <out>/checksums.lock")
    a = p.parse_args(argv)
    if a.list or not a.corpus:
        for name, files in sorted(CORPORA.items()):
            for alternatives in files:
                for i, s in enumerate(alternatives):
                    print(f"{name}\t{'fallback ' if i else ''}{s.name}\t{s.url}\t{describe(s)}")
        for name, g in GIT.items():
            print(f"{name}\tgit\t{g.url}\tcommit {g.commit}")
        return
    for corpus in a.corpus:
        try:
            paths = download(corpus, a.out, progress=not a.no_progress, check=not a.no_verify)
        except (DownloadError, KeyError) as err:
            sys.exit(f"error: {err.args[0]}")
        for path in paths:
            print(path)


if __name__ == "__main__":
    main()
