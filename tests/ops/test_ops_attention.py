"""sparse_attention: attention with a sparse normalizer, as OpenNMT-py computes it, in one call."""
import pytest
import torch

import onmt_entmax as oe
from onmt_entmax.ops import sparse_attention


def _inputs(dtype=torch.float64, B=2, H=3, Tq=4, Tk=9, D=8, Dv=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(B, H, n, D, generator=g, dtype=dtype) * 2 for n in (Tq, Tk))
    v = torch.randn(B, H, Tk, Dv, generator=g, dtype=dtype)
    keep = torch.rand(B, 1, 1, Tk, generator=g) > 0.3
    keep[..., 0] = True
    return q, k, v, keep


@pytest.mark.parametrize("kind,alpha,mapping", [
    ("sparsemax", None, lambda s: oe.sparsemax(s, -1)),
    ("entmax15", None, lambda s: oe.entmax15(s, -1)),
    ("entmax_bisect", 1.3, lambda s: oe.entmax_bisect(s, 1.3, -1)),
    ("entmax_bisect", "head", lambda s: oe.entmax_bisect(s, torch.tensor([1.1, 1.5, 2.0]).double().view(3, 1, 1), -1)),
])
def test_is_the_mapping_of_masked_scaled_scores_times_values(kind, alpha, mapping):
    q, k, v, keep = _inputs()
    a = torch.tensor([1.1, 1.5, 2.0], dtype=torch.float64).view(3, 1, 1) if alpha == "head" else alpha
    out = sparse_attention(q, k, v, keep, kind=kind, alpha=a)
    scores = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(~keep, -1e18)
    p = mapping(scores)
    assert (p == 0).any() and (p[~keep.expand_as(p)] == 0).all(), "masked keys get exactly zero weight"
    torch.testing.assert_close(out, p @ v)


@pytest.mark.parametrize("kind", ["sparsemax", "entmax15", "entmax_bisect", "learned"])
def test_gradients_to_q_k_v_and_per_head_alpha_match_finite_differences(kind):
    """torch.autograd.gradcheck: the analytic gradients of every input (queries, keys, values, the
    per-head alphas or their logits) against central finite differences in float64."""
    q, k, v, keep = _inputs(B=1, H=3, Tq=2, Tk=5, D=4, Dv=3, seed=3)
    alpha = torch.tensor([1.2, 1.5, 1.8], dtype=torch.float64).view(3, 1, 1)
    logits = torch.tensor([-0.7, 0.1, 1.2], dtype=torch.float64)  # learned alphas 1.33, 1.52, 1.77

    def attend(q, k, v, a):
        if kind == "learned":
            return sparse_attention(q, k, v, keep, kind="entmax_bisect", alpha_logit=a)
        return sparse_attention(q, k, v, keep, kind=kind, alpha=a if kind == "entmax_bisect" else 1.5)

    a = (logits if kind == "learned" else alpha).clone().requires_grad_(kind in ("entmax_bisect", "learned"))
    args = (*(t.clone().requires_grad_() for t in (q, k, v)), a)
    if kind == "learned":  # a learned alpha is float32 (bounded_alpha): steps well above its rounding
        assert torch.autograd.gradcheck(attend, args, eps=1e-3, atol=1e-5, rtol=2e-3)
    else:
        assert torch.autograd.gradcheck(attend, args, eps=1e-6, atol=1e-6, rtol=1e-4)


def test_fully_masked_row_attends_uniformly_as_opennmt_eager_path():
    q, k, v, keep = _inputs()
    keep = keep.clone()
    keep[1] = False
    out = sparse_attention(q, k, v, keep, kind="entmax15")
    torch.testing.assert_close(out[1], v[1].mean(-2, keepdim=True).expand_as(out[1]))


