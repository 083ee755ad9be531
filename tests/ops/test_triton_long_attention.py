"""Tiled sparse attention of any length (triton/attention_long.py) against the float64 torch reference.

Runs on CUDA; without CUDA the same tests run in the Triton interpreter (TRITON_INTERPRET=1, on the
CPU) in a subprocess, with tiles of 32 queries x 32 keys so that 130-200 keys make several key tiles,
a partial last one, and several query blocks. The dtype, large-shape, memory and dispatch
tests need CUDA.
"""
import pytest
import torch

triton = pytest.importorskip("triton")
from triton_interpreter import DEV, INTERP, ON_KERNEL, run_in_interpreter  # noqa: E402

CUDA = torch.cuda.is_available() and not INTERP


@pytest.mark.skipif(ON_KERNEL, reason="the tests below run on the kernels directly")
def test_long_attention_in_the_triton_interpreter():
    run_in_interpreter(__file__, timeout=900)


if ON_KERNEL:
    from onmt_entmax.ops import attention as ref_attention  # noqa: E402
    from onmt_entmax.ops.bounded_alpha import bounded_alpha_reference as bounded  # noqa: E402
    from onmt_entmax.ops.triton import attention_long as KL  # noqa: E402

# kind -> alpha: per_head is one alpha per head, 1.0 (a softmax head) included
ALPHA = {"sparsemax": None, "entmax15": None, "entmax_bisect": 1.33, "per_head": [1.0, 1.4, 2.0]}
H = 3  # heads of the per-head cases; one head otherwise (the interpreter's time)


def _kind(kind):
    """(kernel kind, the kernel's alpha, the reference's float64 alpha)."""
    if kind == "per_head":
        a = torch.tensor(ALPHA[kind])
        return "entmax_bisect", a.float().to(DEV), a.double().view(-1, 1, 1)
    return kind, ALPHA[kind], ALPHA[kind]


