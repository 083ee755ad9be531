"""The mapping and beam-step kernels against the float64 torch reference.

Runs on CUDA; without CUDA the same tests run in the Triton interpreter (TRITON_INTERPRET=1, on the
CPU) in a subprocess, on smaller shapes that still take every path (several rows a program, rows held
in registers and streamed, several chunks a row), so CI checks the kernels' logic too.

Every check draws fresh random inputs, pre-fills outputs with NaN (so an unwritten element
fails) and compares with the reference computed in float64 from the same (rounded) inputs.
"""
import os
import zlib

import pytest
import torch

import onmt_entmax.ops as ops
from onmt_entmax.ops import losses as ref_losses

triton = pytest.importorskip("triton")
from triton_interpreter import DEV, IN_PROCESS, INTERP, ON_KERNEL, kernel_tests, run_in_interpreter  # noqa: E402


@pytest.mark.skipif(ON_KERNEL, reason=IN_PROCESS)
def test_mapping_and_beam_step_kernels_in_the_triton_interpreter():
    run_in_interpreter(__file__)


on_kernel = kernel_tests("test_mapping_and_beam_step_kernels_in_the_triton_interpreter")
if ON_KERNEL:
    from onmt_entmax.ops import triton as K  # noqa: E402
    from onmt_entmax.ops.triton import mapping as KM  # noqa: E402

REF = {"sparsemax": lambda z: ops.sparsemax(z, -1), "entmax15": lambda z: ops.entmax15(z, -1),
       "bisect": lambda z: ops.entmax_bisect(z, 1.33, -1, n_iter=80)}
ALPHA = {"sparsemax": None, "entmax15": None, "bisect": 1.33}
LONG = 3000 if INTERP else 40000  # > SINGLE_MAX: the streaming path
MID = 1500 if INTERP else 20000  # one long row per program, held in registers
# (the interpreter: rows from 2048 entries streamed, in chunks of 512, so that LONG takes that path)
STREAM = {"SINGLE_MAX": 2048, "CHUNK": 512} if INTERP else None
VOCAB = 3 * 4096 + 5 if INTERP else 5 * 32000  # a beam step's row: several chunks, the last one partial


