"""The kernel watch (onmt_entmax.ops.triton.check) flags wrong rows and keeps quiet on exact ones.

Runs on the CPU: the kernel is replaced by a fake that returns the float64 reference, with or
without a corrupted row, so what is tested is the watch itself.
"""
import pytest
import torch

pytest.importorskip("triton")
from onmt_entmax.ops.triton import check, mapping  # noqa: E402


def _fake_kernel(corrupt_row=None):
    def forward_rows(z2, mode, alpha_rows=None, *args, **kwargs):
        p = check.reference(z2, mode, alpha_rows).to(z2.dtype)
        if corrupt_row is not None:
            p[corrupt_row] = p[corrupt_row].flip(-1)
        return p
    return forward_rows


def test_a_wrong_row_is_reported_and_its_program_saved(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mapping, "forward_rows", _fake_kernel(corrupt_row=5))
    w = check.watch(tmp_path)
    z = torch.randn(4, 3, 10, generator=torch.Generator().manual_seed(0)) * 3
    mapping.entmax15(z, -1)
    assert (w.calls, w.wrong_calls) == (1, 1)
    assert "wrong rows" in capsys.readouterr().err
    (saved,) = tmp_path.glob("wrong_*.pt")
    rec = torch.load(saved)
    br = rec["cfg"]["BR"]
    assert rec["z"].shape == (br, 10) and rec["row"] == 5 % br
    torch.testing.assert_close(rec["z"], z.reshape(-1, 10)[5 // br * br: 5 // br * br + br])


@pytest.mark.parametrize("op", ["sparsemax", "entmax15", "bisect"])
def test_exact_rows_pass_unreported(tmp_path, monkeypatch, op):
    monkeypatch.setattr(mapping, "forward_rows", _fake_kernel())
    w = check.watch(tmp_path)
    z = torch.randn(2, 4, 7, 9)
    z[0, 0, 0, 3:] = -1e18  # a masked row
    if op == "bisect":
        alpha = torch.tensor([1.0, 1.3, 1.5, 2.0]).view(1, 4, 1, 1)  # alpha == 1: softmax
        mapping.entmax_bisect(z, alpha, -1)
    else:
        getattr(mapping, op)(z, -1)
    assert (w.calls, w.wrong_calls) == (1, 0)
    assert not list(tmp_path.glob("wrong_*.pt"))
