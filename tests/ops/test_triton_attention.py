"""Fused sparse attention kernel against the float64 torch reference.

Runs on CUDA; without CUDA the same tests run in the Triton interpreter (TRITON_INTERPRET=1, on the
CPU) in a subprocess, so CI checks the kernel's logic too.
"""
import pytest
import torch

triton = pytest.importorskip("triton")
from triton_interpreter import DEV, IN_PROCESS, INTERP, ON_KERNEL, kernel_tests, run_in_interpreter  # noqa: E402


@pytest.mark.skipif(ON_KERNEL, reason=IN_PROCESS)
def test_kernel_in_the_triton_interpreter():
    run_in_interpreter(__file__)


on_kernel = kernel_tests("test_kernel_in_the_triton_interpreter")


if ON_KERNEL:
    from onmt_entmax.ops import attention as ref_attention  # noqa: E402
    from onmt_entmax.ops.triton import attention as KA  # noqa: E402

ALPHA = {"sparsemax": None, "entmax15": None, "entmax_bisect": 1.33, "per_head": [1.0, 1.2, 1.6, 2.0]}


def _calls_of(monkeypatch, owner, name: str) -> list:
    """owner.name still runs, each call appending to the returned list (undone after the test)."""
    called = []
    real = getattr(owner, name)
    monkeypatch.setattr(owner, name, lambda *a, **kw: called.append(1) or real(*a, **kw))
    return called


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


@on_kernel
@pytest.mark.parametrize("kind", list(ALPHA))
@pytest.mark.parametrize("Tq,Tk,D,Dv", [(1, 1, 8, 8), (1, 23, 64, 64), (5, 130, 40, 24),
                                        (2, 300 if INTERP else 700, 16, 16),
                                        (1, 1500 if INTERP else 4096, 64, 32),  # a decoding step past MAX_KEYS
                                        (1, 1100 if INTERP else 2500, 16, 16)])
def test_fused_attention_matches_float64_reference(kind, Tq, Tk, D, Dv):
    keep_shape = (lambda B, H, Tq, Tk: (B, 1, 1, Tk)) if Tq == 1 else (lambda B, H, Tq, Tk: (B, 1, Tq, Tk))
    q, k, v, keep = _case(Tq, Tk, D, Dv, seed=Tk + D, keep_shape=keep_shape)
    name = "entmax_bisect" if kind == "per_head" else kind
    alpha = torch.tensor(ALPHA[kind]) if kind == "per_head" else ALPHA[kind]
    a64 = alpha.double().view(-1, 1, 1) if torch.is_tensor(alpha) else alpha
    ref = ref_attention._reference(q.double(), k.double(), v.double(), keep, name, a64, D ** -0.5, 200)
    a_dev = alpha.float().to(DEV) if torch.is_tensor(alpha) else alpha
    assert KA.supports(q.to(DEV), k.to(DEV), v.to(DEV), keep.to(DEV), name, a_dev)
    out = KA.sparse_attention(q.to(DEV), k.to(DEV), v.to(DEV), keep.to(DEV), name, a_dev).cpu()
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=1e-4)


@on_kernel
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("Tq,Tk", [(11, 11), (1, 1100 if INTERP else 3000)])  # (and a step past MAX_KEYS)
def test_half_inputs_strided_heads_and_no_mask(dtype, Tq, Tk):
    """OpenNMT-py's (B, H, T, d) tensors are transposed views of (B, T, H, d): strides, not copies."""
    g = torch.Generator().manual_seed(5)
    B, H, d = 2, 4, 16
    q, k, v = (torch.randn(B, T, H, d, generator=g).to(dtype).to(DEV).transpose(1, 2) for T in (Tq, Tk, Tk))
    ref = ref_attention._reference(q.double(), k.double(), v.double(), None, "entmax15", None, d ** -0.5, None)
    out = KA.sparse_attention(q, k, v, None, "entmax15")
    assert out.dtype == dtype and out.shape == (B, H, Tq, d)
    torch.testing.assert_close(out.double().cpu(), ref.cpu(), atol=2e-2, rtol=2e-2)


@on_kernel
def test_public_op_takes_the_kernel_only_without_grad(monkeypatch):
    q, k, v, keep = (x.to(DEV) for x in _case(1, 9, 8, 8, seed=1, keep_shape=lambda B, H, Tq, Tk: (B, 1, 1, Tk)))
    called = _calls_of(monkeypatch, KA, "decode")
    with torch.no_grad():
        fused = ref_attention.sparse_attention(q, k, v, keep, kind="entmax15")
    qg = q.clone().requires_grad_()
    eager = ref_attention.sparse_attention(qg, k, v, keep, kind="entmax15")
    assert len(called) == (1 if q.is_cuda else 0)  # (CPU tensors: the reference, also under the interpreter)
    assert eager.requires_grad
    torch.testing.assert_close(fused, eager.detach(), atol=2e-5, rtol=1e-4)