def test_bad_arguments_are_named():
    q, k, v, keep = _inputs()
    with pytest.raises(ValueError, match="kind"):
        sparse_attention(q, k, v, keep, kind="softmax")
    with pytest.raises(TypeError, match="keep"):
        sparse_attention(q, k, v, keep.float(), kind="entmax15")
    with pytest.raises(ValueError, match="alpha"):
        sparse_attention(q, k, v, keep, kind="entmax_bisect", alpha=0.5)
    with pytest.raises(ValueError, match="share"):
        sparse_attention(q, k[..., :3], v, keep, kind="entmax15")
    with pytest.raises(ValueError, match="keep .* does not broadcast"):
        sparse_attention(q, k, v, keep[..., :5], kind="entmax15")


def test_bounded_alpha_stays_in_range_and_refuses_bounds_below_one():
    a = torch.tensor([-50.0, 0.0, 50.0], requires_grad=True)
    alpha = oe.ops.bounded_alpha(a, 1.01, 2.0)
    assert alpha.tolist() == pytest.approx([1.01, 1.5, 2.0])
    alpha.sum().backward()
    assert a.grad.tolist() == pytest.approx([0.0, 0.25, 0.0])  # d/da (1 + sigmoid(a)) = 1/4 at 0
    with pytest.raises(ValueError, match="lo"):
        oe.ops.bounded_alpha(a, 0.5, 2.0)


def test_alpha_logits_give_the_attention_of_their_bounded_alphas_with_gradients():
    """Learned per-head alphas passed as their logits a: the same output and gradients as alpha =
    bounded_alpha(a) passed per head."""
    q, k, v, keep = _inputs()
    logits = torch.tensor([-6.0, 0.0, 1.5], dtype=torch.float64)
    a1, a2 = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    out = sparse_attention(q, k, v, keep, kind="entmax_bisect", alpha_logit=a1)
    ref = sparse_attention(q, k, v, keep, kind="entmax_bisect",
                           alpha=oe.ops.bounded_alpha(a2, 1.01, 2.0).double().view(3, 1, 1))
    torch.testing.assert_close(out, ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    torch.testing.assert_close(a1.grad, a2.grad)
    assert a1.grad[0] == 0 and (a1.grad[1:] != 0).all()  # head 0 clamped at alpha = 1.01


def test_bad_alpha_logits_are_named():
    q, k, v, keep = _inputs()
    with pytest.raises(ValueError, match="alpha_logit is for kind='entmax_bisect'"):
        sparse_attention(q, k, v, keep, kind="entmax15", alpha_logit=torch.zeros(3))
    with pytest.raises(ValueError, match="alpha_logit must be a 1-D float tensor of 3"):
        sparse_attention(q, k, v, keep, kind="entmax_bisect", alpha_logit=torch.zeros(4))
    with pytest.raises(TypeError, match="alpha_logit must be a tensor"):
        sparse_attention(q, k, v, keep, kind="entmax_bisect", alpha_logit=0.5)
    with pytest.raises(ValueError, match="alpha_bounds"):
        sparse_attention(q, k, v, keep, kind="entmax_bisect", alpha_logit=torch.zeros(3), alpha_bounds=(0.5, 2.0))


def test_decoding_calls_name_a_bad_argument_as_training_calls_do():
    """Without gradient the fused kernel is tried first; what it refuses still gets the checked
    path's errors, not a failure inside the kernel's own checks."""
    q = torch.randn(2, 2, 1, 4)
    with torch.no_grad():
        with pytest.raises(TypeError, match="q must be a torch.Tensor"):
            sparse_attention([[0.0]], q, q)
        with pytest.raises(TypeError, match="v must be a torch.Tensor"):
            sparse_attention(q, q, None)
        with pytest.raises(ValueError, match="kind must be one of"):
            sparse_attention(q, q, q, kind="softmax")
        with pytest.raises(ValueError, match="alpha must be >= 1"):
            sparse_attention(q, q, q, kind="entmax_bisect", alpha=0.5)
        with pytest.raises(TypeError, match="keep must be a bool mask"):
            sparse_attention(q, q, q, torch.ones(2, 1, 1, 1))
