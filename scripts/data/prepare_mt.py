#!/usr/bin/env python3
"""Plain parallel text -> Moses-tokenized and BPE-segmented files for OpenNMT-py, the papers' recipes.

    python3 scripts/data/prepare_mt.py iwslt17-de-en --raw work/data/iwslt17-de-en/raw --out work/data/iwslt17-de-en

Per language side: Moses punctuation normalisation and tokenization (sacremoses; skipped for corpora
released tokenized: KFTT, IWSLT'14 test sets), Romanian: cedilla -> comma-below letters and
diacritics removed (Sennrich et al., 2016b, as Peters et al.), lower-casing where the recipe says so
(IWSLT'14), then BPE with subword-nmt learned on the training split: joint (both sides' text
together) or separate per language, with the recipe's number of merges.

Writes ``OUT/{split}.tok.{lang}`` (tokenized, the references of tokenized BLEU), ``OUT/{split}.bpe.{lang}``
(model input/output), ``OUT/bpe.codes[.lang]``, and ``OUT/{split}.raw.{lang}`` (untouched copies,
the references of SacreBLEU). ``--subword sentencepiece`` segments the same tokenized text with a
SentencePiece BPE model (``OUT/bpe.codes.spm[.lang].model``) instead of subword-nmt.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Recipe:
    langs: tuple[str, str]
    merges: int
    joint: bool = True
    tokenize: bool = True  # False: the corpus is released tokenized
    lowercase: bool = False
    max_len: int = 0  # training pairs longer than this (tokens, after tokenization) are dropped; 0: keep
    max_ratio: float = 0.0  # training pairs whose length ratio exceeds this are dropped; 0: keep
    source: str = ""


RECIPES = {
    # Peters et al. 2019: joint BPE 32k merges (IWSLT'17, KFTT), separate 25k a language (WMT'16 RO-EN)
    "iwslt17-de-en": Recipe(("de", "en"), 32000, source="Peters et al. 2019, §4.2"),
    "kftt-ja-en": Recipe(("ja", "en"), 32000, tokenize=False, source="Peters et al. 2019, §4.2 (KFTT's tokenization)"),
    "wmt16-ro-en": Recipe(("ro", "en"), 25000, joint=False, source="Peters et al. 2019, §4.2"),
    # Tezekbayev et al.: 10k (IWSLT'14, fairseq recipe: lower-cased, clean length 175 ratio 1.5), 40k, 60k
    "iwslt14-de-en": Recipe(("de", "en"), 10000, lowercase=True, max_len=175, max_ratio=1.5, source="Tezekbayev et al. §4; fairseq prepare-iwslt14"),
    "wmt14-en-de": Recipe(("en", "de"), 40000, max_len=250, max_ratio=1.5, source="Tezekbayev et al. §4"),
    "wmt13-en-ru": Recipe(("en", "ru"), 60000, max_len=250, max_ratio=1.5, source="Tezekbayev et al. §4"),
    # our small real stand-in
    "multi30k": Recipe(("de", "en"), 8000, source="this project (small corpus trainable on CPU)"),
}

# Sennrich's WMT16 Romanian preprocessing: normalise cedilla forms to comma-below, then drop diacritics
_RO_NORMALISE = str.maketrans({"Ş": "Ș", "ş": "ș", "Ţ": "Ț", "ţ": "ț"})
_RO_STRIP = str.maketrans({"Ș": "S", "ș": "s", "Ț": "T", "ț": "t", "Ă": "A", "ă": "a", "Â": "A", "â": "a", "Î": "I", "î": "i"})


def romanian(line: str) -> str:
    """Cedilla -> comma-below, then ș ț ă â î (and capitals) -> s t a a i."""
    return line.translate(_RO_NORMALISE).translate(_RO_STRIP)


_WORKER: dict = {}


def _init(lang: str, recipe: Recipe) -> None:
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    _WORKER.update(lang=lang, recipe=recipe, norm=MosesPunctNormalizer(lang=lang), tok=MosesTokenizer(lang=lang))


def _process(line: str) -> str:
    """One line through normalisation / tokenization / lower-casing (runs in a worker)."""
    r: Recipe = _WORKER["recipe"]
    line = unicodedata.normalize("NFC", line.strip())
    if r.tokenize:
        line = _WORKER["norm"].normalize(line)
    if _WORKER["lang"] == "ro":
        line = romanian(line)
    if r.tokenize:
        line = _WORKER["tok"].tokenize(line, escape=False, return_str=True)
    if r.lowercase:
        line = line.lower()
    return " ".join(line.split())


def tokenize_lines(lines: list[str], lang: str, recipe: Recipe, jobs: int = 1) -> list[str]:
    if jobs <= 1:
        _init(lang, recipe)
        return [_process(x) for x in lines]
    with mp.get_context("spawn").Pool(jobs, initializer=_init, initargs=(lang, recipe)) as pool:
        return pool.map(_process, lines, chunksize=2000)


def clean_pairs(src: list[str], tgt: list[str], max_len: int, max_ratio: float) -> tuple[list[str], list[str]]:
    """Drop empty pairs, pairs with a side over ``max_len`` tokens, or a length ratio over ``max_ratio``."""
    keep_s, keep_t = [], []
    for s, t in zip(src, tgt):
        ns, nt = len(s.split()), len(t.split())
        if ns == 0 or nt == 0:
            continue
        if max_len and (ns > max_len or nt > max_len):
            continue
        if max_ratio and max(ns, nt) / min(ns, nt) > max_ratio:
            continue
        keep_s.append(s)
        keep_t.append(t)
    return keep_s, keep_t


def learn_bpe(texts: list[Path], codes: Path, merges: int, jobs: int = 1) -> None:
    """subword-nmt learn-bpe on the concatenation of ``texts``."""
    from subword_nmt.learn_bpe import learn_bpe as _learn

    joined = codes.with_suffix(".train.tmp")
    with open(joined, "w", encoding="utf-8") as out:
        for t in texts:
            with open(t, encoding="utf-8") as f:
                shutil.copyfileobj(f, out)
    with open(joined, encoding="utf-8") as inp, open(codes, "w", encoding="utf-8") as out:
        _learn(inp, out, merges, num_workers=jobs)
    joined.unlink()


def apply_bpe(codes: Path, src: Path, dst: Path) -> None:
    from subword_nmt.apply_bpe import BPE

    with open(codes, encoding="utf-8") as c:
        bpe = BPE(c)
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for line in f:
            out.write(bpe.process_line(line))


def learn_sentencepiece(texts: list[Path], prefix: Path, vocab_size: int, lang: str = "") -> None:
    """SentencePiece BPE model ``prefix.model`` on the concatenation of ``texts`` (already tokenized)."""
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        input=",".join(map(str, texts)), model_prefix=str(prefix), vocab_size=vocab_size, model_type="bpe",
        character_coverage=0.9995 if lang in ("ja", "zh") else 1.0, input_sentence_size=2_000_000,
        shuffle_input_sentence=True, minloglevel=2)


def apply_sentencepiece(model: Path, src: Path, dst: Path) -> None:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for line in f:
            out.write(" ".join(sp.encode(line.rstrip("\n"), out_type=str)) + "\n")


def prepare(corpus: str, raw: Path, out: Path, jobs: int = 1, bpe_split: str = "train",
            merges: int | None = None, max_lines: int | None = None, subword: str = "subword-nmt") -> dict:
    """Run the recipe of ``corpus`` on ``raw/{split}.{lang}``; returns a summary (also in OUT/prepare.json).

    ``subword``: "subword-nmt" (the papers' BPE, ``merges`` merge operations) or "sentencepiece"
    (SentencePiece BPE with a vocabulary of ``merges`` pieces, on the same tokenized text)."""
    if subword not in ("subword-nmt", "sentencepiece"):
        raise ValueError(f"--subword must be subword-nmt or sentencepiece, got {subword!r}")
    if corpus not in RECIPES:
        raise KeyError(f"unknown corpus {corpus!r}; known: {', '.join(sorted(RECIPES))}")
    recipe = RECIPES[corpus]
    l1, l2 = recipe.langs
    splits = sorted({p.name.rsplit(".", 1)[0] for p in raw.glob(f"*.{l1}")} & {p.name.rsplit(".", 1)[0] for p in raw.glob(f"*.{l2}")})
    splits = [s for s in splits if not s.endswith(".orig")]
    if bpe_split not in splits:
        raise FileNotFoundError(f"{raw}: no {bpe_split}.{l1} / {bpe_split}.{l2} to learn BPE on (have {splits})")
    out.mkdir(parents=True, exist_ok=True)
    summary = {"corpus": corpus, "recipe": asdict(recipe), "bpe_learned_on": bpe_split, "lines": {}}
    for split in splits:
        side = {}
        for lang in (l1, l2):
            lines = (raw / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:max_lines]
            # references for SacreBLEU: the untokenized originals when the corpus ships tokenized (KFTT)
            orig = raw / f"{split}.orig.{lang}"
            refs = orig.read_text(encoding="utf-8").splitlines()[:max_lines] if orig.exists() else lines
            (out / f"{split}.raw.{lang}").write_text("".join(x + "\n" for x in refs), encoding="utf-8")
            side[lang] = tokenize_lines(lines, lang, recipe, jobs)
        if len(side[l1]) != len(side[l2]):
            raise ValueError(f"{split}: {len(side[l1])} {l1} lines but {len(side[l2])} {l2} lines")
        if split == "train":  # only training pairs are filtered: dev/test stay aligned with their references
            side[l1], side[l2] = clean_pairs(side[l1], side[l2], recipe.max_len, recipe.max_ratio)
        for lang in (l1, l2):
            (out / f"{split}.tok.{lang}").write_text("".join(x + "\n" for x in side[lang]), encoding="utf-8")
        summary["lines"][split] = len(side[l1])
    n = merges or recipe.merges
    learn, apply, suffix = ((learn_bpe, apply_bpe, "") if subword == "subword-nmt" else
                            (lambda t, c, k, j: learn_sentencepiece(t, c, k, c.name.rsplit(".", 1)[-1]),
                             lambda c, a, b: apply_sentencepiece(c.with_suffix(c.suffix + ".model"), a, b), ".spm"))
    if recipe.joint:
        codes = {l1: out / f"bpe.codes{suffix}", l2: out / f"bpe.codes{suffix}"}
        learn([out / f"{bpe_split}.tok.{l1}", out / f"{bpe_split}.tok.{l2}"], codes[l1], n, jobs)
    else:
        codes = {lang: out / f"bpe.codes{suffix}.{lang}" for lang in (l1, l2)}
        for lang in (l1, l2):
            learn([out / f"{bpe_split}.tok.{lang}"], codes[lang], n, jobs)
    for split in splits:
        for lang in (l1, l2):
            apply(codes[lang], out / f"{split}.tok.{lang}", out / f"{split}.bpe.{lang}")
    summary["merges"] = n
    summary["subword"] = subword
    (out / "prepare.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", choices=sorted(RECIPES))
    p.add_argument("--raw", type=Path, required=True, help="folder of {split}.{lang} files (extract.py)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--jobs", type=int, default=1, help="worker processes for tokenization and learn-bpe")
    p.add_argument("--bpe-split", default="train", help="split to learn BPE on (dev only for smoke tests)")
    p.add_argument("--merges", type=int, help="override the recipe's number of BPE merges (smoke tests)")
    p.add_argument("--max-lines", type=int, help="keep the first N lines of every split (smoke tests)")
    p.add_argument("--subword", default="subword-nmt", choices=["subword-nmt", "sentencepiece"],
                   help="subword-nmt BPE (the papers) or SentencePiece BPE (vocabulary size = --merges)")
    a = p.parse_args(argv)
    print(json.dumps(prepare(a.corpus, a.raw, a.out, a.jobs, a.bpe_split, a.merges, a.max_lines, a.subword), indent=1))


if __name__ == "__main__":
    main()