@on_kernel
def test_decoding_entry_point_runs_the_attention_modules_current_decode(monkeypatch):
    """The package-level entry resolves `attention.decode` at each call (it caches the module, not the
    function), so a patched decode, such as the spy of the test above, is the one that runs."""
    import onmt_entmax.ops.triton as kernels

    q, k, v, keep = (x.to(DEV) for x in _case(1, 9, 8, 8, seed=2, keep_shape=lambda B, H, Tq, Tk: (B, 1, 1, Tk)))
    kernels.sparse_attention_decode(q, k, v, keep, "entmax15")  # (the module imported and cached)
    called = _calls_of(monkeypatch, KA, "decode")
    out = kernels.sparse_attention_decode(q, k, v, keep, "entmax15")
    assert called == [1]
    torch.testing.assert_close(out, KA.sparse_attention(q, k, v, keep, "entmax15"), atol=0, rtol=0)


@on_kernel
def test_decoding_call_takes_exactly_what_supports_takes_and_refuses_the_rest_with_none():
    """The decoding path looks at the arguments once: it must refuse (None, so the op falls back to the
    reference) every call `supports` refuses, and launch the same kernel for the others."""
    q, k, v, keep = (x.to(DEV) for x in _case(1, 9, 8, 8, seed=3, keep_shape=lambda B, H, Tq, Tk: (B, 1, 1, Tk)))
    heads = torch.tensor([1.2, 1.5, 1.7, 2.0], device=DEV)
    long_k = torch.randn(3, 4, KA.MAX_KEYS + 1, 8, device=DEV)
    longer_k = torch.randn(3, 4, KA.LONG_KEYS["entmax15"] + 1, 8, device=DEV)
    q2 = torch.randn(3, 4, 2, 8, device=DEV)
    calls = {
        "padding mask": (q, k, v, keep, "entmax15", None),
        "no mask": (q, k, v, None, "sparsemax", None),
        "one mask for every row, 3-D": (q, k, v, keep[1], "entmax15", None),
        "per-head alphas": (q, k, v, keep, "entmax_bisect", heads),
        "float alpha": (q, k, v, keep, "entmax_bisect", 1.33),
        "float mask": (q, k, v, keep.float(), "entmax15", None),
        "mask of 4 keys for 9": (q, k, v, keep[..., :4], "entmax15", None),
        "mask of 5 dims": (q, k, v, keep[None], "entmax15", None),
        "keys of 2 heads for 4": (q, k[:, :2], v[:, :2], keep, "entmax15", None),
        "values of 8 keys for 9": (q, k, v[:, :, :8], keep, "entmax15", None),
        "head dim strided": (q, k, v.transpose(-1, -2), keep, "entmax15", None),
        "values in float64": (q, k, v.double(), keep, "entmax15", None),
        "one query over more keys than MAX_KEYS": (q, long_k, long_k, None, "entmax15", None),
        "two queries over more keys than MAX_KEYS": (q2, long_k, long_k, None, "entmax15", None),
        "one query over more keys than LONG_KEYS": (q, longer_k, longer_k, None, "entmax15", None),
        "sparsemax of one query over more keys than its LONG_KEYS": (q, longer_k[:, :, :KA.LONG_KEYS["sparsemax"] + 1],
                                                                    longer_k[:, :, :KA.LONG_KEYS["sparsemax"] + 1],
                                                                    None, "sparsemax", None),
        "alpha 1 (softmax)": (q, k, v, keep, "entmax_bisect", 1.0),
        "3 alphas for 4 heads": (q, k, v, keep, "entmax_bisect", heads[:3]),
        "float64 alphas": (q, k, v, keep, "entmax_bisect", heads.double()),
        "unknown kind": (q, k, v, keep, "softmax", None),
        "3-D query": (q[0], k[0], v[0], None, "entmax15", None),
    }
    taken = {name for name, args in calls.items() if KA.supports(*args)}
    assert taken == {"padding mask", "no mask", "one mask for every row, 3-D", "per-head alphas", "float alpha",
                     "one query over more keys than MAX_KEYS"}
    for name, args in calls.items():
        out = KA.decode(*args, None)
        assert (out is not None) == (name in taken), name
        if out is not None:
            torch.testing.assert_close(out, KA.sparse_attention(*args), atol=0, rtol=0)