def _case(Tq, Tk, D, Dv, seed, mask, H=1, B=2):
    """q, k, v (B, H heads) and (keep, causal) of a mask case:
    pad: keys padded per batch entry (B, 1, 1, Tk), batch 0 fully masked (uniform rows; B = 2);
    causal: causal, and the last batch entry's first key padded (its query 0 has no key: uniform over
    all keys, as the reference); causal-only: causal and no keep mask (no row fully masked);
    dense: one mask per query (B, 1, Tq, Tk), read through its strides; the masks the toolkits pass, as
    (B, 1, Tq, Tk) tensors, whose tiles are mostly kept or masked whole (`keep_tiles`): pad-full, key padding
    (the last entry's last third of the keys), causal-full, causal and that padding, with one row of the last
    entry that keeps no key (its query block reads every tile)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Tq, D, generator=g) * 2
    k = torch.randn(B, H, Tk, D, generator=g) * 2
    v = torch.randn(B, H, Tk, Dv, generator=g)
    if mask == "pad":
        keep = torch.rand(B, 1, 1, Tk, generator=g) > 0.3
        keep[..., 0] = True
        keep[0] = False
        return q, k, v, keep, False
    if mask == "causal-only":
        return q, k, v, None, True
    if mask == "causal":
        keep = torch.ones(B, 1, 1, Tk, dtype=torch.bool)
        keep[-1, ..., 0] = False
        return q, k, v, keep, True
    if mask in ("pad-full", "causal-full"):
        keep = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
        keep[-1, ..., Tk - Tk // 3:] = False
        if mask == "causal-full":
            keep &= torch.ones(Tq, Tk, dtype=torch.bool).tril()
            keep[-1, :, Tq // 3] = False
        return q, k, v, keep, False
    keep = torch.rand(B, 1, Tq, Tk, generator=g) > 0.5
    keep[..., 0] = True
    return q, k, v, keep, False


def _ref_keep(keep, causal, Tq, Tk):
    if keep is None:
        return torch.ones(Tq, Tk, dtype=torch.bool).tril() if causal else None
    return keep & torch.ones(Tq, Tk, dtype=torch.bool).tril() if causal else keep


def _on(keep):
    return keep.to(DEV) if keep is not None else None


def _grads(out, inputs, grad):
    return torch.autograd.grad(out, [x for x in inputs if torch.is_tensor(x) and x.requires_grad], grad)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind,Tq,Tk,mask", [
    ("sparsemax", 20, 150, "pad"), ("sparsemax", 130, 130, "causal"), ("sparsemax", 18, 200, "dense"),
    ("entmax15", 20, 150, "pad"), ("entmax15", 130, 130, "causal"), ("entmax15", 18, 200, "dense"),
    ("entmax15", 150, 150, "causal-only"), ("entmax_bisect", 20, 150, "pad"), ("per_head", 18, 200, "dense"),
    ("entmax15", 130, 130, "causal-full"), ("sparsemax", 40, 150, "pad-full"), ("per_head", 130, 130, "causal-full")])
def test_output_and_gradients_match_float64_reference(kind, Tq, Tk, mask):
    """out, dq, dk, dv and the per-head alpha-gradient against autograd through the reference:
    cross-attention (Tq != Tk), key padding with fully masked rows, causal (with and without a keep mask:
    the kernels then visit only the tiles up to the diagonal), a dense mask, the toolkits' masks as tensors
    (read by tiles). (alpha-entmax causal: the support test.)"""
    D = 16
    # (one batch entry where the pad case's fully masked one is not needed: the interpreter's time)
    q, k, v, keep, causal = _case(Tq, Tk, D, D, seed=Tq + Tk, mask=mask, H=H if kind == "per_head" else 1,
                                  B=2 if mask == "pad" else 1)
    name, alpha, a64 = _kind(kind)
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    a64 = a64.requires_grad_() if torch.is_tensor(a64) else a64
    ref = ref_attention._reference(q64, k64, v64, _ref_keep(keep, causal, Tq, Tk), name, a64, D ** -0.5, 200)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ref_grads = _grads(ref, (q64, k64, v64, a64), grad)
    qd, kd, vd = (x.to(DEV).requires_grad_() for x in (q, k, v))
    ad = alpha.clone().requires_grad_() if torch.is_tensor(alpha) else alpha
    assert KL.supports(qd, kd, vd, _on(keep), name, ad, 0.0)
    out = KL.sparse_attention(qd, kd, vd, _on(keep), name, ad, D ** -0.5, causal=causal)
    torch.testing.assert_close(out.double().cpu(), ref.detach(), atol=2e-5, rtol=1e-4)
    got_grads = _grads(out, (qd, kd, vd, ad), grad.float().to(DEV))
    if torch.is_tensor(alpha):  # (no alpha-gradient at alpha = 1, a softmax head)
        got_grads, ref_grads = (g[:3] + (g[3].view(-1)[1:],) for g in (got_grads, ref_grads))
    for got, want in zip(got_grads, ref_grads):
        torch.testing.assert_close(got.double().cpu(), want, atol=1e-4, rtol=1e-3)


def _passes_and_output(q, k, v, kind, alpha, monkeypatch):
    """(Newton passes of each query block, the output) of a float32 forward with 2 entries a key position
    in the start's subset (`TOPK`: the subset certifies at any row length there)."""
    monkeypatch.setattr(KL, "TOPK", 2)
    bm = KL._tiles(q.shape[-1], v.shape[-1], k.shape[-2], q.dtype, 0)[0]
    iters = torch.full((q.shape[0] * q.shape[1], -(-q.shape[2] // bm)), -1, dtype=torch.int32, device=DEV)
    monkeypatch.setattr(KL, "ITERS", iters)
    out = KL.sparse_attention(q.to(DEV), k.to(DEV), v.to(DEV), None, kind, alpha, q.shape[-1] ** -0.5)
    return iters.cpu(), out.double().cpu()


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind", ["sparsemax", "entmax15"])
def test_pass_one_certifies_the_threshold_of_a_subset_holding_the_support(kind, monkeypatch):
    """Peaked rows (scores of std 20), whose few support entries the start's subset holds with room (at most
    one a key position, of the 2 it keeps, in every row: 16 queries, one block on any tiles): the blocks take
    no Newton pass (pass 1 proves the subset's threshold the row's), and out is the reference's."""
    q, k, v, _keep, _causal = _case(16, 200, 16, 16, seed=3, mask="dense")
    q = q * 5
    iters, out = _passes_and_output(q, k, v, kind, None, monkeypatch)
    ref = ref_attention._reference(q.double(), k.double(), v.double(), None, kind, None, 16 ** -0.5, 200)
    assert (iters == 0).all(), iters
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
def test_alpha_entmax_rows_the_start_misses_take_halleys_steps(monkeypatch):
    """alpha = 1.33 rows of 1024 keys (randn, head dim 64), whose 100-odd support entries overflow the start's
    subset (4 entries a key position, as the launch keeps past 512 keys): the passes take Halley's step on
    A - 1 (C = sum d^(beta - 2) summed beside A and B), 2 a query block where Newton's step on the norm (the
    `HALLEY` knob off) takes 3 (`benchmarks/newton_passes.py` counts both in float64); out is the reference's
    either way."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 64, generator=gen) for n in (64, 1024, 1024))
    monkeypatch.setattr(KL, "TOPK", 4)
    bm = KL._tiles(64, 64, 1024, q.dtype, 2)[0]
    ref = ref_attention._reference(q.double(), k.double(), v.double(), None, "entmax_bisect", 1.33, 64 ** -0.5,
                                   200)
    for halley, passes in ((True, 2), (False, 3)):
        monkeypatch.setattr(KL, "HALLEY", halley)
        iters = torch.full((2, -(-64 // bm)), -1, dtype=torch.int32, device=DEV)
        monkeypatch.setattr(KL, "ITERS", iters)
        out = KL.sparse_attention(q.to(DEV), k.to(DEV), v.to(DEV), None, "entmax_bisect", 1.33, 64 ** -0.5)
        torch.testing.assert_close(out.double().cpu(), ref, atol=2e-5, rtol=1e-4)
        assert (iters.cpu() == passes).all(), (halley, iters)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("alpha", [1.25, 1.5, 1.8])
def test_alpha_entmax_takes_one_pass_from_a_subset_holding_the_support(alpha, monkeypatch):
    """The peaked rows above under alpha-entmax: Newton starts at the subset's threshold, within the
    tolerance of the row's, so one pass over the keys confirms it; out is the reference's. From the threshold
    less the solver's margin (`ALPHA_MARGIN`, the benchmarks' comparison) every block takes a pass more."""
    q, k, v, _keep, _causal = _case(16, 200, 16, 16, seed=3, mask="dense")
    q = q * 5
    iters, out = _passes_and_output(q, k, v, "entmax_bisect", alpha, monkeypatch)
    ref = ref_attention._reference(q.double(), k.double(), v.double(), None, "entmax_bisect", alpha, 16 ** -0.5, 200)
    assert (iters == 1).all(), iters
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)
    monkeypatch.setattr(KL, "ALPHA_MARGIN", True)
    iters, out = _passes_and_output(q, k, v, "entmax_bisect", alpha, monkeypatch)
    assert (iters == 2).all(), iters
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind", ["sparsemax", "entmax15", "entmax_bisect"])
def test_pass_one_does_not_certify_a_subset_missing_support(kind, monkeypatch):
    """Every row's support is 5 keys at one key position mod 64 (one position of any key tile), of which
    the start's subset keeps 2: no block may take the subset's threshold, whose weights would spread over
    those 2 alone; every block takes Newton passes and out is the reference's."""
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 1, 64, 16, generator=g) * 0.05
    q[..., 0] = 4.0
    k = torch.randn(1, 1, 320, 16, generator=g) * 0.05
    k[:, :, 5::64, 0] = 3.0  # (score 3 above the others' ~0: the support, and 5 of them at position 5)
    v = torch.randn(1, 1, 320, 16, generator=g)
    alpha = 1.5 if kind == "entmax_bisect" else None
    iters, out = _passes_and_output(q, k, v, kind, alpha, monkeypatch)
    ref = ref_attention._reference(q.double(), k.double(), v.double(), None, kind, alpha, 16 ** -0.5, 200)
    p = ref_attention._reference(q.double(), k.double(), torch.eye(320, dtype=torch.float64).view(1, 1, 320, 320),
                                 None, kind, alpha, 16 ** -0.5, 200)
    assert ((p > 0).sum(-1) == 5).all() and (p[..., 5::64] > 0).all()  # (the case is what it says)
    assert (iters >= 1).all(), iters
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind,Tq,Tk,mask", [("entmax15", 130, 130, "causal"), ("sparsemax", 20, 150, "pad"),
                                             ("entmax_bisect", 18, 200, "dense"),
                                             ("entmax15", 130, 130, "causal-full")])
