"""Fused Fenchel-Young loss kernels (ops/triton/loss.py) against the float64 torch reference.

Runs on CUDA; without CUDA the same tests run in the Triton interpreter (TRITON_INTERPRET=1, on the
CPU) in a subprocess, so CI checks the kernels' logic too (the CUDA-only ones skip there).
"""
import subprocess
import sys
import zlib

import pytest
import torch

import onmt_entmax.ops as ops
from onmt_entmax.ops import losses as ref_losses

triton = pytest.importorskip("triton")
from triton_interpreter import DEV, IN_PROCESS, INTERP, ON_KERNEL, kernel_tests, run_in_interpreter  # noqa: E402

MID = 1500 if INTERP else 20000  # one long row per program, held in registers
LONG = 3000 if INTERP else 40000  # > SINGLE_MAX: the streaming path


@pytest.mark.skipif(ON_KERNEL, reason=IN_PROCESS)
def test_loss_kernels_in_the_triton_interpreter():
    run_in_interpreter(__file__)


if ON_KERNEL:
    from onmt_entmax.ops import triton as K  # noqa: E402
    from onmt_entmax.ops.triton import loss as KL  # noqa: E402
on_kernel = kernel_tests("test_loss_kernels_in_the_triton_interpreter")


@on_kernel
@pytest.mark.parametrize("kind,alpha,tau", [("sparsemax", 2.0, 0.0), ("entmax15", 1.5, 0.0),
                                            ("entmax_bisect", 1.33, 0.0), ("alpha_relu", 1.5, 0.3)])