@on_kernel
def test_decoding_calls_alike_but_for_strides_alignment_mask_or_alpha_each_get_their_own_answer():
    """Decoding plans a launch once per call key (shapes, strides, dtypes, alpha's form): calls that share
    shapes but differ in what the key or the launch reads must not share a result."""
    q, k, v, keep = (x.to(DEV) for x in _case(1, 9, 8, 8, seed=7, keep_shape=lambda B, H, Tq, Tk: (B, 1, 1, Tk)))
    B, H = q.shape[:2]
    buf = torch.randn(q.numel() + 1, device=DEV)
    shifted = buf[1:].view(q.shape)  # 4 bytes past a 16-byte boundary: another kernel specialisation
    strided = torch.randn(B, H, 1, 16, device=DEV)[..., :8]  # q's shape, other batch and head strides
    calls = [("entmax15", q, keep, None), ("entmax15", q * 3, keep, None), ("entmax15", shifted, keep, None),
             ("entmax15", strided, keep, None), ("entmax15", q, keep.expand(B, H, 1, 9), None),
             ("entmax15", q, keep.expand(B, H, 1, 9).contiguous(), None), ("entmax15", q, keep.float(), None),
             ("entmax_bisect", q, keep, 1.33), ("entmax_bisect", q, keep, 1.7), ("entmax_bisect", q, keep, 1.33),
             ("entmax_bisect", q, keep, torch.tensor([1.2, 1.5, 1.7, 2.0], device=DEV))]
    for kind, qq, kk, alpha in calls:
        out = KA.decode(qq, k, v, kk, kind, alpha, None)
        if kk.dtype != torch.bool:  # refused, however often its shapes were taken before
            assert out is None
            continue
        a64 = alpha.double().view(-1, 1, 1).cpu() if torch.is_tensor(alpha) else alpha
        ref = ref_attention._reference(qq.double().cpu(), k.double().cpu(), v.double().cpu(), kk.cpu(), kind, a64,
                                       8 ** -0.5, 200)
        torch.testing.assert_close(out.double().cpu(), ref, atol=2e-5, rtol=1e-4)


# --- training: the differentiable fused path (triton/attention_train.py) ------------------------
if ON_KERNEL:
    from onmt_entmax.ops.triton import attention_train as KT  # noqa: E402


def _grads(out, inputs, grad):
    return torch.autograd.grad(out, [x for x in inputs if torch.is_tensor(x) and x.requires_grad], grad)


@on_kernel
@pytest.mark.parametrize("kind", list(ALPHA))
@pytest.mark.parametrize("Tq,Tk,mask", [(7, 7, "causal"), (4, 23, "pad"), (3, 130 if INTERP else 600, "pad")])
def test_training_attention_and_its_gradients_match_float64_reference(kind, Tq, Tk, mask):
    """Output, dq, dk, dv and the per-head alpha gradient against autograd through the reference."""
    D = 16
    shape = (lambda B, H, Tq, Tk: (B, 1, 1, Tk)) if mask == "pad" else (lambda B, H, Tq, Tk: (B, 1, Tq, Tk))
    q, k, v, keep = _case(Tq, Tk, D, D, seed=Tq * Tk, keep_shape=shape)
    if mask == "causal":
        keep &= torch.ones(Tq, Tk, dtype=torch.bool).tril()
        keep[..., 0] = True
    name = "entmax_bisect" if kind == "per_head" else kind
    alpha = torch.tensor(ALPHA[kind]).view(-1, 1, 1) if kind == "per_head" else ALPHA[kind]
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    a64 = alpha.double().requires_grad_() if torch.is_tensor(alpha) else alpha
    ref = ref_attention._reference(q64, k64, v64, keep, name, a64, D ** -0.5, 200)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ref_grads = _grads(ref, (q64, k64, v64, a64), grad)
    qd, kd, vd = (x.to(DEV).requires_grad_() for x in (q, k, v))
    ad = alpha.float().to(DEV).requires_grad_() if torch.is_tensor(alpha) else alpha
    out, weights = KT.sparse_attention(qd, kd, vd, keep.to(DEV), name, ad, D ** -0.5, 0.0, return_weights=True)
    torch.testing.assert_close(out.double().cpu(), ref.detach(), atol=2e-5, rtol=1e-4)
    live = keep.expand(weights.shape).any(-1, keepdim=True).to(DEV)  # (batch 0: no key kept, uniform)
    assert not weights.requires_grad and ((weights == 0) | keep.to(DEV) | ~live).all()  # masked: exactly 0
    got_grads = _grads(out, (qd, kd, vd, ad), grad.float().to(DEV))
    if torch.is_tensor(alpha):  # (no alpha-gradient at alpha = 1, a softmax head: a learned alpha is >= 1.01)
        got_grads, ref_grads = (g[:3] + (g[3][alpha > 1],) for g in (got_grads, ref_grads))
    for got, want in zip(got_grads, ref_grads):
        torch.testing.assert_close(got.double().cpu(), want, atol=1e-4, rtol=1e-3)


