"""The kernel watch (onmt_entmax.ops.triton.check) flags wrong rows and keeps quiet on exact ones.

Runs on the CPU: the kernel is replaced by a fake that returns the float64 reference, with or
without a corrupted row, so what is tested is the watch itself.
"""
import pytest
import torch

pytest.importorskip("triton")
from onmt_entmax.ops import attention as ref_attention  # noqa: E402
from onmt_entmax.ops.bounded_alpha import bounded_alpha  # noqa: E402
from onmt_entmax.ops.triton import attention_tiles, attention_train, check, mapping  # noqa: E402


@pytest.fixture(autouse=True)
def _kernels_restored(monkeypatch):
    """watch() replaces module globals: put them back after each test (and no exit summary lines)."""
    for owner, name in ((mapping, "forward_rows"), (attention_tiles, "forward"), (attention_train, "scores_forward")):
        monkeypatch.setattr(owner, name, getattr(owner, name))
    monkeypatch.setattr(check, "_summary_at_exit", lambda w: None)


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


def _fake_tiles(corrupt_row=None):
    """attention_tiles.forward returning the reference weights (one row reversed if asked)."""
    def forward(q, k, v, keep, alpha, bounds, mode, scale, drop, seed):
        kind = {0: "sparsemax", 1: "entmax15", 2: "entmax_bisect"}[mode]
        if bounds is not None:
            alpha = bounded_alpha(alpha, *bounds).view(-1, 1, 1)
        out, p = ref_attention._reference(q, k, v, keep, kind, alpha, scale, None, 0.0, True)
        p = p.float().clone()
        if corrupt_row is not None:
            p.view(-1, p.shape[-1])[corrupt_row] = p.view(-1, p.shape[-1])[corrupt_row].flip(-1)
        return out, p, None
    return forward


def _fake_scores(corrupt_row=None):
    """attention_train.scores_forward (the cuBLAS path) with the tiles' fake weights."""
    tiles = _fake_tiles(corrupt_row)

    def forward(s, keep, alpha, bounds, mode, scale, drop, seed, d_dtype):
        eye = torch.eye(s.shape[-2], dtype=s.dtype).expand(*s.shape[:-1], s.shape[-2])
        _, p, _ = tiles(eye, s.transpose(-2, -1), s, keep, alpha, bounds, mode, scale, drop, seed)  # q k^T = s
        return p, p, None
    return forward


@pytest.mark.parametrize("kind", ["entmax15", "learned"])
@pytest.mark.parametrize("path", ["tiles", "cublas"])
def test_training_attention_weights_are_checked_against_their_scores(tmp_path, monkeypatch, capsys, kind, path):
    """The weights p of each training call, recomputed from q k^T: a wrong row is reported with the
    rows of its (batch, head) saved; exact weights (learned alphas from their logits too) pass."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=g) * 2 for _ in range(3))
    keep = torch.rand(2, 1, 1, 6, generator=g) > 0.3
    keep[..., 0] = True
    args = ("entmax_bisect", torch.tensor([-2.0, 0.0, 0.5, 3.0]), 8 ** -0.5, 0.0, False, (1.01, 2.0)) \
        if kind == "learned" else ("entmax15", None, 8 ** -0.5)
    fake, owner, name = (_fake_tiles, attention_tiles, "forward") if path == "tiles" else \
        (_fake_scores, attention_train, "scores_forward")
    monkeypatch.setattr(attention_tiles, "fits", lambda *a: path == "tiles")
    monkeypatch.setattr(owner, name, fake())
    w = check.watch(tmp_path)
    attention_train.sparse_attention(q, k, v, keep, *args)
    assert (w.calls, w.wrong_calls) == (1, 0) and not list(tmp_path.glob("wrong_*.pt"))
    monkeypatch.setattr(owner, name, fake(corrupt_row=9))
    w = check.watch(tmp_path)
    attention_train.sparse_attention(q, k, v, keep, *args)
    assert (w.calls, w.wrong_calls) == (1, 1) and "wrong rows" in capsys.readouterr().err
    (saved,) = tmp_path.glob("wrong_*.pt")
    rec = torch.load(saved)
    assert rec["attention"] and rec["z"].shape == (6, 6) and rec["row"] == 9 - 6  # batch 0, head 1
