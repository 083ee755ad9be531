"""benchmarks/profile_long_attention.py's knobs (the timings need a GPU): each variant sets the kernels' knobs it
names and every other one back to its default, so no variant's setting leaks into the next one's timing."""
import pytest
from benchmark_script import ROOT, load

pytest.importorskip("triton")


def _tool():
    return load("profile_long_attention")


def test_a_variant_sets_its_knobs_and_resets_the_others():
    tool = _tool()
    KL = tool.KL
    try:
        tool.set_knobs("margin+rowwise+rows32x128x8+topk2+64x64x8+newton")
        assert (KL.ALPHA_MARGIN, KL.ROWWISE, KL.ROWS_TILE, KL.TOPK, KL.TILE, KL.HALLEY) == (True, True, (32, 128, 8),
                                                                                           2, (64, 64, 8), False)
        tool.set_knobs("noskip")
        assert (KL.ALPHA_MARGIN, KL.ROWWISE, KL.ROWS_TILE, KL.TOPK, KL.TILE, KL.SKIP, KL.HALLEY) == (
            False, False, None, None, None, False, True)
        with pytest.raises(SystemExit, match="unknown variant part 'bogus'"):
            tool.set_knobs("default+bogus")
    finally:
        tool.set_knobs("default")
    assert (KL.ALPHA_MARGIN, KL.ROWWISE, KL.TOPK, KL.TILE, KL.SKIP) == (False, False, None, None, True)


def test_against_loads_another_copy_of_the_kernels_whose_knobs_are_its_own(tmp_path):
    """--against FILE: an attention_long.py from elsewhere (here a copy of the present one) loads in the kernels'
    package, its relative imports resolved, as a module apart: a variant set on it leaves the package's own
    kernels as they are."""
    tool = _tool()
    copy = tmp_path / "attention_long.py"
    copy.write_text((ROOT / "onmt_entmax" / "ops" / "triton" / "attention_long.py").read_text())
    other = tool.load_against(str(copy))
    assert other is not tool.KL and callable(other.sparse_attention) and other.__file__ == str(copy)
    own = tool.KL
    try:
        tool.KL = other
        tool.set_knobs("noskip+topk2")
        assert (other.SKIP, other.TOPK) == (False, 2) and (own.SKIP, own.TOPK) == (True, None)
    finally:
        tool.set_knobs("default")
        tool.KL = own