def test_one_kernel_backward_matches_float64_reference(kind, Tq, Tk, mask, monkeypatch):
    """The backward that makes dq, dk and dv in one kernel over the key tiles (dq added atomically;
    half inputs take it) against autograd through the float64 reference, forced on float32 inputs:
    each mask, each kind, and that it ran instead of the dq kernel."""
    launched = []
    real = KL._launch
    monkeypatch.setattr(KL, "_launch", lambda fn, *a, **kw: launched.append(fn) or real(fn, *a, **kw))
    monkeypatch.setattr(KL, "FUSED_BWD", True)
    test_output_and_gradients_match_float64_reference(kind, Tq, Tk, mask)
    assert KL._c_kernel in launched and KL._bwd_dq_kernel not in launched


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind,Tq,Tk,mask", [("entmax15", 130, 130, "causal"), ("sparsemax", 20, 150, "pad"),
                                             ("entmax15", 150, 150, "causal-only"), ("entmax15", 18, 200, "dense"),
                                             ("entmax15", 130, 130, "causal-full")])
def test_rows_pass_one_leaves_are_solved_in_compact_blocks(kind, Tq, Tk, mask, monkeypatch):
    """ROWWISE: every row pass 1 does not prove goes to its (batch, head)'s list and a second launch solves
    them in blocks of rows from any query block; out and the gradients as the float64 reference's (the
    backward reads the thresholds the second launch wrote), with rows on the lists."""
    monkeypatch.setattr(KL, "ROWWISE", True)
    monkeypatch.setattr(KL, "TOPK", 2)
    counts = []
    real = KL._launch

    def launch(fn, grid, args, *a, **kw):
        real(fn, grid, args, *a, **kw)
        if fn is KL._fwd_kernel:
            counts.append(args[11].clone())  # (CNT: the rows each list took)

    monkeypatch.setattr(KL, "_launch", launch)
    test_output_and_gradients_match_float64_reference(kind, Tq, Tk, mask)
    assert counts and counts[0].sum() > 0, counts


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind,Tq,Tk,mask,fused", [("entmax15", 130, 130, "causal-only", True),
                                                   ("sparsemax", 20, 150, "pad", False),
                                                   ("per_head", 18, 200, "dense", True),
                                                   ("entmax15", 130, 130, "causal-full", True),
                                                   ("sparsemax", 40, 150, "pad-full", False)])
