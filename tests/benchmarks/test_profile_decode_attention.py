"""benchmarks/profile_decode_attention.py's variants (the timings need a GPU): each names the row kernel's warps and
chunk or the tiles, and setting one drops the cached launch plans so the next call launches it."""
import pytest
import torch
from benchmark_script import load

pytest.importorskip("triton")


def _tool():
    return load("profile_decode_attention")


def test_variants_name_the_row_kernels_warps_and_chunk_or_the_tiles():
    tool = _tool()
    assert tool.parse_variant("w4p16") == (4, 16)
    assert tool.parse_variant("tiles") is None
    assert tool.parse_variant("default") == (tool.KA.STAGED_WARPS, tool.KA._STAGED_PER_THREAD)
    for bad in ("w3p16", "w8", "p32", "fast"):
        with pytest.raises(SystemExit, match="unknown variant"):
            tool.parse_variant(bad)


def test_a_setting_reaches_the_next_launch_plan_and_the_default_comes_back():
    tool = _tool()
    KA = tool.KA
    KA._PLANS[("stale",)] = None
    try:
        tool.set_row_kernel((16, 8))
        assert (KA.STAGED_WARPS, KA._STAGED_PER_THREAD) == (16, 8) and not KA._PLANS
        q, k = torch.zeros(1, 2, 1, 64), torch.zeros(1, 2, KA.MAX_KEYS + 1, 64)
        plan = KA._make_plan(q, k, k, None, "entmax15", None)
        assert plan[6] == 16 and plan[5]["BK"] == 8 * 32 * 16 // 64  # (warps; keys a chunk: 8 entries a thread)
    finally:
        tool.set_row_kernel(tool.DEFAULT)
    assert (KA.STAGED_WARPS, KA._STAGED_PER_THREAD) == tool.DEFAULT
