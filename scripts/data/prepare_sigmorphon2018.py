#!/usr/bin/env python3
"""CoNLL-SIGMORPHON 2018 task 1 -> OpenNMT-py files for one multilingual model.

Reads the released archive (``task1/all/`` and ``task1/surprise/``, as Peters et al. 2019 used
them together), its extracted folder, or the git clone ``download.py sigmorphon2018`` makes (pinned
commit; its task1/ equals the archive), keeps every language that has ``<lang>-train-<setting>``,
and writes

    OUT/src-{train,dev,test}.txt, OUT/tgt-{train,dev,test}.txt   all languages, one model
                                                                 (train shuffled, dev/test by language)
    OUT/languages.txt                                            languages kept, one a line
    OUT/per-language/<lang>.{dev,test}.{src,tgt}                 unless --no-per-language

Source line: ``lang TAG_1 .. TAG_k c h a r s``; target line: characters of the form
(encoding in ``onmt_entmax.evaluation.sigmorphon``). ``--sample-*`` keeps a seeded random subset
of N examples a language, in file order (used to make ``data/sigmorphon2018-sample``).
"""
from __future__ import annotations

import argparse
import random
import re
import sys
import tarfile
from pathlib import Path

try:
    from onmt_entmax.evaluation import sigmorphon as fmt
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from onmt_entmax.evaluation import sigmorphon as fmt

SPLITS = ("train", "dev", "test")
_NAME = re.compile(r"^task1/(all|surprise)/(.+)-(train-high|train-medium|train-low|dev|test|covered-test)$")


def load_task1(source: Path) -> dict[tuple[str, str], list[str]]:
    """{(language, kind): lines} for every task-1 data file in an archive or extracted folder."""
    if source.is_dir():
        root = source.parent if source.name == "task1" else source
        # a git clone also holds task1/baseline/, task1/evaluation/ (with folders): read data files only
        texts = {
            name: p.read_text(encoding="utf-8")
            for p in root.glob("task1/*/*")
            if p.is_file() and _NAME.match(name := str(p.relative_to(root)).replace("\\", "/"))
        }
    else:  # one pass over the archive (41 MB unpacked): reopening a .tar.gz per member is quadratic
        with tarfile.open(source) as tar:
            texts = {
                m.name.lstrip("./"): tar.extractfile(m).read().decode("utf-8")  # type: ignore[union-attr]
                for m in tar if m.isfile() and _NAME.match(m.name.lstrip("./"))
            }
    files: dict[tuple[str, str], list[str]] = {}
    for name, text in texts.items():
        m = _NAME.match(name)
        if m is None:
            continue
        key = (m.group(2), m.group(3))
        if key in files:
            raise ValueError(f"{key[0]}-{key[1]} appears twice in {source} (all/ and surprise/?)")
        files[key] = text.splitlines()
    if not files:
        raise FileNotFoundError(f"no task1/all or task1/surprise files in {source}")
    return files


def sample(rows: list, n: int | None, rng: random.Random) -> list:
    """``n`` rows chosen uniformly at random, kept in their original order (all if n is None)."""
    if n is None or n >= len(rows):
        return rows
    keep = sorted(rng.sample(range(len(rows)), n))
    return [rows[i] for i in keep]


def prepare(
    source: Path,
    out: Path,
    setting: str = "medium",
    languages: list[str] | None = None,
    sizes: dict[str, int | None] | None = None,
    seed: int = 1,
    per_language: bool = True,
) -> list[str]:
    """Write the OpenNMT-py files (see module docstring); returns the languages written."""
    if setting not in ("high", "medium", "low"):
        raise ValueError(f"--setting must be high, medium or low, got {setting!r}")
    files = load_task1(source)
    available = sorted(lang for lang, kind in files if kind == f"train-{setting}")
    if languages:
        missing = [lang for lang in languages if lang not in available]
        if missing:
            raise ValueError(f"--languages {missing} have no train-{setting} file in {source}")
        available = [lang for lang in available if lang in languages]
    sizes = sizes or {}
    out.mkdir(parents=True, exist_ok=True)
    if per_language:
        (out / "per-language").mkdir(exist_ok=True)
    handles = {
        (side, split): open(out / f"{side}-{split}.txt", "w", encoding="utf-8")
        for side in ("src", "tgt") for split in SPLITS
    }
    train: list[tuple[str, str]] = []
    try:
        for lang in available:
            rng = random.Random(f"{seed}-{lang}")  # per-language stream: a subset does not depend on others
            for split in SPLITS:
                kind = f"train-{setting}" if split == "train" else split
                if (lang, kind) not in files:
                    raise FileNotFoundError(f"{lang}-{kind} missing in {source}")
                rows = fmt.read_sigmorphon(files[lang, kind])
                rows = sample(rows, sizes.get(split), rng)
                pairs = []
                for lemma, form, tags in rows:
                    if form is None:
                        raise ValueError(f"{lang}-{kind} has no gold forms (2 columns)")
                    pairs.append(fmt.encode_example(lang, lemma, tags, form))
                if split == "train":
                    train.extend(pairs)
                    continue
                for src, tgt in pairs:
                    handles["src", split].write(src + "\n")
                    handles["tgt", split].write(tgt + "\n")
                if per_language and split != "train":
                    base = out / "per-language" / f"{lang}.{split}"
                    Path(f"{base}.src").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
                    Path(f"{base}.tgt").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
        # one model sees every language: mix them so no stretch of training is a single language
        random.Random(seed).shuffle(train)
        for src, tgt in train:
            handles["src", "train"].write(src + "\n")
            handles["tgt", "train"].write(tgt + "\n")
    finally:
        for h in handles.values():
            h.close()
    (out / "languages.txt").write_text("".join(lang + "\n" for lang in available), encoding="utf-8")
    return available


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", type=Path, required=True,
                   help="sigmorphon2018-task1.tar.gz, or the folder holding task1/ (or task1/ itself)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--setting", default="medium", choices=["high", "medium", "low"])
    p.add_argument("--languages", nargs="+", help="default: every language with train-<setting>")
    for split in SPLITS:
        p.add_argument(f"--sample-{split}", type=int, metavar="N", help=f"keep N {split} examples a language")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-per-language", action="store_true", help="skip per-language dev/test files")
    a = p.parse_args(argv)
    sizes = {s: getattr(a, f"sample_{s}") for s in SPLITS}
    for split, n in sizes.items():
        if n is not None and n <= 0:
            p.error(f"--sample-{split} must be positive, got {n}")
    langs = prepare(a.source, a.out, a.setting, a.languages, sizes, a.seed, not a.no_per_language)
    print(f"wrote {len(langs)} languages ({a.setting}) to {a.out}")


if __name__ == "__main__":
    main()