def test_backward_on_key_tiles_twice_the_forwards(kind, Tq, Tk, mask, fused, monkeypatch):
    """The backward on key tiles of twice the forward's (half inputs past SHORT_KEYS keys), skipping by the
    maxima of each pair of the forward's tiles (an odd last tile alone; causal: pairs across the diagonal,
    whose second tile the forward did not visit) against the float64 reference: a pair whose bound came
    out below a tile's entries would drop that tile's gradients. With the fused backward and without."""
    monkeypatch.setattr(KL, "BWD_KEYS", 2 * KL._tiles(16, 16, Tk, torch.float32, 1)[1])
    monkeypatch.setattr(KL, "FUSED_BWD", fused)
    calls = []
    real = KL.pair_maxima
    monkeypatch.setattr(KL, "pair_maxima", lambda t: calls.append(t.shape) or real(t))
    test_output_and_gradients_match_float64_reference(kind, Tq, Tk, mask)
    assert calls, "the backward did not take the paired tiles"


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
def test_a_causal_mask_as_a_tensor_is_swept_as_is_causal(monkeypatch):
    """The toolkits pass their decoders' causal and padding mask as a (B, 1, T, T) tensor: the forward visits
    each query block's tiles up to its diagonal and its last kept key only (those after them are masked
    whole and not read), as it would with is_causal, but every tile in the block of the row that keeps no
    key (which attends uniformly to all of them)."""
    Tq = Tk = 130
    q, k, v, keep, _c = _case(Tq, Tk, 16, 16, seed=4, mask="causal-full", B=1)
    maxima = []
    real = KL._launch

    def launch(fn, grid, args, *a, **kw):
        real(fn, grid, args, *a, **kw)
        if fn is KL._fwd_kernel:
            maxima.append(args[6].cpu())  # (TMAX: -inf where a tile was not visited)

    monkeypatch.setattr(KL, "_launch", launch)
    KL.sparse_attention(q.to(DEV), k.to(DEV), v.to(DEV), keep.to(DEV), "entmax15", None, 0.25)
    bm, bn = KL._tiles(16, 16, Tk, torch.float32, 1)[:2]
    visited = maxima[0][0] > float("-inf")
    last_kept = Tk - Tk // 3 - 1
    for qb in range(visited.shape[0]):
        rows = range(qb * bm, min(Tq, qb * bm + bm))
        ends = Tk - 1 if Tq // 3 in rows else min(rows[-1], last_kept)
        assert visited[qb].tolist() == [j * bn <= ends for j in range(visited.shape[1])], qb


