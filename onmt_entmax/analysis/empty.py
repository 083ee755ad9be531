"""The "cat got your tongue" check (Stahlberg & Byrne 2019; Table 2 of "Speeding Up Entmax").

The empty translation is the sequence (EOS): log p(empty | x) = log p(EOS | BOS, x), the EOS
entry of the first decoding step. The check asks whether it beats the beam hypothesis,
log p(empty | x) > log p(y_beam | x). With a sparse output layer p(EOS | BOS, x) is usually
exactly 0, so the empty string cannot win.
"""
from __future__ import annotations

from typing import Iterable


def empty_beats_beam(empty_log_prob: float, beam_log_prob: float) -> bool:
    """True when the empty output is strictly more probable than the beam hypothesis.

    Compare *unnormalised* sums of log-probabilities (no length penalty): the question is
    about the model's distribution, not about the search score.
    """
    return float(empty_log_prob) > float(beam_log_prob)


def empty_rate(flags: Iterable[bool]) -> float:
    """Share of sentences whose empty output beats the beam hypothesis."""
    flags = list(flags)
    if not flags:
        raise ValueError("empty_rate needs at least one sentence")
    return sum(bool(f) for f in flags) / len(flags)