@on_kernel
@pytest.mark.parametrize("Tk", [23, 130 if INTERP else 600])
def test_learned_alpha_logits_inside_the_kernels_match_the_bounded_alpha_reference(Tk):
    """alpha = clamp(1 + sigmoid(a), 1.01, 2) from the logits a computed by the attention kernels:
    output and dq, dk, dv, da as autograd through bounded_alpha and the float64 reference (da = 0 for a
    head clamped at 1.01), on the tiles (23 keys) and the cuBLAS path."""
    from onmt_entmax.ops.bounded_alpha import bounded_alpha_reference as bounded
    Tq, D = 4, 16
    q, k, v, keep = _case(Tq, Tk, D, D, seed=Tk, keep_shape=lambda B, H, Tq, Tk: (B, 1, 1, Tk))
    logits = torch.tensor([-6.0, -1.0, 0.3, 2.5])  # alphas 1.01 (clamped), 1.27, 1.57, 1.92
    q64, k64, v64, a64 = (x.double().requires_grad_() for x in (q, k, v, logits))
    ref = ref_attention._reference(q64, k64, v64, keep, "entmax_bisect",
                                   bounded(a64, 1.01, 2.0).double().view(-1, 1, 1), D ** -0.5, 200)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ref_grads = _grads(ref, (q64, k64, v64, a64), grad)
    qd, kd, vd, ad = (x.to(DEV).requires_grad_() for x in (q, k, v, logits))
    out = KT.sparse_attention(qd, kd, vd, keep.to(DEV), "entmax_bisect", ad, D ** -0.5, 0.0, alpha_bounds=(1.01, 2.0))
    torch.testing.assert_close(out.double().cpu(), ref.detach(), atol=2e-5, rtol=1e-4)
    got_grads = _grads(out, (qd, kd, vd, ad), grad.float().to(DEV))
    for got, want in zip(got_grads, ref_grads):
        torch.testing.assert_close(got.double().cpu(), want, atol=1e-4, rtol=1e-3)
    assert got_grads[3][0] == 0 and (got_grads[3][1:] != 0).all()


@on_kernel
@pytest.mark.parametrize("kind", ["entmax15", "per_head"])
def test_training_attention_dropout_is_inverted_dropout_and_its_gradient_uses_the_same_draw(kind):
    B, H, Tq, Tk, D, r = 3, 4, 9, 40, 16, 0.3
    q, k, v, keep = _case(Tq, Tk, D, D, seed=3, keep_shape=lambda B, H, Tq, Tk: (B, 1, 1, Tk))
    name = "entmax_bisect" if kind == "per_head" else kind
    alpha = torch.tensor(ALPHA[kind]).view(-1, 1, 1).to(DEV) if kind == "per_head" else None
    q, k, keep = q.to(DEV), k.to(DEV), keep.to(DEV)
    eye = torch.eye(Tk, device=DEV).expand(B, H, Tk, Tk)  # v = I: the output is the dropped weights
    torch.manual_seed(7)
    dropped, p = KT.sparse_attention(q, k, eye, keep, name, alpha, D ** -0.5, r, return_weights=True)
    torch.manual_seed(7)
    again = KT.sparse_attention(q, k, eye, keep, name, alpha, D ** -0.5, r)
    assert torch.equal(dropped, again)  # the draw follows torch's seed
    kept = dropped > 0
    support = p > 0
    torch.testing.assert_close(dropped[kept], p[kept] / (1 - r))
    assert not (dropped > 0)[~support].any()
    frac = (kept & support).sum().item() / support.sum().item()
    assert abs(frac - (1 - r)) < 0.05, frac
    # gradients: those of p m / (1 - r) v through the reference, m the draw read off above
    qd, kd, vd = (x.clone().requires_grad_() for x in (q, k, v.to(DEV)))
    torch.manual_seed(7)
    out = KT.sparse_attention(qd, kd, vd, keep, name, alpha, D ** -0.5, r)
    qr, kr, vr = (x.clone().requires_grad_() for x in (q, k, v.to(DEV)))
    pr = ref_attention._reference(qr, kr, torch.eye(Tk, device=DEV).expand(B, H, Tk, Tk), keep, name,
                                  alpha, D ** -0.5, 200)
    ref = torch.matmul(pr * kept / (1 - r), vr)
    grad = torch.randn(out.shape, device=DEV, generator=torch.Generator(DEV).manual_seed(2))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    for got, want in zip(_grads(out, (qd, kd, vd), grad), _grads(ref, (qr, kr, vr), grad)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)


