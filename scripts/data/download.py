#!/usr/bin/env python3
"""Download the corpora of the reproduction pipelines from their official sources.

    python3 scripts/data/download.py multi30k --out work/downloads
    python3 scripts/data/download.py --list

Each file is fetched with HTTP range requests, so an interrupted download resumes where it stopped
(``<name>.part``), with a progress bar (tqdm), then checked: against the MD5/SHA-256 published
for it when we know one (``md5`` / ``sha256`` below), otherwise against the SHA-256 recorded on the
first complete download in ``<out>/checksums.lock`` (trust on first use: later downloads, e.g. on a
cluster node, must match the first one). WMT dev/test sets are not downloaded here: SacreBLEU
fetches and checks them itself (``sacrebleu -t wmt14/full -l en-de --echo src``), see
``scripts/data/extract.py``. SIGMORPHON 2018 is a git repository (``git clone`` below).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    url: str
    name: str  # file name under <out>/<corpus>/
    md5: str | None = None
    sha256: str | None = None


_M30K = "https://github.com/multi30k/dataset/raw/master/data/task1/raw"
_STATMT = "https://www.statmt.org"
CORPORA: dict[str, list[Source]] = {
    # Multi30k task 1 (Elliott et al., 2016), official repository
    "multi30k": [
        Source(f"{_M30K}/{split}.{lang}.gz", f"{split}.{lang}.gz")
        for split in ("train", "val", "test_2016_flickr") for lang in ("de", "en")
    ],
    # IWSLT 2017 TED, multilingual training/dev release (WIT3; MD5 as published by torchtext)
    "iwslt17-de-en": [
        Source("https://drive.google.com/uc?export=download&confirm=t&id=12ycYSzLIG253AFN35Y6qoyf9wtkOjakp",
               "2017-01-trnmted.tgz", md5="aca701032b1c4411afc4d9fa367796ba"),
    ],
    # IWSLT 2017 official test archives (source sides; de-en.tgz holds German, en-de.tgz English);
    # SHA-256 measured on the copies in ../shared/data (`sha256sum *.tgz`)
    "iwslt17-de-en-test": [
        Source("https://wit3.fbk.eu/archive/2017-01-ted-test/texts/de/en/de-en.tgz", "de-en.tgz",
               sha256="b0034e3c957da26eaf3c573390c3fc669d509ea94c0b398889ad74bddadb4974"),
        Source("https://wit3.fbk.eu/archive/2017-01-ted-test/texts/en/de/en-de.tgz", "en-de.tgz",
               sha256="0c786a6905618af716da365592594473481ba9548a922506aaf6c17f1aee27e4"),
    ],
    # IWSLT 2014 TED de-en (WIT3 archive used by the common fairseq recipe)
    "iwslt14-de-en": [Source("http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz", "de-en.tgz")],
    # Kyoto Free Translation Task 1.0 (Neubig, 2011)
    "kftt-ja-en": [Source("http://www.phontron.com/kftt/download/kftt-data-1.0.tar.gz", "kftt-data-1.0.tar.gz")],
    # WMT16 news task ro-en: Europarl v8 + SETimes2, newsdev2016 / newstest2016
    "wmt16-ro-en": [
        Source("http://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz", "training-parallel-ep-v8.tgz"),
        Source("https://object.pouta.csc.fi/OPUS-SETIMES/v2/moses/en-ro.txt.zip", "setimes2-en-ro.txt.zip"),
    ],
    # WMT14 en-de (Europarl v7, Common Crawl, News Commentary v9)
    "wmt14-en-de": [
        Source(f"{_STATMT}/wmt13/training-parallel-europarl-v7.tgz", "training-parallel-europarl-v7.tgz"),
        Source(f"{_STATMT}/wmt13/training-parallel-commoncrawl.tgz", "training-parallel-commoncrawl.tgz"),
        Source(f"{_STATMT}/wmt14/training-parallel-nc-v9.tgz", "training-parallel-nc-v9.tgz"),
    ],
    # WMT13 en-ru without the Yandex corpus (licence), as Tezekbayev et al.
    "wmt13-en-ru": [
        Source(f"{_STATMT}/wmt13/training-parallel-commoncrawl.tgz", "training-parallel-commoncrawl.tgz"),
        Source(f"{_STATMT}/wmt13/training-parallel-nc-v8.tgz", "training-parallel-nc-v8.tgz"),
        Source(f"{_STATMT}/wmt13/wiki-headlines.tgz", "wiki-headlines.tgz"),
    ],
}
GIT = {"sigmorphon2018": "git clone --depth 1 https://github.com/sigmorphon/conll2018 work/downloads/sigmorphon2018"}


def file_digest(path: Path, algo: str) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(url: str, dest: Path, chunk: int = 1 << 16, progress: bool = True) -> Path:
    """Download ``url`` to ``dest``, resuming ``dest.part`` with an HTTP Range request."""
    if dest.exists():
        return dest
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"User-Agent": "onmt-entmax-download"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    with urllib.request.urlopen(req) as resp:
        if have and resp.status != 206:  # server ignored the range: start over
            have = 0
        total = resp.length + have if resp.length is not None else None
        mode = "ab" if have else "wb"
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=have, unit="B", unit_scale=True, desc=dest.name)
        with open(part, mode) as out:
            while block := resp.read(chunk):
                out.write(block)
                if bar is not None:
                    bar.update(len(block))
        if bar is not None:
            bar.close()
    part.rename(dest)
    return dest


def verify(path: Path, src: Source, lock: Path) -> None:
    """Check a published digest, else the one recorded at first download (written if absent)."""
    if src.md5 and file_digest(path, "md5") != src.md5:
        raise ValueError(f"{path}: MD5 differs from the published {src.md5}; delete it and retry")
    if src.sha256 and file_digest(path, "sha256") != src.sha256:
        raise ValueError(f"{path}: SHA-256 differs from the published {src.sha256}; delete it and retry")
    recorded = json.loads(lock.read_text()) if lock.exists() else {}
    digest = file_digest(path, "sha256")
    key = f"{path.parent.name}/{path.name}"
    if key in recorded and recorded[key] != digest:
        raise ValueError(f"{path}: SHA-256 {digest} differs from {recorded[key]} in {lock} (changed upstream?)")
    recorded[key] = digest
    lock.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def download(corpus: str, out: Path, progress: bool = True) -> list[Path]:
    if corpus not in CORPORA:
        raise KeyError(f"unknown corpus {corpus!r}; known: {', '.join(sorted(CORPORA))}")
    folder = out / corpus
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for src in CORPORA[corpus]:
        path = fetch(src.url, folder / src.name, progress=progress)
        verify(path, src, out / "checksums.lock")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", nargs="*", help=f"any of: {', '.join(sorted(CORPORA))}")
    p.add_argument("--out", type=Path, default=Path("work/downloads"))
    p.add_argument("--list", action="store_true", help="print the sources and exit")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    if a.list or not a.corpus:
        for name, sources in sorted(CORPORA.items()):
            for s in sources:
                print(f"{name}\t{s.url}\t{s.md5 or s.sha256 or 'TOFU'}")
        for name, cmd in GIT.items():
            print(f"{name}\t{cmd}")
        return
    for corpus in a.corpus:
        if corpus in GIT:
            print(f"{corpus}: run `{GIT[corpus]}`", file=sys.stderr)
            continue
        for path in download(corpus, a.out, progress=not a.no_progress):
            print(path)


if __name__ == "__main__":
    main()