@pytest.mark.parametrize("n_cols", [50, MID, LONG])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_fused_loss_matches_reference(kind, alpha, tau, n_cols, eps):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{kind}{n_cols}{eps}".encode()))
    n = 16 if n_cols < 1000 else 5
    z = torch.randn(n, n_cols, generator=gen, dtype=torch.float64) * 3
    z[0, n_cols // 2:] = float("-inf")
    y = torch.randint(0, n_cols // 2, (n,), generator=gen)
    y[1] = -100
    g = torch.rand(n, generator=gen, dtype=torch.float64)
    z = z.float().double()
    zr = z.clone().requires_grad_()
    ref, support = ref_losses.fy_loss(zr, y, kind, alpha, tau=tau, reduction="none", label_smoothing=eps,
                                      return_support=True)
    (ref * g).sum().backward()
    zd, yd = z.float().to(DEV), y.to(DEV)
    loss, stats, a_rows = KL.fy_loss_rows(zd, yd, kind, alpha, tau, -100, eps)
    assert torch.equal(stats[:, 5].cpu(), support), "support sizes (what training reports count)"
    dz = KL.fy_grad_rows(zd, yd, g.float().to(DEV), stats, a_rows, kind, -100, eps,
                         out=torch.full_like(zd, float("nan")))
    scale = ref.detach().abs().max().clamp(min=1.0)
    assert (loss.cpu().double() - ref.detach()).abs().max() <= 2e-6 * scale
    assert loss[1].item() == 0 and (dz[1] == 0).all(), "ignore_index rows: loss 0, grad 0"
    torch.testing.assert_close(dz.cpu().double(), zr.grad, atol=2e-6 * scale, rtol=1e-4)


def _case(seed: str, n: int, v: int, dtype, ignore_every: int, alpha):
    """Logits randn x 3 in ``dtype`` (generator seeded by ``seed``), targets with every ``ignore_every``-th
    ignored, alpha (a float, or "tensor": 1.33 as a float64 tensor): (generator, z, y, alpha, and the float64
    leaves of z and of a tensor alpha)."""
    gen = torch.Generator().manual_seed(zlib.crc32(seed.encode()))
    z = (torch.randn(n, v, generator=gen) * 3).to(dtype)
    y = torch.randint(0, v, (n,), generator=gen)
    y[::ignore_every] = -100
    a = torch.tensor([1.33], dtype=torch.float64) if alpha == "tensor" else alpha
    return gen, z, y, a, z.double().requires_grad_(), a.clone().requires_grad_() if alpha == "tensor" else a


@on_kernel
@pytest.mark.parametrize("kind,alpha", [("entmax15", 1.5), ("entmax_bisect", "tensor"), ("alpha_relu", 1.5)])
@pytest.mark.parametrize("reduction,dtype", [("sum", torch.float32), ("mean", torch.float32), ("none", torch.float32),
                                             ("mean", torch.bfloat16)])
def test_fused_loss_reduces_in_its_kernels_as_the_reference(kind, alpha, reduction, dtype):
    """The kernel path's own reduction (one kernel; the backward reads g w in-kernel): value, dtype
    and the gradients of logits and alpha as the float64 reference reduces, ignored rows included."""
    n = 37
    gen, z, y, a, zr, ar = _case(f"{kind}{reduction}{dtype}", n, 300, dtype, 5, alpha)
    tensor_alpha = alpha == "tensor"
    ref = ref_losses.fy_loss(zr, y, kind, ar, reduction=reduction, tau=0.2 if kind == "alpha_relu" else 0.0)
    g = (torch.rand(n, generator=gen, dtype=torch.float64) if reduction == "none"
         else torch.tensor(0.7, dtype=torch.float64))
    g = g.to(torch.float32 if reduction == "none" else dtype).double()  # (the gradient arrives in the loss's dtype)
    (ref * g).sum().backward()
    zk = z.to(DEV).requires_grad_()
    ak = a.float().to(DEV).requires_grad_() if tensor_alpha else a
    loss = K.fy_loss(zk, y.to(DEV), kind, ak, 0.2 if kind == "alpha_relu" else 0.0, reduction=reduction)
    assert loss.shape == ref.shape and loss.dtype == (torch.float32 if reduction == "none" else dtype)
    gk = g.to(loss.dtype).to(DEV)
    (loss * gk).sum().backward()
    tol = 2e-6 if dtype == torch.float32 else 8e-3  # (a bf16 loss value is rounded to bf16)
    torch.testing.assert_close(loss.double().cpu(), ref.detach().to(dtype).double(), atol=tol * n, rtol=tol)
    assert (zk.grad[::5] == 0).all()
    torch.testing.assert_close(zk.grad.double().cpu(), zr.grad, atol=2e-6 if dtype == torch.float32 else 4e-3,
                               rtol=1e-4 if dtype == torch.float32 else 2e-2)
    if tensor_alpha:
        torch.testing.assert_close(ak.grad.double().cpu(), ar.grad, atol=1e-4, rtol=1e-3)


STREAM = {"SINGLE_MAX": 1024, "CHUNK": 512}  # (the rows of 1500 streamed in the interpreter, too)


@on_kernel
@pytest.mark.parametrize("kind,alpha,tau", [("sparsemax", 2.0, 0.0), ("entmax15", 1.5, 0.0),
                                            ("entmax_bisect", 1.33, 0.0), ("alpha_relu", 1.5, 0.3)])
@pytest.mark.parametrize("config", [None, STREAM], ids=["registers", "streamed"])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_gradient_written_by_the_forward_matches_reference(kind, alpha, tau, config, reduction):
    """The forward's gradient (`dz=`), rows held in registers or streamed: (p - q) w with w the weight of a
    kept row in the reduced loss, 0 on ignore_index rows, label smoothing and -inf logits included; the
    loss and statistics as without it."""
    gen = torch.Generator().manual_seed(zlib.crc32(f"{kind}{config}{reduction}".encode()))
    n, v = 5, 1500
    z = (torch.randn(n, v, generator=gen) * 3).double()
    z[0, v // 2:] = float("-inf")
    y = torch.randint(0, v // 2, (n,), generator=gen)
    y[1] = -100
    zr = z.clone().requires_grad_()
    ref = ref_losses.fy_loss(zr, y, kind, alpha, tau=tau, reduction=reduction, label_smoothing=0.1)
    ref.backward(torch.ones_like(ref))
    zd, yd = z.float().to(DEV), y.to(DEV)
    _, aux = KL.reduce_rows(None, yd, v, -100, reduction, torch.float32, part=1)
    dz = torch.full_like(zd, float("nan"))
    loss, stats, a_rows = KL.fy_loss_rows(zd, yd, kind, alpha, tau, -100, 0.1, config=config, dz=dz, weight=aux)
    plain, plain_stats, _ = KL.fy_loss_rows(zd, yd, kind, alpha, tau, -100, 0.1, config=config)
    assert torch.equal(loss, plain) and torch.equal(stats, plain_stats)
    assert (dz[1] == 0).all()
    torch.testing.assert_close(dz.cpu().double(), zr.grad, atol=2e-6, rtol=1e-4)
    # the backward over it: rows whose incoming gradient is 1 kept, the others recomputed with theirs
    g = torch.tensor([1.0, 0.5, 1.0, 0.25, 3.0]) if reduction == "none" else torch.tensor(0.5)
    g_ref = g if reduction == "none" else g.expand(n)
    KL.fy_grad_rows(zd, yd, g.to(DEV), stats, a_rows, kind, -100, 0.1, out=dz,
                    weight=aux if reduction != "none" else None, skip_one=True)
    torch.testing.assert_close(dz.cpu().double(), zr.grad * g_ref.double()[:, None], atol=2e-6, rtol=1e-4)


@on_kernel
@pytest.mark.parametrize("kind,alpha", [("sparsemax", 2.0), ("entmax15", 1.5), ("entmax_bisect", 1.33)])
def test_streamed_rows_whose_group_maxima_miss_a_support_entry_match_reference(kind, alpha):
    """Streamed rows whose two largest logits share a group (columns j and j + chunk), next to rows whose
    group maxima hold the support: the loss and the gradient written by the forward as the reference's
    (a row taken as solved from its group maxima would keep their threshold, below the row's)."""
    gen = torch.Generator().manual_seed(zlib.crc32(kind.encode()))
    n, v = 6, 1500
    z = (torch.randn(n, v, generator=gen) * 3).double()
    z[::2, 7] = 14.0
    z[::2, 7 + STREAM["CHUNK"]] = 13.5
    y = torch.randint(0, v, (n,), generator=gen)
    zr = z.clone().requires_grad_()
    ref_losses.fy_loss(zr, y, kind, alpha, reduction="mean").backward()
    zd, yd = z.float().to(DEV), y.to(DEV)
    _, aux = KL.reduce_rows(None, yd, v, -100, "mean", torch.float32, part=1)
    dz = torch.full_like(zd, float("nan"))
    loss, _, _ = KL.fy_loss_rows(zd, yd, kind, alpha, config=STREAM, dz=dz, weight=aux)
    ref = ref_losses.fy_loss(z, y, kind, alpha, reduction="none")
    torch.testing.assert_close(loss.cpu().double(), ref, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(dz.cpu().double(), zr.grad, atol=2e-6, rtol=1e-4)


@on_kernel
@pytest.mark.parametrize("kind,alpha", [("sparsemax", 2.0), ("entmax15", 1.5), ("entmax_bisect", "tensor"),
                                        ("alpha_relu", 1.5)])
@pytest.mark.parametrize("reduction", ["sum", "mean", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_after_the_forward_gradient_any_incoming_gradient_and_a_retained_graph(kind, alpha, reduction,
                                                                                        dtype):
    """Autograd through the loss (the forward writing the gradient for "mean"): an incoming gradient of 1
    (the rows of "none" partly 1, partly not), then a second backward through the retained graph with
    another one; the logits' and alpha's gradients accumulate as the float64 reference's."""
    _, z, y, a, zr, ar = _case(f"{kind}{reduction}{dtype}", 9, 60, dtype, 4, alpha)
    tensor_alpha = alpha == "tensor"
    tau = 0.2 if kind == "alpha_relu" else 0.0
    zk = z.to(DEV).requires_grad_()
    ak = a.float().to(DEV).requires_grad_() if tensor_alpha else a
    ref = ref_losses.fy_loss(zr, y, kind, ar, tau=tau, reduction=reduction)
    loss = K.fy_loss(zk, y.to(DEV), kind, ak, tau, reduction=reduction)
    g1 = torch.ones(ref.shape, dtype=torch.float64)
    if reduction == "none":
        g1[1::2] = 0.5
    g2 = torch.full(ref.shape, 0.7, dtype=torch.float64)
    bf16 = dtype == torch.bfloat16
    for g in (g1, g2):
        g = g.to(loss.dtype)  # (the gradient arrives in the loss's dtype)
        ref.backward(g.double(), retain_graph=True)
        loss.backward(g.to(DEV), retain_graph=True)
        torch.testing.assert_close(zk.grad.double().cpu(), zr.grad, atol=8e-3 if bf16 else 4e-6,
                                   rtol=2e-2 if bf16 else 1e-4)
        if tensor_alpha:
            torch.testing.assert_close(ak.grad.double().cpu(), ar.grad, atol=1e-4, rtol=1e-3)


@on_kernel
@pytest.mark.parametrize("kind", ["sparsemax", "entmax15"])
def test_long_16bit_rows_streamed_while_writing_the_gradient_match_reference(kind):
    """bf16 rows longer than GRAD_SINGLE_MAX, which the forward writing the gradient streams in chunks:
    loss and gradient through autograd as the float64 reference's, flat and trained-like rows."""
    v = KL.GRAD_SINGLE_MAX + 700
    gen = torch.Generator().manual_seed(zlib.crc32(kind.encode()))
    z = (torch.randn(3, v, generator=gen) * torch.tensor([[3.0], [0.2], [1.0]])).to(torch.bfloat16)
    z[2, v // 3:] = float("-inf")
    y = torch.randint(0, v // 3, (3,), generator=gen)
    zr = z.double().requires_grad_()
    ref = ref_losses.fy_loss(zr, y, kind, 1.5 if kind == "entmax15" else 2.0, reduction="mean")
    ref.backward()
    zk = z.to(DEV).requires_grad_()
    loss = K.fy_loss(zk, y.to(DEV), kind, 1.5 if kind == "entmax15" else 2.0, reduction="mean")
    loss.backward()
    torch.testing.assert_close(loss.double().cpu(), ref.detach().to(torch.bfloat16).double(), atol=1e-2, rtol=8e-3)
    torch.testing.assert_close(zk.grad.double().cpu(), zr.grad, atol=2e-4, rtol=2e-2)


@on_kernel
@pytest.mark.parametrize("kind,dtype", [("sparsemax", torch.float32), ("entmax15", torch.float32),
                                        ("entmax_bisect", torch.bfloat16), ("alpha_relu", torch.float32)])
def test_backward_with_an_incoming_gradient_of_one_reads_no_logits(kind, dtype):
    """With an incoming gradient of 1 (`loss.backward()` of a mean or sum) the gradient is the one the
    forward wrote: the backward does not read the logits again (here overwritten with NaN after the
    forward, behind autograd's back), so its memory traffic is the forward's alone."""
    gen = torch.Generator().manual_seed(5)
    z = (torch.randn(6, 300, generator=gen) * 3).to(dtype)
    y = torch.randint(0, 300, (6,), generator=gen)
    alpha = 1.5 if kind == "alpha_relu" else 1.33
    zr = z.double().requires_grad_()
    ref_losses.fy_loss(zr, y, kind, alpha, reduction="mean").backward()
    zk = z.to(DEV).requires_grad_()
    assert KL.writes_grad(zk, kind, "mean")
    loss = K.fy_loss(zk, y.to(DEV), kind, alpha, reduction="mean")
    zk.data.fill_(float("nan"))
    loss.backward()
    bf16 = dtype == torch.bfloat16
    torch.testing.assert_close(zk.grad.double().cpu(), zr.grad, atol=1e-4 if bf16 else 2e-6,
                               rtol=2e-2 if bf16 else 1e-4)


@on_kernel
def test_double_backward_through_the_loss_is_refused():
    """The gradient the forward wrote is no differentiable function of the logits: a second derivative
    is an error, never a silent zero."""
    z = torch.randn(4, 30, device=DEV).requires_grad_()
    loss = K.fy_loss(z, torch.randint(0, 30, (4,), device=DEV), "entmax15", 1.5, reduction="sum")
    g = torch.ones((), device=DEV, requires_grad=True)
    (dz,) = torch.autograd.grad(loss, z, g, create_graph=True)
    with pytest.raises(RuntimeError, match="twice|does not require grad"):
        dz.sum().backward()


@on_kernel
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_fused_loss_reduction_walks_every_row_block(reduction):
    """More rows than the reduce kernel's block (1024): every block summed and counted, a bad target
    in the last block flagged."""
    gen = torch.Generator().manual_seed(11)
    n = 1300
    z = torch.randn(n, 8, generator=gen) * 3
    y = torch.randint(0, 8, (n,), generator=gen)
    y[::3] = -100
    ref = ref_losses.fy_loss(z.double(), y, "sparsemax", 2.0, reduction=reduction)
    loss = K.fy_loss(z.to(DEV), y.to(DEV), "sparsemax", 2.0, reduction=reduction)
    assert abs(loss.item() - ref.item()) <= 1e-5 * max(1.0, abs(ref.item()))
    y[n - 2] = 8
    _, aux = KL.reduce_rows(torch.zeros(n, device=DEV), y.to(DEV), 8, -100, reduction, torch.float32, check=False)
    assert aux[1].item() == 0.0


@on_kernel
def test_fused_loss_mean_over_no_rows_is_zero_and_the_target_check_flags_each_bad_target():
    z = torch.randn(4, 9, device=DEV).requires_grad_()
    none = torch.full((4,), -100, device=DEV)
    loss = K.fy_loss(z, none, "entmax15", 1.5, reduction="mean")
    loss.backward()
    assert loss.item() == 0.0 and (z.grad == 0).all()
    rows = torch.zeros(4, device=DEV)
    for bad, fine in ((9, False), (-1, False), (99, False), (-100, True), (8, True)):
        y = torch.tensor([0, 3, bad, 5], device=DEV)
        _, aux = KL.reduce_rows(rows, y, 9, -100, "sum", torch.float32, check=False)
        assert bool(aux[1] > 0) == fine, bad
        # the forward kernel reads nothing for a bad target (no read past the row): a finite row, loss 0
        loss, _, _ = KL.fy_loss_rows(z.detach(), y, "entmax15")
        assert loss[2].item() == 0.0 if not fine or bad == -100 else torch.isfinite(loss[2])
    if DEV == "cpu":  # (on CUDA a device assertion: it ends the process's CUDA context)
        with pytest.raises(ValueError, match=r"target contains a class index outside \[0, 9\)"):
            K.fy_loss(z, torch.tensor([0, 3, 9, 5]), "entmax15", 1.5, reduction="sum")


@pytest.mark.skipif(DEV != "cuda", reason="the CUDA device assertion (on CPU: the ValueError above)")
def test_a_bad_target_on_cuda_stops_the_process_naming_the_target():
    """A device assertion ends the process's CUDA context, so in a subprocess: the public loss with a
    target outside [0, V) fails, its message naming the target and the vocabulary."""
    code = ("import torch, onmt_entmax.ops as ops\n"
            "z = torch.randn(8, 50, device='cuda', requires_grad=True)\n"
            "y = torch.randint(0, 50, (8,), device='cuda'); y[3] = 50\n"
            "ops.entmax15_loss(z, y).backward(); torch.cuda.synchronize()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "target contains a class index outside [0, 50)" in proc.stdout + proc.stderr


@on_kernel
def test_public_loss_dispatches_to_the_kernel():
    """onmt_entmax's public loss takes the kernel path on CUDA and gives the same value."""
    if DEV != "cuda":
        pytest.skip("dispatch happens on CUDA tensors only")
    z = torch.randn(64, 1000, device=DEV) * 3
    y = torch.randint(0, 1000, (64,), device=DEV)
    from onmt_entmax.ops import _dispatch
    assert _dispatch.kernel("fy_loss", z, -1, kind="entmax15", alpha=1.5) is not None
    zr = z.clone().requires_grad_()
    loss = ops.entmax15_loss(zr, y)
    loss.backward()
    ref = ref_losses.fy_loss(z.double().cpu(), y.cpu(), "entmax15", 1.5)
    assert abs(loss.item() - ref.item()) <= 1e-5 * max(1.0, abs(ref.item()))
    p = ops.entmax15(z, -1)
    onehot = torch.nn.functional.one_hot(y, 1000).float()
    torch.testing.assert_close(zr.grad, (p - onehot) / 64, atol=1e-6, rtol=1e-4)


@on_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loss_peak_memory_not_above_cross_entropy(dtype):
    if DEV != "cuda":
        pytest.skip("CUDA memory statistics")
    n, v = 2048, 32768
    z = (torch.randn(n, v, device=DEV) * 3).to(dtype).requires_grad_()
    y = torch.randint(0, v, (n,), device=DEV)

    def peak(fn):
        z.grad = None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(z, y).backward()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    ce = peak(torch.nn.functional.cross_entropy)
    grad = n * v * z.element_size()  # the logits' gradient, which the forward writes: never copied after
    for op in (ops.entmax15_loss, ops.sparsemax_loss):
        used = peak(op)
        assert used <= ce and used <= grad + (1 << 20), (used, ce, grad)