@on_kernel
def test_public_op_with_grad_or_dropout_takes_the_training_kernel_on_cuda(monkeypatch):
    q, k, v, keep = (x.to(DEV) for x in _case(5, 9, 8, 8, seed=1, keep_shape=lambda B, H, Tq, Tk: (B, 1, 1, Tk)))
    called = _calls_of(monkeypatch, KT, "sparse_attention")
    qg = q.clone().requires_grad_()
    out, weights = ref_attention.sparse_attention(qg, k, v, keep, kind="sparsemax", return_weights=True)
    with torch.no_grad():
        ref_attention.sparse_attention(q, k, v, keep, kind="sparsemax", dropout_p=0.5)
    assert len(called) == (2 if q.is_cuda else 0)
    assert out.requires_grad and weights.shape == (3, 4, 5, 9)
    with pytest.raises(ValueError, match="dropout_p"):
        ref_attention.sparse_attention(q, k, v, keep, kind="sparsemax", dropout_p=1.5)


@on_kernel
@pytest.mark.parametrize("dtype", [torch.float32] + ([torch.bfloat16, torch.float16] if not INTERP else []))
def test_training_attention_on_head_views_copies_nothing_and_matches(dtype):
    """OpenNMT-py's (B, H, T, d) heads are transposed views of (B, T, H, d): short rows (the tiles) read
    them in place, write the output in the layout upstream's unshape wants and the gradients in the
    layouts of q, k and v; results as the reference's (float32 math, half inputs to 2e-2)."""
    from onmt_entmax.ops.triton import attention_tiles
    g = torch.Generator().manual_seed(11)
    B, H, T, S, d = 3, 4, 13, 21, 32
    q = (torch.randn(B, T, H, d, generator=g)).to(dtype).to(DEV).transpose(1, 2).requires_grad_()
    k, v = ((torch.randn(B, S, H, d, generator=g)).to(dtype).to(DEV).transpose(1, 2).requires_grad_() for _ in range(2))
    keep = (torch.rand(B, 1, 1, S, generator=g) > 0.2).to(DEV)
    assert attention_tiles.fits(q, k, v)
    out = KT.sparse_attention(q, k, v, keep, "entmax15", None, d ** -0.5, 0.0)
    assert out.transpose(1, 2).is_contiguous()  # unshape's .contiguous() is then free
    grad = torch.randn(out.shape, generator=g).to(dtype).to(DEV)
    grads = torch.autograd.grad(out, (q, k, v), grad)
    assert [x.stride() for x in grads] == [q.stride(), k.stride(), v.stride()]
    q64, k64, v64 = (x.detach().double().cpu().requires_grad_() for x in (q, k, v))
    ref = ref_attention._reference(q64, k64, v64, keep.cpu(), "entmax15", None, d ** -0.5, None)
    tol = dict(atol=1e-4, rtol=1e-3) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(out.double().cpu(), ref, **tol)
    for got, want in zip(grads, torch.autograd.grad(ref, (q64, k64, v64), grad.double().cpu())):
        torch.testing.assert_close(got.double().cpu(), want, **tol)


@on_kernel
def test_bounded_alpha_kernel_equals_the_torch_chain_with_its_gradient():
    """Learned per-head alphas: clamp(1 + sigmoid(a), 1.01, 2) in one launch each way."""
    from onmt_entmax.ops.bounded_alpha import bounded_alpha_reference
    from onmt_entmax.ops.triton import alpha as KAL
    a = torch.tensor([-8.0, -3.9, -0.5, 0.0, 0.7, 2.0, 40.0], device=DEV, requires_grad=True)
    grad = torch.randn(7, generator=torch.Generator().manual_seed(0)).to(DEV)
    out = KAL.bounded_alpha(a, 1.01, 2.0)
    (da,) = torch.autograd.grad(out, a, grad)
    a_ref = a.detach().clone().requires_grad_()
    ref = bounded_alpha_reference(a_ref, 1.01, 2.0)
    (da_ref,) = torch.autograd.grad(ref, a_ref, grad)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(da, da_ref, atol=1e-7, rtol=1e-5)
    assert out.min() >= 1.01 and out.max() <= 2.0 and da[0] == 0  # clamped at 1.01: no gradient
