"""Fused sparse attention kernel against the float64 torch reference.

Runs on CUDA; without CUDA the same tests run in the Triton interpreter (TRITON_INTERPRET=1, on the
CPU) in a subprocess, so CI checks the kernel's logic too.
"""
import os
import subprocess
import sys

import pytest
import torch

triton = pytest.importorskip("triton")

INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
DEV = "cuda" if torch.cuda.is_available() and not INTERP else "cpu"
ON_KERNEL = torch.cuda.is_available() or INTERP


@pytest.mark.skipif(ON_KERNEL, reason="the tests below run on the kernel directly")
def test_kernel_in_the_triton_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


if ON_KERNEL:
    from onmt_entmax.ops import attention as ref_attention  # noqa: E402
    from onmt_entmax.ops import triton as K  # noqa: E402
    from onmt_entmax.ops.triton import attention as KA  # noqa: E402

ALPHA = {"sparsemax": None, "entmax15": None, "entmax_bisect": 1.33, "per_head": [1.0, 1.2, 1.6, 2.0]}


def _case(Tq, Tk, D, Dv, seed, keep_shape):
    g = torch.Generator().manual_seed(seed)
    B, H = 3, 4
    q = torch.randn(B, H, Tq, D, generator=g) * 2
    k = torch.randn(B, H, Tk, D, generator=g) * 2
    v = torch.randn(B, H, Tk, Dv, generator=g)
    keep = torch.rand(keep_shape(B, H, Tq, Tk), generator=g) > 0.3
    keep.view(-1, Tk)[:, 0] = True
    keep[0] = False  # a fully masked batch entry: uniform weights, as OpenNMT-py's eager path
    return q, k, v, keep


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind", list(ALPHA))
@pytest.mark.parametrize("Tq,Tk,D,Dv", [(1, 1, 8, 8), (1, 23, 64, 64), (5, 130, 40, 24), (2, 300 if INTERP else 700, 16, 16)])
def test_fused_attention_matches_float64_reference(kind, Tq, Tk, D, Dv):
    keep_shape = (lambda B, H, Tq, Tk: (B, 1, 1, Tk)) if Tq == 1 else (lambda B, H, Tq, Tk: (B, 1, Tq, Tk))
    q, k, v, keep = _case(Tq, Tk, D, Dv, seed=Tk + D, keep_shape=keep_shape)
    name = "entmax_bisect" if kind == "per_head" else kind
    alpha = torch.tensor(ALPHA[kind]) if kind == "per_head" else ALPHA[kind]
    a64 = alpha.double().view(-1, 1, 1) if torch.is_tensor(alpha) else alpha
    ref = ref_attention._reference(q.double(), k.double(), v.double(), keep, name, a64, D ** -0.5, 200)
    a_dev = alpha.float().to(DEV) if torch.is_tensor(alpha) else alpha
    assert K.supports("sparse_attention", q.to(DEV), k=k.to(DEV), v=v.to(DEV), keep=keep.to(DEV), kind=name,
                      alpha=a_dev)
    out = KA.sparse_attention(q.to(DEV), k.to(DEV), v.to(DEV), keep.to(DEV), name, a_dev).cpu()
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_strided_heads_and_no_mask(dtype):
    """OpenNMT-py's (B, H, T, d) tensors are transposed views of (B, T, H, d): strides, not copies."""
    g = torch.Generator().manual_seed(5)
    B, H, T, d = 2, 4, 11, 16
    q, k, v = (torch.randn(B, T, H, d, generator=g).to(dtype).to(DEV).transpose(1, 2) for _ in range(3))
    ref = ref_attention._reference(q.double(), k.double(), v.double(), None, "entmax15", None, d ** -0.5, None)
    out = KA.sparse_attention(q, k, v, None, "entmax15")
    assert out.dtype == dtype and out.shape == (B, H, T, d)
    torch.testing.assert_close(out.double().cpu(), ref.cpu(), atol=2e-2, rtol=2e-2)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
def test_public_op_takes_the_kernel_only_without_grad():
    q, k, v, keep = (x.to(DEV) for x in _case(1, 9, 8, 8, seed=1, keep_shape=lambda B, H, Tq, Tk: (B, 1, 1, Tk)))
    called = []
    real = KA.sparse_attention
    KA.sparse_attention = lambda *a, **kw: called.append(1) or real(*a, **kw)
    try:
        with torch.no_grad():
            fused = ref_attention.sparse_attention(q, k, v, keep, kind="entmax15")
        qg = q.clone().requires_grad_()
        eager = ref_attention.sparse_attention(qg, k, v, keep, kind="entmax15")
    finally:
        KA.sparse_attention = real
    assert len(called) == (1 if q.is_cuda else 0)  # (CPU tensors: the reference, also under the interpreter)
    assert eager.requires_grad
    torch.testing.assert_close(fused, eager.detach(), atol=2e-5, rtol=1e-4)
