#!/usr/bin/env python3
"""Plain parallel text -> Moses-tokenized and BPE-segmented files for OpenNMT-py, the papers' recipes.

    python3 scripts/data/prepare_mt.py iwslt17-de-en --raw work/data/iwslt17-de-en/raw --out work/data/iwslt17-de-en

Each recipe (``RECIPES``) is a list of per-line steps for the training split and for dev/test, as the
reference script of its paper runs them: Peters et al.'s corpora NFC, Moses punctuation normalisation,
Romanian cedilla -> comma-below letters and diacritics removed (Sennrich et al., 2016b), tokenization
without escaping; KFTT its released tokenization as is; Tezekbayev et al.'s IWSLT'14 and WMT corpora
fairseq's prepare-iwslt14.sh / prepare-wmt14en2de.sh (tokenizer.perl's XML escaping kept, ``’`` -> ``'``
on the test sets, lower-casing for IWSLT'14, -a hyphen splitting and non-printing characters removed
for WMT). Training pairs are then filtered as Moses' clean-corpus-n.perl does (on the tokens, or on the
BPE output for fairseq's WMT script); IWSLT'14's dev set is every 23rd cleaned training pair. BPE:
subword-nmt learned on the training split, joint (both sides' text together) or separate per language.

Splits listed in ``RAW/pretokenized.txt`` are already in the recipe's tokenization and are passed
through untouched (IWSLT'14 test sets given as fairseq's output, e.g. ../shared/data); IWSLT'14 test
sets read from the release archive are tokenized like the training set.

Writes ``OUT/{split}.tok.{lang}`` (tokenized, the references of tokenized BLEU), ``OUT/{split}.bpe.{lang}``
(model input/output), ``OUT/bpe.codes[.lang]``, and ``OUT/{split}.raw.{lang}`` (untokenized, the
references of SacreBLEU: ``RAW/{split}.orig.{lang}`` where it exists, else ``RAW/{split}.{lang}``).
``--subword sentencepiece`` segments the same tokenized text with a SentencePiece BPE model
(``OUT/bpe.codes.spm[.lang].model``) instead of subword-nmt.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import shutil
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path

PRETOKENIZED = "pretokenized.txt"  # written by extract.py: splits already in their recipe's tokenization
STEPS = ("nfc", "normalize", "remove_non_printing", "straight_apostrophe", "ro_diacritics", "tokenize")
# Peters et al.'s corpora (and our Multi30k stand-in): the same steps on every split
PETERS = ("nfc", "normalize", "ro_diacritics", "tokenize")


@dataclass(frozen=True)
class Recipe:
    langs: tuple[str, str]
    merges: int
    joint: bool = True
    train_steps: tuple[str, ...] = PETERS  # per-line steps, in order (STEPS), for the training split
    eval_steps: tuple[str, ...] = PETERS  # ... and for dev / test
    escape: bool = False  # tokenizer.perl's XML escaping of & | < > ' " [ ] (fairseq keeps it)
    aggressive_dash: bool = False  # tokenizer.perl -a: intra-word hyphens split off as @-@
    lowercase: bool = False  # after tokenization, every split
    max_len: int = 0  # clean-corpus-n.perl: training pairs with a side over this many words dropped; 0: keep
    max_ratio: float = 0.0  # ... or whose length ratio exceeds this; 0: keep
    clean_after_bpe: bool = False  # count subwords of the BPE output (fairseq's WMT script), not tokens
    valid_every: int = 0  # dev = every k-th cleaned training pair (1-based), the rest train (fairseq IWSLT'14)
    source: str = ""

    def __post_init__(self):
        unknown = set(self.train_steps + self.eval_steps) - set(STEPS)
        if unknown:
            raise ValueError(f"unknown recipe steps {sorted(unknown)}; known: {', '.join(STEPS)}")


# fairseq examples/translation: prepare-iwslt14.sh (tokenizer.perl, clean-corpus-n.perl -ratio 1.5 1 175,
# lowercase.perl, valid = every 23rd line, learn_bpe.py -s 10000 on train.de+train.en) and
# prepare-wmt14en2de.sh (normalize-punctuation, remove-non-printing-char, tokenizer.perl -a on train;
# tokenizer.perl -a on the test set; learn_bpe.py -s 40000; clean-corpus-n.perl -ratio 1.5 1 250 on the BPE output)
RECIPES = {
    # Peters et al. 2019: joint BPE 32k merges (IWSLT'17, KFTT), separate 25k a language (WMT'16 RO-EN)
    "iwslt17-de-en": Recipe(("de", "en"), 32000, source="Peters et al. 2019, §4.2"),
    "kftt-ja-en": Recipe(("ja", "en"), 32000, train_steps=("nfc",), eval_steps=("nfc",),
                         source="Peters et al. 2019, §4.2 (KFTT's tokenization)"),
    "wmt16-ro-en": Recipe(("ro", "en"), 25000, joint=False, source="Peters et al. 2019, §4.2"),
    # Tezekbayev et al. §4: BPE 10k (IWSLT'14), 40k (WMT'14), 60k (WMT'13): the BPE sizes of fairseq's scripts
    "iwslt14-de-en": Recipe(("de", "en"), 10000, train_steps=("tokenize",),
                            eval_steps=("straight_apostrophe", "tokenize"),
                            escape=True, lowercase=True, max_len=175, max_ratio=1.5, valid_every=23,
                            source="Tezekbayev et al. §4 (BPE); fairseq prepare-iwslt14.sh (the rest)"),
    "wmt14-en-de": Recipe(("en", "de"), 40000, train_steps=("normalize", "remove_non_printing", "tokenize"),
                          eval_steps=("straight_apostrophe", "tokenize"), escape=True, aggressive_dash=True,
                          max_len=250, max_ratio=1.5, clean_after_bpe=True,
                          source="Tezekbayev et al. §4 (BPE); fairseq prepare-wmt14en2de.sh (the rest)"),
    "wmt13-en-ru": Recipe(("en", "ru"), 60000, train_steps=("normalize", "remove_non_printing", "tokenize"),
                          eval_steps=("straight_apostrophe", "tokenize"), escape=True, aggressive_dash=True,
                          max_len=250, max_ratio=1.5, clean_after_bpe=True,
                          source="Tezekbayev et al. §4 (BPE); fairseq prepare-wmt14en2de.sh's steps (the rest)"),
    # our small real stand-in
    "multi30k": Recipe(("de", "en"), 8000, source="this project (small corpus trainable on CPU)"),
}

# Sennrich's WMT16 Romanian preprocessing: normalise cedilla forms to comma-below, then drop diacritics
_RO_NORMALISE = str.maketrans({"Ş": "Ș", "ş": "ș", "Ţ": "Ț", "ţ": "ț"})
_RO_STRIP = str.maketrans({"Ș": "S", "ș": "s", "Ț": "T", "ț": "t", "Ă": "A", "ă": "a", "Â": "A", "â": "a",
                           "Î": "I", "î": "i"})


def romanian(line: str) -> str:
    """Cedilla -> comma-below, then ș ț ă â î (and capitals) -> s t a a i."""
    return line.translate(_RO_NORMALISE).translate(_RO_STRIP)


def remove_non_printing(line: str) -> str:
    """Moses remove-non-printing-char.perl: every character of Unicode category C (\\p{C}) -> a space."""
    if line.isprintable():  # True only without C and Z characters (but " "): nothing to replace
        return line
    return "".join(" " if unicodedata.category(c)[0] == "C" else c for c in line)


_WORKER: dict = {}


def _init(lang: str, recipe: Recipe, steps: tuple[str, ...]) -> None:
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    _WORKER.update(lang=lang, recipe=recipe, steps=steps, norm=MosesPunctNormalizer(lang=lang),
                   tok=MosesTokenizer(lang=lang))


def _process(line: str) -> str:
    """One line through the recipe's steps, then lower-casing (runs in a worker)."""
    r: Recipe = _WORKER["recipe"]
    line = line.strip()
    for step in _WORKER["steps"]:
        if step == "nfc":
            line = unicodedata.normalize("NFC", line)
        elif step == "normalize":
            line = _WORKER["norm"].normalize(line)
        elif step == "remove_non_printing":
            line = remove_non_printing(line)
        elif step == "straight_apostrophe":
            line = line.replace("\u2019", "'")
        elif step == "ro_diacritics":
            line = romanian(line) if _WORKER["lang"] == "ro" else line
        elif step == "tokenize":
            line = _WORKER["tok"].tokenize(line, escape=r.escape, aggressive_dash_splits=r.aggressive_dash,
                                           return_str=True)
    if r.lowercase:
        line = line.lower()
    return " ".join(line.split())


