"""benchmarks/profile_long_attention.py's knobs (the timings need a GPU): each variant sets the kernels' knobs it
names and every other one back to its default, so no variant's setting leaks into the next one's timing."""
import importlib.util
import pathlib

import pytest

pytest.importorskip("triton")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("profile_long_attention",
                                                  ROOT / "benchmarks" / "profile_long_attention.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_a_variant_sets_its_knobs_and_resets_the_others():
    tool = _tool()
    KL = tool.KL
    try:
        tool.set_knobs("margin+rowwise+rows32x128x8+topk2+64x64x8")
        assert (KL.ALPHA_MARGIN, KL.ROWWISE, KL.ROWS_TILE, KL.TOPK, KL.TILE) == (True, True, (32, 128, 8), 2,
                                                                                (64, 64, 8))
        tool.set_knobs("noskip")
        assert (KL.ALPHA_MARGIN, KL.ROWWISE, KL.ROWS_TILE, KL.TOPK, KL.TILE, KL.SKIP) == (False, False, None, None,
                                                                                         None, False)
        with pytest.raises(SystemExit, match="unknown variant part 'bogus'"):
            tool.set_knobs("default+bogus")
    finally:
        tool.set_knobs("default")
    assert (KL.ALPHA_MARGIN, KL.ROWWISE, KL.TOPK, KL.TILE, KL.SKIP) == (False, False, None, None, True)