def _masked_logits(n_rows, n_cols, scale, gen):
    """randn * scale with -inf and -1e18 entries and one fully masked row."""
    z = torch.randn(n_rows, n_cols, generator=gen, dtype=torch.float64) * scale
    z[0, n_cols // 2:] = float("-inf")
    z[1, : n_cols // 3] = -1e18
    z[2] = float("-inf")
    return z


@on_kernel
@pytest.mark.parametrize("mode", ["sparsemax", "entmax15", "bisect"])
@pytest.mark.parametrize("n_cols", [50, 777, MID, LONG])
@pytest.mark.parametrize("scale", [3.0, 0.2])
def test_mapping_forward_matches_float64_reference(mode, n_cols, scale):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{mode}{n_cols}{scale}".encode()))
    n_rows = 64 if n_cols < (100 if INTERP else 1000) else 6
    z = _masked_logits(n_rows, n_cols, scale, gen).float()
    ref = REF[mode](z.double())
    a = KM._alpha_rows(ALPHA[mode], z, -1) if mode == "bisect" else None
    out = torch.full_like(z, float("nan"), device=DEV)
    p = KM.forward_rows(z.to(DEV), mode, a.to(DEV) if a is not None else None, out=out, config=STREAM).cpu()
    assert not p.isnan().any()
    torch.testing.assert_close(p.double(), ref, atol=2e-6, rtol=1e-4)
    live = torch.ones(n_rows, dtype=torch.bool)
    live[2] = False
    assert (p[live].double().sum(-1) - 1).abs().max() <= 1e-6
    assert (p[2] == 0).all(), "a fully masked row gives zeros"
    if mode != "bisect":  # exact mappings: the same support as the float64 answer
        assert torch.equal(p == 0, ref == 0)


@on_kernel
@pytest.mark.parametrize("alpha", [1.01, 1.7, 2.5, 3.0])
@pytest.mark.parametrize("n_cols", [50, LONG])
def test_any_alpha_including_above_two(alpha, n_cols):
    """alpha > 2 makes the threshold equation non-convex: those rows bisect; all alphas match."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"{alpha}{n_cols}".encode()))
    n_rows = 4 if INTERP else 8
    z = _masked_logits(n_rows, n_cols, 1.0, gen).float()
    ref = ops.entmax_bisect(z.double(), alpha, -1, n_iter=200)
    p = KM.forward_rows(z.to(DEV), "bisect", torch.full((n_rows,), alpha, device=DEV), config=STREAM).cpu()
    torch.testing.assert_close(p.double(), ref, atol=2e-6, rtol=1e-4)
    assert (p[[0, 1, 3]].double().sum(-1) - 1).abs().max() <= 1e-6


@on_kernel
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ["sparsemax", "entmax15"])
def test_half_inputs_computed_in_float32(op, dtype):
    gen = torch.Generator().manual_seed(7)
    z = (torch.randn(4, 8, 30, generator=gen) * 3).to(dtype)
    p = getattr(K, op)(z.to(DEV), -1).cpu()
    assert p.dtype == dtype
    ref = getattr(ops, op)(z.double(), -1)
    torch.testing.assert_close(p.double(), ref, atol=1e-2, rtol=1e-2)
    assert torch.isfinite(p).all()


@on_kernel
@pytest.mark.parametrize("op", ["sparsemax", "entmax15"])
def test_mapping_backward_and_dim(op):
    gen = torch.Generator().manual_seed(11)
    z = (torch.randn(3, 37, 5, generator=gen, dtype=torch.float64) * 2)
    z[0, 20:, 1] = float("-inf")
    g = torch.randn(3, 37, 5, generator=gen, dtype=torch.float64)
    zr = z.clone().requires_grad_()
    (getattr(ops, op)(zr, 1) * g).sum().backward()
    zk = z.float().to(DEV).requires_grad_()
    p = getattr(K, op)(zk, 1)
    (p * g.float().to(DEV)).sum().backward()
    torch.testing.assert_close(p.detach().cpu().double(), getattr(ops, op)(z, 1), atol=2e-6, rtol=1e-4)
    torch.testing.assert_close(zk.grad.cpu().double(), zr.grad, atol=1e-5, rtol=1e-4)
    with torch.no_grad():  # decoding: no autograd Function, same numbers
        assert torch.equal(getattr(K, op)(zk, 1), p.detach())
    assert torch.equal(getattr(K, op)(zk.detach(), 1), p.detach())


@on_kernel
def test_per_head_alpha_forward_backward():
    """Attention-shaped (batch, heads, q, k) with one learnable alpha per head, alpha = 1 -> softmax."""
    gen = torch.Generator().manual_seed(3)
    z = torch.randn(2, 4, 6, 50, generator=gen, dtype=torch.float64) * 2
    z[:, :, :, 40:] = float("-inf")
    z[1, 2, 3] = float("-inf")
    alpha = torch.tensor([1.0, 1.2, 1.5, 2.0], dtype=torch.float64).reshape(4, 1, 1)
    g = torch.randn(z.shape, generator=gen, dtype=torch.float64)
    ar = alpha.clone().requires_grad_()
    zr = z.clone().requires_grad_()
    ref = torch.cat([ops.entmax_bisect(zr[:, h:h + 1], ar[h:h + 1], -1, n_iter=80) if h else
                     torch.softmax(zr[:, :1], -1) for h in range(4)], 1)
    ref = torch.where(z == float("-inf"), torch.zeros_like(ref), ref).nan_to_num(0.0)
    (ref * g).sum().backward()
    ak = alpha.float().to(DEV).requires_grad_()
    zk = z.float().to(DEV).requires_grad_()
    p = K.entmax_bisect(zk, ak, -1, None)
    (p * g.float().to(DEV)).sum().backward()
    torch.testing.assert_close(p.detach().cpu().double(), ref.detach(), atol=5e-6, rtol=1e-4)
    torch.testing.assert_close(zk.grad.cpu().double(), zr.grad, atol=2e-5, rtol=1e-3)
    torch.testing.assert_close(ak.grad.cpu().double()[1:], ar.grad[1:], atol=1e-3, rtol=1e-3)


@pytest.mark.skipif(DEV != "cuda", reason="CUDA only: the public ops take the kernel path for CUDA tensors")
def test_public_ops_on_cuda_match_reference_any_dim_and_shape():
    """The public API on CUDA (kernel path) equals the CPU float64 reference: dim 0, (N, C, d)
    losses, tensor alpha along a middle dim, fp16 loss."""
    gen = torch.Generator().manual_seed(5)
    z = torch.randn(30, 4, 7, generator=gen) * 2
    for op in (ops.sparsemax, ops.entmax15):
        torch.testing.assert_close(op(z.cuda(), 0).cpu().double(), op(z.double(), 0),
                                   atol=2e-6, rtol=1e-4)
    alpha = torch.tensor([1.1, 1.5, 1.9, 2.0]).reshape(1, 4, 1)
    torch.testing.assert_close(ops.entmax_bisect(z.cuda(), alpha.cuda(), 0).cpu().double(),
                               ops.entmax_bisect(z.double(), alpha.double(), 0, n_iter=80),
                               atol=5e-6, rtol=1e-4)
    logits = torch.randn(6, 40, 5, generator=gen) * 3
    y = torch.randint(0, 40, (6, 5), generator=gen)
    y[0, 0] = -100
    for fn in (ops.entmax15_loss, ops.sparsemax_loss):
        for red in ("mean", "none"):
            got = fn(logits.cuda(), y.cuda(), reduction=red, label_smoothing=0.1).cpu().double()
            ref = fn(logits.double(), y, reduction=red, label_smoothing=0.1)
            torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    half = fn(logits.cuda().half(), y.cuda(), reduction="sum")
    assert half.dtype == torch.float16 and torch.isfinite(half)


@on_kernel
@pytest.mark.parametrize("mode", ["sparsemax", "entmax15", "bisect"])
def test_every_short_row_length_matches_reference(mode):
    """Attention rows are short and of every length: each length 1..64 (and a few more), several
    rows per program, and decoder self-attention's causal -1e18 masks (row r keeps r % n + 1
    keys) with a different alpha on every row. (Before FP contraction was turned off, one-warp
    tiles gave wrong rows here at some lengths: alpha-entmax at 21 columns. The interpreter, which
    contracts nothing, takes a few lengths of each tile shape.)"""
    gen = torch.Generator().manual_seed(11)
    lengths = [1, 2, 3, 8, 21, 32, 33, 64] if INTERP else list(range(1, 65))
    dense, causal = (17, 37) if INTERP else (257, 557)
    for n_cols in lengths + [100, 257]:
        for n_rows, scale in ((dense, 2.0), (causal, 3.0)):
            z = torch.randn(n_rows, n_cols, generator=gen, dtype=torch.float64) * scale
            alpha = torch.full((n_rows,), 1.5, dtype=torch.float64)
            if n_rows == causal:
                future = torch.arange(n_cols)[None, :] > (torch.arange(n_rows) % n_cols)[:, None]
                z = z.masked_fill(future, -1e18)
                alpha = torch.linspace(1.05, 1.95, n_rows, dtype=torch.float64)
            ref = (ops.entmax_bisect(z, alpha[:, None], -1, n_iter=80) if mode == "bisect"
                   else REF[mode](z))
            a_rows = alpha.float().to(DEV) if mode == "bisect" else None
            p = KM.forward_rows(z.float().to(DEV).contiguous(), mode, a_rows)
            assert torch.isfinite(p).all(), f"{mode}: non-finite output at {n_cols} columns"
            err = (p.double().cpu() - ref).abs().max().item()
            assert err < 1e-5, f"{mode}: {err:.2e} off the reference at {n_cols} columns"


def _training_rows():
    """Programs of 16 attention rows from OpenNMT-py training (tests/ops/data, source there)."""
    text = open(os.path.join(os.path.dirname(__file__), "data", "training_attention_rows.txt")).read()
    blocks = [b for b in text.split("\n\n") if b.strip() and not b.lstrip().startswith("#")]
    return [torch.tensor([[float(v) for v in line.split()] for line in b.strip().splitlines()])
            for b in blocks]


@on_kernel
@pytest.mark.parametrize("mode", ["sparsemax", "entmax15", "bisect"])
@pytest.mark.parametrize("tile,warps,lanes", [(128, 1, True), (256, 1, True), (128, 4, True),
                                              (128, 1, False)])
def test_training_rows_are_exact_on_every_short_row_layout(mode, tile, warps, lanes):
    """Rows on which one-warp tiles went wrong in training: each row's sums were reduced across
    lanes with a contracted (fused) first step, so the lanes of a row disagreed on tau and on when
    to leave the solver loop. Compiled without contraction where a lane holds one entry of a row
    (_launch.py), every lane holds the same sums and the rows are exact on any tile / warp
    layout: rows on lanes of their own (lanes=True, contracted where each lane holds several
    entries) or spread over the warp."""
    for z in _training_rows():
        ref = (ops.entmax_bisect(z.double(), 1.5, -1, n_iter=80) if mode == "bisect"
               else REF[mode](z.double()))
        a = torch.full((z.shape[0],), 1.5, device=DEV) if mode == "bisect" else None
        cfg = {"TILE": tile, "SHORT_WARPS": warps, "LANE_TILES": lanes}
        p = KM.forward_rows(z.to(DEV).contiguous(), mode, a, config=cfg).cpu()
        torch.testing.assert_close(p.double(), ref, atol=2e-6, rtol=1e-4)


@on_kernel
@pytest.mark.parametrize("mode", ["entmax15", "bisect"])
@pytest.mark.parametrize("warps,lanes", [(1, True), (4, True), (1, False)])
def test_many_random_short_rows_are_exact(mode, warps, lanes):
    """200000 random rows of 10, 12 and 21 entries (one of every few hundred went wrong on one
    warp while the lanes of a row could disagree: see the test above); all must be exact."""
    n_rows = 64 if INTERP else 200000
    gen = torch.Generator().manual_seed(3)
    for n_cols in (10, 12, 21):
        z = torch.randn(n_rows, n_cols, generator=gen) * 0.5
        ref = (ops.entmax_bisect(z.double(), 1.5, -1, n_iter=60) if mode == "bisect"
               else REF[mode](z.double()))
        a = torch.full((n_rows,), 1.5, device=DEV) if mode == "bisect" else None
        p = KM.forward_rows(z.to(DEV), mode, a,
                            config={"SHORT_WARPS": warps, "LANE_TILES": lanes}).cpu()
        wrong = (p.double() - ref).abs().max(-1).values > 1e-5
        assert not wrong.any(), f"{int(wrong.sum())} wrong rows of {n_rows} at {n_cols} columns"


@on_kernel
@pytest.mark.parametrize("mode", ["sparsemax", "entmax15", "bisect"])
@pytest.mark.parametrize("scale", [3.0, 0.2])
def test_long_rows_start_from_group_maxima(mode, scale):
    """Long rows start the solver at the threshold of their group maxima (a lower bound): flat
    rows (randn * 0.2), where Newton from tau = -1 needs up to 11 passes, certify within a few
    passes over the row, and the answer is still the float64 reference."""
    gen = torch.Generator().manual_seed(5)
    z = (torch.randn(8, MID, generator=gen, dtype=torch.float64) * scale).float()
    a = KM._alpha_rows(ALPHA[mode], z, -1).to(DEV) if mode == "bisect" else None
    iters, iters_from_minus_one = (torch.zeros(8, dtype=torch.int32, device=DEV) for _ in "ab")
    p = KM.forward_rows(z.to(DEV), mode, a, iters=iters).cpu()
    torch.testing.assert_close(p.double(), REF[mode](z.double()), atol=2e-6, rtol=1e-4)
    KM.forward_rows(z.to(DEV), mode, a, iters=iters_from_minus_one, config={"GROUP_MIN": 1 << 30})
    assert iters.max().item() <= (5 if mode == "bisect" else 4), iters.tolist()
    assert iters.sum() < iters_from_minus_one.sum(), (iters.tolist(), iters_from_minus_one.tolist())


@on_kernel
def test_alpha_entmax_rows_whose_group_maxima_hold_the_support_take_one_pass():
    """alpha-entmax stops at |A - 1| <= tol, so a start below the root by a margin fails on a row
    whose group maxima hold the whole support (peaked, trained-like rows), costing a pass: started
    at the group maxima's own threshold, such rows (held in registers) stop at the first pass, with
    the reference's p."""
    gen = torch.Generator().manual_seed(11)
    z = (torch.randn(8, MID, generator=gen, dtype=torch.float64) * 3).float()
    a = KM._alpha_rows(1.33, z, -1).to(DEV)
    iters = torch.zeros(8, dtype=torch.int32, device=DEV)
    p = KM.forward_rows(z.to(DEV), "bisect", a, iters=iters).cpu()
    torch.testing.assert_close(p.double(), REF["bisect"](z.double()), atol=2e-6, rtol=1e-4)
    assert (iters == 1).sum().item() >= 6, iters.tolist()


CHUNK = (STREAM or {}).get("CHUNK", 4096)  # the streamed rows' chunk: their groups are the columns mod CHUNK


@on_kernel
@pytest.mark.parametrize("mode", ["sparsemax", "entmax15", "bisect"])
def test_streamed_rows_whose_group_maxima_hold_the_support_take_no_pass_over_the_row(mode):
    """A streamed row's group maxima (the largest entry at each position mod the chunk) hold the whole
    support of a peaked, trained-like row (randn * 3: a few support entries among hundreds of groups);
    where each group's second largest entry is outside the support at their threshold, that threshold is
    the row's, and the row takes no solver pass over its columns (a pass re-reads the row): p as the
    reference's, and 0 passes."""
    gen = torch.Generator().manual_seed(12)
    z = (torch.randn(8, LONG, generator=gen, dtype=torch.float64) * 3).float()
    a = KM._alpha_rows(ALPHA[mode], z, -1).to(DEV) if mode == "bisect" else None
    iters = torch.full((8,), -1, dtype=torch.int32, device=DEV)
    p = KM.forward_rows(z.to(DEV), mode, a, iters=iters, config=STREAM).cpu()
    torch.testing.assert_close(p.double(), REF[mode](z.double()), atol=2e-6, rtol=1e-4)
    assert (iters == 0).sum().item() >= 6, iters.tolist()


@on_kernel
def test_flat_streamed_rows_start_from_the_two_largest_of_each_group():
    """Flat 1.5-entmax rows (randn * 0.2: hundreds of support entries), whose group maxima miss part of the
    support: the solver starts at the threshold of the group maxima together with each group's second largest
    entry, a lower bound nearer the root: at most 1.5 passes over the row on average (from the group maxima
    alone such rows take 2-3), with the reference's p."""
    gen = torch.Generator().manual_seed(14)
    z = (torch.randn(8, LONG, generator=gen, dtype=torch.float64) * 0.2).float()
    iters = torch.full((8,), -1, dtype=torch.int32, device=DEV)
    p = KM.forward_rows(z.to(DEV), "entmax15", None, iters=iters, config=STREAM).cpu()
    torch.testing.assert_close(p.double(), REF["entmax15"](z.double()), atol=2e-6, rtol=1e-4)
    assert iters.sum().item() <= 12, iters.tolist()  # (1.5 a row on average)


@on_kernel
@pytest.mark.parametrize("mode", ["sparsemax", "entmax15", "bisect"])
def test_a_group_holding_two_support_entries_sends_the_row_through_the_solver(mode):
    """The two largest entries of each row in one group (columns j and j + chunk): the group maxima miss
    one support entry, so their threshold is below the row's. Such a row is not certified from them: it
    takes solver passes, and p is the reference's (a row certified anyway would keep the low threshold)."""
    gen = torch.Generator().manual_seed(13)
    z = (torch.randn(6, LONG, generator=gen, dtype=torch.float64) * 3).float()
    z[:, 5] = 14.0
    z[:, 5 + CHUNK] = 13.5
    a = KM._alpha_rows(ALPHA[mode], z, -1).to(DEV) if mode == "bisect" else None
    iters = torch.full((6,), -1, dtype=torch.int32, device=DEV)
    p = KM.forward_rows(z.to(DEV), mode, a, iters=iters, config=STREAM).cpu()
    torch.testing.assert_close(p.double(), REF[mode](z.double()), atol=2e-6, rtol=1e-4)
    assert (p[:, 5 + CHUNK] > 0).all()
    assert (iters >= 1).all(), iters.tolist()


@on_kernel
@pytest.mark.parametrize("n_cols", [50, MID, LONG])
def test_a_nan_logit_gives_nan_like_the_reference(n_cols):
    """The hardware max drops NaN: without care a NaN logit would silently leave the support
    and the row would come out finite. Like the torch reference (and torch.softmax), a row with a
    NaN gives a NaN mapping row, a NaN loss and NaN gradients; the other rows are untouched."""
    gen = torch.Generator().manual_seed(3)
    z = torch.randn(4, n_cols, generator=gen, dtype=torch.float64) * 3
    z[1, n_cols // 3] = float("nan")
    y = torch.tensor([0, 1, 2, n_cols - 1])
    for mode in ("sparsemax", "entmax15", "bisect"):
        a = KM._alpha_rows(ALPHA[mode], z, -1).to(DEV) if mode == "bisect" else None
        p = KM.forward_rows(z.float().to(DEV), mode, a).cpu()
        assert p[1].isnan().all() and not p[[0, 2, 3]].isnan().any(), mode
        torch.testing.assert_close(p[[0, 2, 3]].double(), REF[mode](z[[0, 2, 3]]), atol=2e-6,
                                   rtol=1e-4)
    for kind, alpha in (("sparsemax", 2.0), ("entmax15", 1.5), ("entmax_bisect", 1.33),
                        ("alpha_relu", 1.5)):
        zz = z.float().to(DEV).requires_grad_()
        loss = K.fy_loss(zz, y.to(DEV), kind, alpha, 0.0 if kind != "alpha_relu" else -0.5)
        loss.sum().backward()
        ref = ref_losses.fy_loss(z, y, kind, alpha, -0.5 if kind == "alpha_relu" else 0.0,
                                 reduction="none")
        assert loss[1].isnan() and not loss[[0, 2, 3]].isnan().any(), kind
        grad = zz.grad.cpu()
        nan_grad = grad[1].isnan().sum().item()
        assert nan_grad == (1 if kind == "alpha_relu" else n_cols), (kind, nan_grad)
        torch.testing.assert_close(loss[[0, 2, 3]].double().cpu(), ref[[0, 2, 3]], atol=1e-4,
                                   rtol=1e-4)


@on_kernel
@pytest.mark.parametrize("kind", ["sparsemax", "entmax15", "entmax_bisect"])
@pytest.mark.parametrize("n_cols", [50, MID, LONG])
def test_decoding_log_probs_in_one_kernel_match_log_of_the_reference(kind, n_cols):
    """Beam search's scores: the mapping kernel storing log p, -inf exactly on the reference's zeros
    (masked logits and a fully masked row included), a NaN row NaN, any row length's kernel."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"log{kind}{n_cols}".encode()))
    z = _masked_logits(6, n_cols, 3.0, gen).float()
    z[3, 5] = float("nan")
    mode = "bisect" if kind == "entmax_bisect" else kind
    ref = REF[mode](z.double())
    lp = K.log_probs(z.to(DEV), kind, ALPHA[mode], -1).cpu()
    ok = [0, 1, 2, 4, 5]
    assert lp[3].isnan().all() and not lp[ok].isnan().any()
    zero = ref[ok] < 1e-30  # (the float64 reference's zeros; a float32 p of 1e-30 is not one)
    assert torch.equal(lp[ok] == float("-inf"), zero)
    torch.testing.assert_close(lp[ok][~zero].double().exp(), ref[ok][~zero], atol=2e-6, rtol=1e-4)
    with torch.no_grad():
        assert torch.equal(ops.log_probs(z.to(DEV), kind, ALPHA[mode] or 1.5).cpu().isinf(), lp.isinf())


@on_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_alpha_relu_log_kernel_matches_the_reference(dtype):
    gen = torch.Generator().manual_seed(5)
    z = (torch.randn(7, 300, generator=gen) * 3).to(dtype)
    z[0, :10] = float("-inf")
    z[1, 3] = float("nan")
    z[2, 4] = float("inf")
    for alpha, tau in ((1.5, 0.5), (1.25, -0.3), (2.5, 1.0)):
        out = K.alpha_relu_log(z.to(DEV), alpha, tau).cpu()
        ref = ops.alpha_relu_log(z, alpha=alpha, tau=tau)  # (CPU: the torch reference)
        assert out.dtype == dtype and out.shape == z.shape
        assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out == float("-inf"), ref == float("-inf"))
        fin = torch.isfinite(ref)
        torch.testing.assert_close(out[fin].float(), ref[fin].float(), atol=1e-5 if dtype == torch.float32 else 1e-2,
                                   rtol=1e-5 if dtype == torch.float32 else 1e-2)
        assert out[2, 4] == float("inf")


@on_kernel
@pytest.mark.parametrize("n_cols", [7, 5 * 1000, VOCAB])
def test_beam_stats_kernel_matches_the_reference(n_cols):
    gen = torch.Generator().manual_seed(n_cols)
    s = torch.randn(9, n_cols, generator=gen) * 3
    s[s < 1.0] = float("-inf")  # a sparse model's candidates
    s[1] = float("-inf")
    s[2, 3] = float("nan")
    s[4, -1] = float("nan")  # in the row's last chunk: the chunks' reduction keeps it
    kept = torch.stack([torch.randperm(n_cols, generator=gen)[:5] for _ in range(9)])
    kept[2, 0] = 3 if n_cols > 100 else kept[2, 0]  # the NaN kept: not in the best left out
    kept[3] = torch.topk(s[3], 5).indices
    kept[5, 0] = n_cols - 1  # a kept position in the last chunk
    n, best = K.beam_stats(s.to(DEV), kept.to(DEV))
    n_ref, best_ref = (s > float("-inf")).sum(-1), s.scatter(-1, kept, float("-inf")).amax(-1)
    assert torch.equal(n.cpu(), n_ref)
    torch.testing.assert_close(best.cpu(), best_ref, equal_nan=True)


@on_kernel
@pytest.mark.parametrize("n_cols,k", [(6, 6), (7, 5), (5 * 1000, 1), (5 * 1000, 5), (VOCAB, 12)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_beam_topk_kernel_picks_what_torch_topk_picks_with_the_statistics(n_cols, k, dtype):
    """A beam step's pick: the k best of each row in torch.topk's order (distinct scores), NaN first
    as torch ranks it, -inf picked only when fewer than k are finite, ties by lowest position; and
    the certificate's (finite count, best not kept), any chunk holding the best."""
    gen = torch.Generator().manual_seed(n_cols * 31 + k)
    s = (torch.randperm(n_cols * 9, generator=gen).float().view(9, n_cols) / n_cols - 4.5).to(dtype)  # distinct
    s[s < 0] = float("-inf")  # a sparse model's candidates: about half finite
    s[1] = float("-inf")
    s[1, n_cols - 1] = 0.5  # one finite candidate, in the last chunk
    s[2, n_cols // 2] = float("nan")
    s[3, :] = 1.0  # all tied: the lowest positions
    s[4, -1] = 9.0  # the best in the last chunk
    values, kept, stats = K.beam_topk(s.to(DEV), k)
    assert values.dtype == dtype and kept.dtype == torch.int64 and stats.dtype == torch.float64
    values, kept, stats = values.cpu(), kept.cpu(), stats.cpu()
    ref_values, ref_kept = torch.topk(s.float(), k, dim=-1)
    assert torch.equal(values.float().isnan(), ref_values.isnan())
    fin = torch.isfinite(ref_values)
    assert (torch.equal(values.float()[fin], ref_values[fin])
            and (values.float()[~ref_values.isnan() & ~fin] == float("-inf")).all())
    picked = s.float().gather(-1, kept)  # each position holds the value reported for it
    assert torch.equal(picked.isnan(), values.float().isnan()) and torch.equal(picked[fin], values.float()[fin])
    if dtype == torch.float32:  # (distinct scores: float16 rounds some of them together)
        distinct = fin.clone()
        distinct[3] = False
        assert torch.equal(kept[distinct], ref_kept[distinct])
    assert kept[3].tolist() == list(range(k)) and kept[2, 0] == n_cols // 2 and kept[4, 0] == n_cols - 1
    assert ((kept >= 0) & (kept < n_cols)).all() and all(len(set(row)) == k for row in kept.tolist())
    n_ref = (s > float("-inf")).sum(-1).double()
    best_ref = s.float().scatter(-1, kept, float("-inf")).amax(-1).double()
    assert torch.equal(stats[:, 0], n_ref)
    torch.testing.assert_close(stats[:, 1], best_ref, equal_nan=True)