def test_pair_maxima_bound_every_tile_of_the_pair():
    """Each coarse tile's maximum is the larger of its two tiles' (the odd last one its own), -inf tiles
    (not visited) never raising it."""
    t = torch.tensor([[[1.0, 3.0, -2.0, float("-inf"), 5.0]]])
    want = torch.tensor([[[3.0, -2.0, 5.0]]])
    from onmt_entmax.ops.triton import attention_long
    assert torch.equal(attention_long.pair_maxima(t), want)
    assert torch.equal(attention_long.pair_maxima(t[..., :4]), want[..., :2])


def _threshold_margin(s, keep, kind, alpha, p):
    """x - tau of every entry in float64 (x = (alpha - 1)(s - max s)), tau read off the reference's
    weights p on their support (x - tau = p^(alpha - 1) there)."""
    a1 = (torch.full((1,), 0.5 if kind == "entmax15" else 1.0, dtype=torch.float64) if kind != "entmax_bisect"
          else torch.as_tensor(alpha, dtype=torch.float64)).view(-1, 1, 1)
    s = s.masked_fill(~keep, -1e18)
    x = (s - s.amax(-1, keepdim=True)) * a1
    on = p > 0
    tau = torch.where(on, x - p.clamp_min(1e-300) ** a1, 0.0).sum(-1, keepdim=True) / on.sum(-1, keepdim=True)
    return x - tau


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind", ["sparsemax", "entmax15", "entmax_bisect"])
@pytest.mark.parametrize("mask", ["pad", "causal", "causal-full"])
def test_support_is_the_references_and_fully_masked_rows_are_uniform(kind, mask):
    """With v = I the output is the weights: zero exactly where the reference's are (away from ties:
    entries within 1e-4 of the threshold are not compared), weights summing to 1, and a row with
    every key masked uniform over all Tk keys, as the reference."""
    Tq, Tk = 40, 150
    q, k, _v, keep, causal = _case(Tq, Tk, 16, 16, seed=5, mask=mask)
    name, alpha, a64 = _kind(kind)
    eye = torch.eye(Tk).expand(2, 1, Tk, Tk)
    kp = _ref_keep(keep, causal, Tq, Tk)
    ref = ref_attention._reference(q.double(), k.double(), eye.double(), kp, name, a64, 0.25, 200)
    out = KL.sparse_attention(q.to(DEV), k.to(DEV), eye.to(DEV), keep.to(DEV), name, alpha, 0.25,
                              causal=causal).double().cpu()
    margin = _threshold_margin(torch.matmul(q.double(), k.double().transpose(-1, -2)) * 0.25,
                               kp.expand(ref.shape), name, a64, ref)
    clear = margin.abs() > 1e-4
    assert torch.equal((out > 0)[clear], (ref > 0)[clear])
    assert ((out > 0) != (ref > 0)).sum() <= (~clear).sum()
    torch.testing.assert_close(out.sum(-1), torch.ones(out.shape[:-1], dtype=torch.float64), atol=2e-6, rtol=0)
    dead = ~kp.expand(ref.shape).any(-1)
    assert dead.any()
    torch.testing.assert_close(out[dead], torch.full_like(out[dead], 1 / Tk), atol=1e-7, rtol=0)


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
def test_learned_alpha_logits_match_the_bounded_alpha_reference():
    """alpha = clamp(1 + sigmoid(a), 1.01, 2) from logits inside the kernels: output and dq, dk, dv, da
    as autograd through bounded_alpha and the float64 reference (da = 0 for the head clamped at 1.01)."""
    Tq, Tk, D = 20, 150, 16
    q, k, v, keep, _c = _case(Tq, Tk, D, D, seed=9, mask="dense", H=H, B=1)
    logits = torch.tensor([-6.0, 0.3, 2.5])  # alphas 1.01 (clamped), 1.57, 1.92 (H = 3 heads)
    q64, k64, v64, a64 = (x.double().requires_grad_() for x in (q, k, v, logits))
    ref = ref_attention._reference(q64, k64, v64, keep, "entmax_bisect",
                                   bounded(a64, 1.01, 2.0).double().view(-1, 1, 1), D ** -0.5, 200)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ref_grads = _grads(ref, (q64, k64, v64, a64), grad)
    qd, kd, vd, ad = (x.to(DEV).requires_grad_() for x in (q, k, v, logits))
    out = KL.sparse_attention(qd, kd, vd, keep.to(DEV), "entmax_bisect", ad, D ** -0.5, alpha_bounds=(1.01, 2.0))
    torch.testing.assert_close(out.double().cpu(), ref.detach(), atol=2e-5, rtol=1e-4)
    got_grads = _grads(out, (qd, kd, vd, ad), grad.float().to(DEV))
    for got, want in zip(got_grads, ref_grads):
        torch.testing.assert_close(got.double().cpu(), want, atol=1e-4, rtol=1e-3)
    assert got_grads[3][0] == 0 and (got_grads[3][1:] != 0).all()


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
@pytest.mark.parametrize("kind", ["entmax15", "entmax_bisect"])
def test_dropout_is_inverted_dropout_and_its_gradient_uses_the_same_draw(kind):
    """With v = I the output is the dropped weights: kept ones p / (1 - r), none off the support, a
    share 1 - r kept, the draw following torch's seed; gradients are those of p m / (1 - r) v through
    the reference, m the draw read off."""
    kind, alpha, _a64 = _kind(kind)
    Tq, Tk, D, r = 24, 150, 16, 0.3
    q, k, v, keep, _c = _case(Tq, Tk, D, D, seed=3, mask="dense", B=1)
    q, k, v, keep = q.to(DEV), k.to(DEV), v.to(DEV), keep.to(DEV)
    eye = torch.eye(Tk, device=DEV).expand(1, 1, Tk, Tk)
    torch.manual_seed(7)
    dropped = KL.sparse_attention(q, k, eye, keep, kind, alpha, D ** -0.5, r)
    torch.manual_seed(7)
    assert torch.equal(dropped, KL.sparse_attention(q, k, eye, keep, kind, alpha, D ** -0.5, r))
    p = KL.sparse_attention(q, k, eye, keep, kind, alpha, D ** -0.5)
    kept = dropped > 0
    torch.testing.assert_close(dropped[kept], p[kept] / (1 - r))
    assert not kept[p == 0].any()
    frac = kept.sum().item() / (p > 0).sum().item()
    assert abs(frac - (1 - r)) < 0.05, frac
    qd, kd, vd = (x.clone().requires_grad_() for x in (q, k, v))
    torch.manual_seed(7)
    out = KL.sparse_attention(qd, kd, vd, keep, kind, alpha, D ** -0.5, r)
    qr, kr, vr = (x.clone().requires_grad_() for x in (q, k, v))
    pr = ref_attention._reference(qr, kr, eye, keep, kind, alpha, D ** -0.5, 200)
    ref = torch.matmul(pr * kept / (1 - r), vr)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(DEV)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    for got, want in zip(_grads(out, (qd, kd, vd), grad), _grads(ref, (qr, kr, vr), grad)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)