def tokenize_lines(lines: list[str], lang: str, recipe: Recipe, jobs: int = 1,
                   steps: tuple[str, ...] | None = None) -> list[str]:
    """``lines`` through ``steps`` (default: the recipe's training steps) and lower-casing."""
    steps = recipe.train_steps if steps is None else steps
    if jobs <= 1:
        _init(lang, recipe, steps)
        return [_process(x) for x in lines]
    with mp.get_context("spawn").Pool(jobs, initializer=_init, initargs=(lang, recipe, steps)) as pool:
        return pool.map(_process, lines, chunksize=2000)


_LONG_WORD = re.compile(r"[^\s|]{1001}")


def moses_clean(src: list[str], tgt: list[str], max_len: int = 0, max_ratio: float = 0.0,
                min_len: int = 1) -> list[tuple[int, str, str]]:
    """Moses clean-corpus-n.perl on parallel lines; returns (index, src, tgt) of the pairs kept, as cleaned.

    Unless the first pair holds a ``|`` (a factored corpus), ``|`` is deleted; whitespace runs become one
    space; a pair is dropped when a side is empty, has fewer than ``min_len`` or more than ``max_len``
    words (0: no maximum), when #src/#tgt or #tgt/#src exceeds ``max_ratio`` (0: no limit), or when a
    side has a word of more than 1000 characters."""
    factored = bool(src) and ("|" in src[0] or "|" in tgt[0])
    kept = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        if not factored:
            s, t = s.replace("|", ""), t.replace("|", "")
        s, t = " ".join(s.split()), " ".join(t.split())
        if not s or not t:
            continue
        ns, nt = len(s.split(" ")), len(t.split(" "))
        if (max_len and (ns > max_len or nt > max_len)) or ns < min_len or nt < min_len:
            continue
        if max_ratio and (ns / nt > max_ratio or nt / ns > max_ratio):
            continue
        if _LONG_WORD.search(s) or _LONG_WORD.search(t):
            continue
        kept.append((i, s, t))
    return kept


