"""benchmarks/newton_passes.py: the float64 count of the alpha-entmax threshold's passes after the forward's start."""
import importlib.util
import pathlib

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("newton_passes", ROOT / "benchmarks" / "newton_passes.py")
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def test_the_subsets_threshold_is_a_lower_bound_and_the_rows_own_where_it_holds_the_support():
    x = tool.randn_rows(64, 1024, 1.33, seed=1)
    beta = 1 / 0.33
    row = tool.subset_threshold(x, beta, 1024, 1)  # (every entry its own position: the whole row)
    sub = tool.subset_threshold(x, beta, 64, 2)
    assert (sub <= row + 1e-12).all()
    peaked = torch.full((1, 640), -1.0, dtype=torch.float64)
    peaked[0, [0, 65, 130]] = torch.tensor([0.0, -0.05, -0.1], dtype=torch.float64)  # (3 positions mod 64)
    assert torch.allclose(tool.subset_threshold(peaked, beta, 64, 1), tool.subset_threshold(peaked, beta, 640, 1))


def test_a_start_at_the_rows_threshold_takes_one_pass_and_one_below_converges_in_a_few():
    """One pass confirms the root; from below, Newton converges quadratically and Halley at least as fast."""
    x = tool.randn_rows(64, 1024, 1.33, seed=2)
    beta = 1 / 0.33
    root = tool.subset_threshold(x, beta, 1024, 1)
    counts = {}
    for step in tool.STEPS:
        assert (tool.passes(x, beta, root, step) == 1).all()
        counts[step] = tool.passes(x, beta, root - 1e-2, step)
        assert ((counts[step] >= 2) & (counts[step] <= 5)).all(), (step, counts[step])
    assert (counts["halley"] <= counts["newton"]).all()


def test_the_table_has_halley_only_where_its_sum_is_finite(capsys):
    tool.main(["--alpha", "1.33,1.8", "--T", "512", "--rows", "64"])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(r[0].strip("| "), r[2]) for r in rows] == [("1.33", "newton"), ("1.33", "halley"), ("1.8", "newton")]