# --- CUDA only: dtypes, head dims, long rows, memory, dispatch ----------------------------------
@pytest.mark.skipif(not CUDA, reason="needs CUDA (half dtypes, long rows: too slow in the interpreter)")
# (seeds whose rows have no key within 1e-6 of the threshold: sparsemax's gradient jumps at a tie)
@pytest.mark.parametrize("dtype,kind,D,Tq,Tk,seed", [
    (torch.float32, "entmax15", 64, 1000, 1000, 66), (torch.float32, "sparsemax", 64, 1000, 1000, 66),
    (torch.float32, "per_head", 128, 513, 777, 128), (torch.bfloat16, "entmax15", 64, 1000, 1000, 66),
    (torch.bfloat16, "sparsemax", 32, 300, 2500, 32), (torch.bfloat16, "per_head", 256, 200, 333, 256),
    (torch.bfloat16, "entmax15", 128, 513, 777, 128), (torch.float16, "entmax15", 64, 1000, 1000, 66),
    (torch.float16, "sparsemax", 256, 200, 333, 256), (torch.float16, "per_head", 32, 300, 2500, 32)])
def test_dtypes_and_head_dims_on_cuda(dtype, kind, D, Tq, Tk, seed):
    """float32 to 1e-4 of the float64 reference entry by entry; half inputs (scores and weights in
    float32, the tiles' products on tensor cores) to 2e-2 in norm (a key near the threshold may leave
    or enter the support in half precision); every head dim 32-256; causal where Tq == Tk."""
    mask = "causal" if Tq == Tk else "pad"
    q, k, v, keep, causal = _case(Tq, Tk, D, D, seed=seed, mask=mask, H=H)
    q, k, v = q / 2, k / 2, v  # (scores of scale ~2: a few dozen keys a row)
    name, alpha, a64 = _kind(kind)
    qd, kd, vd = (x.to(dtype).to(DEV).requires_grad_() for x in (q, k, v))
    out = KL.sparse_attention(qd, kd, vd, keep.to(DEV), name, alpha, D ** -0.5, causal=causal)
    assert out.dtype == dtype
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(0)).to(dtype).to(DEV)
    grads = torch.autograd.grad(out, (qd, kd, vd), grad)
    q64, k64, v64 = (x.detach().double().cpu().requires_grad_() for x in (qd, kd, vd))
    ref = ref_attention._reference(q64, k64, v64, _ref_keep(keep, causal, Tq, Tk), name, a64, D ** -0.5, 200)
    pairs = [(out, ref.detach())] + list(zip(grads, torch.autograd.grad(ref, (q64, k64, v64), grad.double().cpu())))
    for got, want in pairs:
        got = got.double().cpu()
        if dtype == torch.float32:
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)
        else:
            assert (got - want).norm() <= 2e-2 * want.norm(), ((got - want).norm() / want.norm()).item()


