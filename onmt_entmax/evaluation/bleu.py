"""BLEU for the MT tables, two ways, both computed by SacreBLEU (never a hand-written BLEU).

1. Detokenized SacreBLEU (Tezekbayev et al.; Correia et al.): BPE removed, Moses-detokenized
   hypothesis against the *raw* reference, SacreBLEU's default ``13a`` tokenization, mixed case,
   ``exp`` smoothing; reported with its signature.
2. Tokenized BLEU "the way Peters et al. (2019) report it" (their Table 2 says "tokenized test BLEU";
   they used OpenNMT-py, whose ``tools/multi-bleu.perl`` is the usual tool): BPE removed, the
   hypothesis left in the model's tokenization and compared with the reference *tokenized by the same
   pipeline as the training data* (sacremoses for en/de/ro, KFTT's released tokenization for ja/en).
   multi-bleu.perl is corpus BLEU-4, one reference, case-sensitive, no smoothing, no extra
   tokenization: SacreBLEU with ``tokenize="none"``, ``smooth_method="none"`` computes the same
   number. The paper does not name its script; this is our reading, stated in docs/reproduce.md.
"""
from __future__ import annotations

import re
from typing import Sequence

from sacrebleu.metrics import BLEU

_BPE = re.compile(r"(@@ )|(@@ ?$)")


def remove_bpe(line: str, marker: str = "@@") -> str:
    """Undo subword-nmt segmentation: ``"walk@@ ed"`` -> ``"walked"`` (the ``sed -r 's/(@@ )|(@@ ?$)//g'`` rule)."""
    if marker == "@@":
        return _BPE.sub("", line.rstrip("\n"))
    return re.sub(rf"({re.escape(marker)} )|({re.escape(marker)} ?$)", "", line.rstrip("\n"))


def remove_sentencepiece(line: str) -> str:
    """Undo SentencePiece segmentation: pieces joined, ``▁`` (U+2581) marks a word start."""
    return "".join(line.split()).replace("\u2581", " ").strip()


def _check(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not refs:
        raise ValueError("no sentences to score")


def tokenized_bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """multi-bleu.perl-equivalent corpus BLEU over already tokenized, BPE-free text (see module doc)."""
    _check(hyps, refs)
    metric = BLEU(tokenize="none", smooth_method="none", force=True)
    return metric.corpus_score(list(hyps), [list(refs)]).score


def sacrebleu_score(hyps: Sequence[str], refs: Sequence[str], tgt_lang: str = "en") -> tuple[float, str]:
    """Detokenized SacreBLEU and its signature; ``tgt_lang`` picks the tokenizer (``ja-mecab``,
    ``zh``, else ``13a``) as SacreBLEU's command line does for that target language."""
    _check(hyps, refs)
    tokenize = {"ja": "ja-mecab", "zh": "zh", "ko": "ko-mecab"}.get(tgt_lang, "13a")
    try:
        metric = BLEU(tokenize=tokenize)
    except Exception as err:  # the ja/ko tokenizers need optional packages
        raise RuntimeError(
            f"SacreBLEU tokenizer {tokenize!r} for target language {tgt_lang!r} is not available: "
            f"{' '.join(str(err).split())} (pip install 'sacrebleu[ja]' or 'sacrebleu[ko]')"
        ) from err
    score = metric.corpus_score(list(hyps), [list(refs)])
    return score.score, str(metric.get_signature())


def moses_detokenize(lines: Sequence[str], lang: str) -> list[str]:
    """sacremoses detokenizer (Japanese and Chinese: tokens joined without spaces)."""
    if lang in ("ja", "zh"):
        return ["".join(line.split()) for line in lines]
    from sacremoses import MosesDetokenizer

    md = MosesDetokenizer(lang=lang)
    return [md.detokenize(line.split()) for line in lines]
