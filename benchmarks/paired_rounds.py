"""Ratios of paired rounds: each variant's run against the baseline's run of the same round.

The benchmarks time every variant once a round, in turn, so a slow spell of the host hits all of
them; the ratio of each round's pair is then steadier than a ratio of separate medians. The median
of those ratios comes with a distribution-free interval (no assumption on how the host drifts).
"""
from __future__ import annotations

import math
from typing import Optional


def median(xs: list) -> float:
    """The middle element (the upper one of an even count)."""
    return sorted(xs)[len(xs) // 2]


def median_interval(xs: list, level: float = 0.95) -> tuple[float, tuple[Optional[float], Optional[float]]]:
    """(median, (lo, hi)): order statistics x_(j) <= median <= x_(n-1-j) with the largest j that
    still covers ``level``, since the number of rounds below the true median is Binomial(n, 1/2);
    (None, None) where no j covers it (fewer than 6 rounds at 95%)."""
    xs, n = sorted(xs), len(xs)
    pmf = [math.comb(n, i) / 2.0 ** n for i in range(n + 1)]
    j = 0
    while j + 1 < n - 1 - (j + 1) and 1.0 - 2.0 * sum(pmf[:j + 2]) >= level:
        j += 1
    inside = 1.0 - 2.0 * sum(pmf[:j + 1])
    return median(xs), ((xs[j], xs[n - 1 - j]) if inside >= level else (None, None))


def describe(ratios: list) -> str:
    """'0.97x (0.95-0.99)': the median of the round ratios and its 95% interval ('0.97x' alone when
    the rounds are too few for one, 'n/a' without rounds)."""
    if not ratios:
        return "n/a"
    mid, (lo, hi) = median_interval(ratios)
    return f"{mid:.2f}x" + (f" ({lo:.2f}-{hi:.2f})" if lo is not None else "")
