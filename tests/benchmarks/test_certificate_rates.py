"""benchmarks/certificate_rates.py: the share of rows whose start subset pass 1 can certify, on the CPU."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import certificate_rates  # noqa: E402


def _row_with_support_at_one_position(n_support: int, bn: int = 32) -> torch.Tensor:
    """Scores (1, 8 bn): n_support equal large entries at key position 5 mod bn, the rest far below."""
    z = torch.zeros(1, 8 * bn, dtype=torch.float64)
    z[0, 5::bn][:n_support] = 10.0
    return z


def test_a_row_is_certified_only_where_each_key_position_holds_fewer_support_entries_than_topk():
    """5 support entries at one position: TOPK 4 (the smallest kept is in the support) and 5 cannot certify
    the row, 6 can; spread over positions, 4 suffices."""
    z = _row_with_support_at_one_position(5)
    got = [certificate_rates.certified_rows(z, "sparsemax", 1.5, 32, topk).item() for topk in (4, 5, 6)]
    assert got == [False, False, True]
    spread = torch.zeros(1, 256, dtype=torch.float64)
    spread[0, :5] = 10.0
    assert certificate_rates.certified_rows(spread, "entmax15", 1.5, 32, 4).item()


def test_rates_are_shares_and_fall_with_fewer_entries_a_position():
    """On randn rows a block is certified no more often than its rows, and 2 entries a position certify no
    more rows than 4."""
    rows4, blocks4 = certificate_rates.rates("sparsemax", 1.5, 1024, 32, 4, rows=128)
    rows2, blocks2 = certificate_rates.rates("sparsemax", 1.5, 1024, 32, 2, rows=128)
    assert 0.0 <= blocks4 <= rows4 <= 1.0 and 0.0 <= blocks2 <= rows2 <= rows4
