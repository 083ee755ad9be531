"""Metrics and tables for the reproduction pipelines (SIGMORPHON accuracy / Levenshtein, BLEU)."""
from .bleu import moses_detokenize, remove_bpe, sacrebleu_score, tokenized_bleu
from .sigmorphon import decode_chars, encode_chars, encode_example, levenshtein, score_multilingual

__all__ = [
    "decode_chars",
    "encode_chars",
    "encode_example",
    "levenshtein",
    "moses_detokenize",
    "remove_bpe",
    "sacrebleu_score",
    "score_multilingual",
    "tokenized_bleu",
]
