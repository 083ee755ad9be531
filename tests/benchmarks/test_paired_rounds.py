"""The median of paired round ratios and its distribution-free interval (benchmarks/paired_rounds.py)."""
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from paired_rounds import describe, median_interval  # noqa: E402


def _coverage(n: int, j: int) -> float:
    """P(x_(j) <= true median <= x_(n-1-j)) for n draws of a continuous distribution."""
    return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(j + 1)) / 2.0 ** n


def test_interval_is_the_narrowest_pair_of_order_statistics_that_covers_95_percent():
    for n in range(6, 130):
        xs = random.Random(n).sample(range(10 * n), n)
        mid, (lo, hi) = median_interval(xs)
        ordered = sorted(xs)
        j = ordered.index(lo)
        assert hi == ordered[n - 1 - j] and lo <= mid <= hi
        assert _coverage(n, j) >= 0.95 and _coverage(n, j + 1) < 0.95, n


def test_too_few_rounds_have_no_interval_and_say_so():
    assert median_interval([1.0, 0.9, 1.1, 0.95, 1.05]) == (1.0, (None, None))
    assert describe([1.0, 0.9, 1.1]) == "1.00x" and describe([]) == "n/a"
    assert describe([0.9 + i / 100 for i in range(12)]) == "0.96x (0.92-0.99)"