def clean_pairs(src: list[str], tgt: list[str], max_len: int, max_ratio: float) -> tuple[list[str], list[str]]:
    """The pairs ``moses_clean`` keeps, as two lists."""
    kept = moses_clean(src, tgt, max_len, max_ratio)
    return [s for _, s, _ in kept], [t for _, _, t in kept]


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


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")


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
    splits = sorted({p.name.rsplit(".", 1)[0] for p in raw.glob(f"*.{l1}")}
                    & {p.name.rsplit(".", 1)[0] for p in raw.glob(f"*.{l2}")})
    splits = [s for s in splits if not s.endswith(".orig")]
    if recipe.valid_every:
        if "dev" in splits:
            raise ValueError(f"{raw}: has dev.{l1} / dev.{l2}, but the {corpus} recipe holds out every "
                             f"{recipe.valid_every}th cleaned training pair as dev ({recipe.source}); remove them")
        if "train" in splits:
            splits.append("dev")
    if bpe_split not in splits:
        raise FileNotFoundError(f"{raw}: no {bpe_split}.{l1} / {bpe_split}.{l2} to learn BPE on (have {splits})")
    pretokenized = set((raw / PRETOKENIZED).read_text().split()) if (raw / PRETOKENIZED).exists() else set()
    out.mkdir(parents=True, exist_ok=True)
    summary = {"corpus": corpus, "recipe": asdict(recipe), "bpe_learned_on": bpe_split, "lines": {},
               "pretokenized": sorted(pretokenized & set(splits))}
    tok: dict[str, dict[str, list[str]]] = {}
    refs: dict[str, dict[str, list[str]]] = {}  # the untokenized lines, aligned with tok (SacreBLEU references)
    for split in (s for s in splits if not (recipe.valid_every and s == "dev")):  # that dev is made below
        tok[split], refs[split] = {}, {}
        for lang in (l1, l2):
            lines = (raw / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:max_lines]
            orig = raw / f"{split}.orig.{lang}"
            refs[split][lang] = orig.read_text(encoding="utf-8").splitlines()[:max_lines] if orig.exists() else lines
            if len(refs[split][lang]) != len(lines):
                raise ValueError(f"{orig}: {len(refs[split][lang])} lines but {split}.{lang} has {len(lines)}")
            if split in pretokenized:
                tok[split][lang] = [" ".join(x.split()) for x in lines]
            else:
                steps = recipe.train_steps if split == "train" else recipe.eval_steps
                tok[split][lang] = tokenize_lines(lines, lang, recipe, jobs, steps)
        if len(tok[split][l1]) != len(tok[split][l2]):
            raise ValueError(f"{split}: {len(tok[split][l1])} {l1} lines but {len(tok[split][l2])} {l2} lines")

    def keep(split: str, index: list[int], cleaned: dict[str, list[str]] | None = None) -> None:
        for lang in (l1, l2):
            tok[split][lang] = cleaned[lang] if cleaned else [tok[split][lang][i] for i in index]
            refs[split][lang] = [refs[split][lang][i] for i in index]

    # only training pairs are filtered: dev/test stay aligned with their references
    cleaning = "train" in tok and (recipe.max_len or recipe.max_ratio)
    if cleaning and not recipe.clean_after_bpe:
        kept = moses_clean(tok["train"][l1], tok["train"][l2], recipe.max_len, recipe.max_ratio)
        summary["train_pairs_before_cleaning"] = len(tok["train"][l1])
        keep("train", [i for i, _, _ in kept], {l1: [s for _, s, _ in kept], l2: [t for _, _, t in kept]})
    if recipe.valid_every and "train" in tok:  # fairseq: awk 'NR % 23 == 0' on the cleaned training set
        k, n = recipe.valid_every, len(tok["train"][l1])
        tok["dev"] = {lang: [x for i, x in enumerate(v) if (i + 1) % k == 0] for lang, v in tok["train"].items()}
        refs["dev"] = {lang: [x for i, x in enumerate(v) if (i + 1) % k == 0] for lang, v in refs["train"].items()}
        keep("train", [i for i in range(n) if (i + 1) % k != 0])
    splits = sorted(tok)
    for split in splits:
        for lang in (l1, l2):
            _write(out / f"{split}.raw.{lang}", refs[split][lang])
            _write(out / f"{split}.tok.{lang}", tok[split][lang])
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
    if cleaning and recipe.clean_after_bpe:  # fairseq's WMT script: clean-corpus-n.perl on the BPE output
        bpe = {lang: (out / f"train.bpe.{lang}").read_text(encoding="utf-8").splitlines() for lang in (l1, l2)}
        kept = moses_clean(bpe[l1], bpe[l2], recipe.max_len, recipe.max_ratio)
        summary["train_pairs_before_cleaning"] = len(bpe[l1])
        keep("train", [i for i, _, _ in kept])
        for lang, column in ((l1, 1), (l2, 2)):
            _write(out / f"train.bpe.{lang}", [pair[column] for pair in kept])
            _write(out / f"train.tok.{lang}", tok["train"][lang])
            _write(out / f"train.raw.{lang}", refs["train"][lang])
    summary["lines"] = {split: len(tok[split][l1]) for split in splits}
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