@pytest.mark.skipif(not CUDA, reason="needs CUDA (4096-key rows)")
@pytest.mark.parametrize("kind", ["sparsemax", "entmax15"])
def test_threshold_takes_few_passes_over_the_keys(kind):
    """Each query block's Newton passes over 4096 keys stay few: a row whose step no longer moves tau
    stops there, where the closed form's cancellation can fail the certificate a few ulps below 0 on
    every pass (up to the 32-pass limit, in some block of nearly every call, before). Sparsemax's blocks
    nearly all take none: pass 1 certifies the start's subset (`_start`)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 8, n, 64, device="cuda", dtype=torch.bfloat16, generator=g) for n in (1024, 4096, 4096))
    KL.ITERS = iters = torch.zeros(16, -(-1024 // KL._tiles(64, 64, 4096, q.dtype, 1)[0]), dtype=torch.int32,
                                   device="cuda")
    try:
        KL.sparse_attention(q, k, v, None, kind, None, 0.125)
    finally:
        KL.ITERS = None
    assert iters.max() <= 6, iters.max()
    if kind == "sparsemax":  # (randn rows: a few support entries, which the start's subset holds)
        assert (iters == 0).float().mean() >= 0.9, iters.float().mean()


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_memory_grows_with_t_not_t_squared():
    """Forward + backward at 16384 tokens allocates beyond its inputs and gradients less than a tenth
    of one head's Tq x Tk float32 weights (the materialized path holds B H of them)."""
    B, Hh, T, D = 1, 2, 16384, 64
    q, k, v = (torch.randn(B, Hh, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad = torch.randn(B, Hh, T, D, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = KL.sparse_attention(q, k, v, None, "entmax15", None, D ** -0.5, causal=True)
    torch.autograd.grad(out, (q, k, v), grad)
    extra = torch.cuda.max_memory_allocated() - base
    assert extra < 0.1 * T * T * 4, extra


@pytest.mark.skipif(not CUDA, reason="needs CUDA (the dispatch takes CUDA tensors only)")
def test_public_op_takes_the_tiled_kernels_above_the_short_rows(monkeypatch):
    """sparse_attention with rows longer than the short-row tiles: training, decoding-time calls of
    more than the decoding kernel's keys or queries, and is_causal take attention_long; a call for the weights
    and short rows do not; the results equal the reference's."""
    from onmt_entmax.ops.triton import attention_tiles

    called = []
    real = KL.sparse_attention
    monkeypatch.setattr(KL, "sparse_attention", lambda *a, **kw: called.append(1) or real(*a, **kw))
    q, k, v, keep, _c = (x.to(DEV) if torch.is_tensor(x) else x
                         for x in _case(30, attention_tiles.MAX_KEYS + 72, 16, 16, seed=1, mask="pad"))
    qg = q.clone().requires_grad_()
    out = ref_attention.sparse_attention(qg, k, v, keep, kind="entmax15")
    assert called == [1] and out.requires_grad
    ref = ref_attention._reference(q, k, v, keep, "entmax15", None, 0.25, None)
    torch.testing.assert_close(out.detach(), ref, atol=2e-5, rtol=1e-4)
    ref_attention.sparse_attention(qg, k, v, keep, kind="entmax15", return_weights=True)
    assert called == [1]
    causal = ref_attention.sparse_attention(qg[..., :20, :], k, v, keep, kind="entmax15", is_causal=True)
    assert called == [1, 1]
    kc = keep & torch.ones(20, k.shape[2], dtype=torch.bool, device=DEV).tril()
    torch.testing.assert_close(causal.detach(), ref_attention._reference(q[..., :20, :], k, v, kc, "entmax15", None,
                                                                          0.25, None), atol=2e-5, rtol=1e-4)
    for keys, queries, taken in ((3000, 1, False), (3000, 2, True), (5000, 1, True)):
        # (a decoding step's one query a row keeps the decoding kernel up to its LONG_KEYS: 4096 for sparsemax)
        long_k, long_v = torch.randn(2, 1, keys, 16, device=DEV), torch.randn(2, 1, keys, 16, device=DEV)
        qs = q[:, :1, :queries]
        before = len(called)
        with torch.no_grad():
            out = ref_attention.sparse_attention(qs, long_k, long_v, None, kind="sparsemax")
        assert len(called) == before + taken, (keys, queries)
        ref = ref_attention._reference(qs, long_k, long_v, None, "sparsemax", None, 0.25, None)
        torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)
    ref_attention.sparse_attention(qg, k[..., :100, :], v[..., :100, :], keep[..., :100], kind="entmax15")
    assert called == [1, 1, 1, 1]


@pytest.mark.skipif(not ON_KERNEL, reason="needs CUDA or TRITON_INTERPRET=1")
def test_supports_refuses_what_the_launch_cannot_take():
    """Calls the kernels cannot launch go to the reference instead of failing there: no key, more
    batch x heads than a grid's second dim, an alpha per query, grouped-query heads, wide heads."""
    q, k, v = (torch.zeros(2, 2, 5, 16, device=DEV) for _ in range(3))
    assert KL.supports(q, k, v, None, "entmax15", None, 0.0)
    assert not KL.supports(q, k[:, :, :0], v[:, :, :0], None, "entmax15", None, 0.0)
    wide = torch.zeros(KL.MAX_GRID_Y + 1, 1, 1, 16, device=DEV)
    assert not KL.supports(wide, wide, wide, None, "entmax15", None, 0.0)
    assert not KL.supports(q, k, v, None, "entmax_bisect", torch.full((2, 5, 1), 1.5, device=DEV), 0.0)
    assert not KL.supports(q, k[:, :1], v[:, :1], None, "entmax15", None, 0.0)
    big = torch.zeros(2, 2, 5, KL.MAX_HEAD_DIM + 1, device=DEV)
    assert not KL.supports(big, big, big, None, "entmax15", None, 0.0)
    # float32 heads past FP32_MAX_HEAD_DIM: their tiles exceed a block's shared memory (half ones fit)
    f32 = torch.zeros(2, 2, 5, KL.FP32_MAX_HEAD_DIM + 1, device=DEV)
    assert not KL.supports(f32, f32, f32, None, "entmax15", None, 0.0)
    assert KL.supports(*(f32.bfloat16(),) * 3, None, "entmax15", None, 0.0)
    assert KL.supports(*(f32[..., :-1],) * 3, None, "entmax15", None, 0.0)
