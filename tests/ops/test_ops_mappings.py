"""Properties of the sparse mappings a user relies on: they are distributions, exact, and differentiable."""
import math

import numpy as np
import pytest
import torch

from reference import entmax_ref

import onmt_entmax as oe

MAPPINGS = {
    "sparsemax": (oe.sparsemax, 2.0),
    "entmax15": (oe.entmax15, 1.5),
    "bisect_1.25": (lambda z, dim=-1: oe.entmax_bisect(z, 1.25, dim=dim), 1.25),
    "bisect_1.5": (lambda z, dim=-1: oe.entmax_bisect(z, 1.5, dim=dim), 1.5),
    "bisect_3": (lambda z, dim=-1: oe.entmax_bisect(z, 3.0, dim=dim), 3.0),
}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


@pytest.mark.parametrize("name", MAPPINGS)
@pytest.mark.parametrize("scale", [0.2, 3.0])
def test_rows_are_distributions_and_match_float64_reference(name, scale):
    fn, alpha = MAPPINGS[name]
    z = torch.randn(6, 50, dtype=torch.float64) * scale
    p = fn(z)
    assert (p >= 0).all()
    assert torch.allclose(p.sum(-1), torch.ones(6, dtype=torch.float64), atol=1e-12)
    np.testing.assert_allclose(p.numpy(), entmax_ref(z.numpy(), alpha), atol=1e-10)


@pytest.mark.parametrize("alpha", [1.1, 1.33, 1.75, 2.5])
def test_bisect_float32_reaches_sum_and_reference_tolerance(alpha):
    z = torch.randn(64, 1000) * 3
    p = oe.entmax_bisect(z, alpha)
    assert (p.sum(-1) - 1).abs().max() <= 1e-6
    np.testing.assert_allclose(p.double().numpy(), entmax_ref(z.double().numpy(), alpha), atol=1e-5)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_exact_mappings_in_float32_match_reference(name):
    fn, alpha = MAPPINGS[name]
    z = torch.randn(32, 4000) * 3
    np.testing.assert_allclose(fn(z).double().numpy(), entmax_ref(z.double().numpy(), alpha), atol=2e-6)


@pytest.mark.parametrize("name", MAPPINGS)
def test_rows_with_few_and_many_candidates_in_one_batch(name):
    """Peaked rows (few entries near the max) and flat rows (all of them) mixed in one call, as in
    an untrained model, take the top-k and the full-sort paths together and stay exact."""
    fn, alpha = MAPPINGS[name]
    z = torch.randn(12, 3000, dtype=torch.float64) * 4
    z[::4] *= 0.02
    z[1, :700] = z[1].max()  # a row with many ties at the max
    np.testing.assert_allclose(fn(z).numpy(), entmax_ref(z.numpy(), alpha), atol=1e-9)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("name", MAPPINGS)
def test_any_dim_and_leading_shape(name, dim):
    fn, _ = MAPPINGS[name]
    z = torch.randn(3, 4, 5, dtype=torch.float64)
    p = fn(z, dim=dim)
    expected = fn(z.movedim(dim, -1)).movedim(-1, dim)
    assert p.shape == z.shape
    assert torch.allclose(p, expected)
    assert torch.allclose(p.sum(dim), torch.ones(()).double())


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0, 3.0])
def test_threshold_reproduces_the_mapping(alpha):
    z = torch.randn(8, 30, dtype=torch.float64) * 2
    tau = oe.entmax_threshold(z, alpha)
    p = ((alpha - 1) * z - tau).clamp(min=0) ** (1 / (alpha - 1))
    assert torch.allclose(p, oe.entmax(z, alpha), atol=1e-9)


def test_support_shrinks_as_alpha_grows():
    z = torch.randn(200, 40, dtype=torch.float64)
    sizes = [(oe.entmax(z, a) > 0).sum(-1) for a in (1.0, 1.25, 1.5, 2.0, 3.0, 6.0)]
    assert sizes[0].eq(40).all()
    for bigger, smaller in zip(sizes, sizes[1:]):
        assert (smaller <= bigger).all()
    assert sizes[-1].float().mean() < sizes[1].float().mean()


def test_sparsemax_is_euclidean_projection_onto_simplex():
    scipy_opt = pytest.importorskip("scipy.optimize")
    z = np.random.RandomState(0).randn(5, 6) * 1.5
    for row in z:
        res = scipy_opt.minimize(lambda p: ((p - row) ** 2).sum(), np.full(6, 1 / 6), method="SLSQP",
                                 bounds=[(0, None)] * 6,
                                 constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1}],
                                 options={"ftol": 1e-14, "maxiter": 500})
        p = oe.sparsemax(torch.tensor(row)).numpy()
        np.testing.assert_allclose(p, res.x, atol=1e-6)


def test_entmax_dispatch_and_alpha_one_is_softmax_exactly():
    z = torch.randn(4, 9)
    soft = torch.softmax(z, -1)
    assert torch.equal(oe.entmax(z, 1.0), soft)
    assert torch.equal(oe.entmax_bisect(z, 1.0), soft)
    assert torch.equal(oe.entmax_bisect(z, torch.ones(4, 1)), soft)
    assert torch.equal(oe.entmax(z, 1.5), oe.entmax15(z))
    assert torch.equal(oe.entmax(z, 2.0), oe.sparsemax(z))
    assert torch.allclose(oe.entmax(z, 1.7), oe.entmax_bisect(z, 1.7))


@pytest.mark.parametrize("name", MAPPINGS)
def test_gradcheck(name):
    fn, _ = MAPPINGS[name]
    z = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fn, (z,))


def test_gradcheck_per_row_alpha():
    z = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor([[1.2], [1.5], [1.8], [2.0], [2.6]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda z, a: oe.entmax_bisect(z, a), (z, alpha))


def test_gradcheck_per_head_alpha_broadcast():
    """Attention-shaped: (batch, heads, queries, keys) with one alpha per head, as learn_alpha uses."""
    z = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor([1.3, 1.6, 1.9], dtype=torch.float64).view(1, 3, 1, 1).requires_grad_()
    assert torch.autograd.gradcheck(lambda z, a: oe.entmax_bisect(z, a), (z, alpha))


def test_backward_is_proposition_1():
    """dz = u*g - (u.g / sum u) u with u = p^{2-alpha} on the support."""
    z = torch.randn(3, 12, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 12, dtype=torch.float64)
    for fn, alpha in [(oe.entmax15, 1.5), (oe.sparsemax, 2.0)]:
        p = fn(z)
        (dz,) = torch.autograd.grad(p, z, g)
        p = p.detach()
        u = torch.where(p > 0, p ** (2 - alpha), torch.zeros_like(p))
        expected = u * g - (u * g).sum(-1, keepdim=True) / u.sum(-1, keepdim=True) * u
        assert torch.allclose(dz, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("name", MAPPINGS)
def test_dtype_matrix(name, dtype):
    fn, _ = MAPPINGS[name]
    z64 = torch.randn(8, 100, dtype=torch.float64) * 3
    z = z64.to(dtype).requires_grad_()
    p = fn(z)
    assert p.dtype == dtype
    assert torch.isfinite(p).all()
    tol = {torch.float16: 2e-3, torch.bfloat16: 1e-2}.get(dtype, 1e-5)
    assert torch.allclose(p.double(), fn(z.detach().double()), atol=tol)
    p.float().pow(2).sum().backward()
    assert z.grad.dtype == dtype and torch.isfinite(z.grad).all()


@pytest.mark.parametrize("name", MAPPINGS)
def test_minus_inf_entries_get_exactly_zero(name):
    fn, _ = MAPPINGS[name]
    z = torch.randn(4, 10, dtype=torch.float64)
    z[:, ::3] = float("-inf")
    p = fn(z)
    assert (p[:, ::3] == 0).all()
    assert torch.allclose(p.sum(-1), torch.ones(4, dtype=torch.float64))
    finite = z[:, [1, 2, 4, 5, 7, 8]]
    assert torch.allclose(p[:, [1, 2, 4, 5, 7, 8]], fn(finite))


@pytest.mark.parametrize("name", list(MAPPINGS) + ["softmax"])
def test_fully_masked_row_gives_zeros_and_zero_gradient(name):
    fn = (lambda z, dim=-1: oe.entmax(z, 1.0, dim=dim)) if name == "softmax" else MAPPINGS[name][0]
    z = torch.randn(3, 6, dtype=torch.float64)
    z[1] = float("-inf")
    z.requires_grad_()
    p = fn(z)
    assert (p[1] == 0).all() and not torch.isnan(p).any()
    p.backward(torch.randn_like(p))
    assert (z.grad[1] == 0).all() and torch.isfinite(z.grad).all()


def test_fully_masked_row_with_learnable_alpha_has_finite_gradients():
    z = torch.randn(3, 6, dtype=torch.float64)
    z[0] = float("-inf")
    z.requires_grad_()
    a = torch.full((3, 1), 1.4, dtype=torch.float64, requires_grad=True)
    oe.entmax_bisect(z, a).pow(2).sum().backward()
    assert torch.isfinite(z.grad).all() and torch.isfinite(a.grad).all() and a.grad[0] == 0


@pytest.mark.parametrize("name", MAPPINGS)
@pytest.mark.parametrize("offset", [-1e18, 1e4, -3e7])
def test_large_common_offset_changes_nothing(name, offset):
    """A Transformer's fully masked row is all -1e18 (finite): it must be uniform, like any row
    shifted by a constant; the solution depends on differences only."""
    fn, _ = MAPPINGS[name]
    for dtype in (torch.float32, torch.float64):
        assert torch.allclose(fn(torch.full((2, 7), offset, dtype=dtype)), torch.full((2, 7), 1 / 7, dtype=dtype))
    z = torch.randn(3, 7, dtype=torch.float64) * 2
    if abs(offset) < 1e8:  # float64 keeps z exactly enough at this offset
        assert torch.allclose(fn(z + offset), fn(z), atol=1e-6)


@pytest.mark.parametrize("name", MAPPINGS)
def test_nan_stays_in_its_row(name):
    fn, _ = MAPPINGS[name]
    z = torch.randn(3, 6)
    z[1, 2] = float("nan")
    p = fn(z)
    assert torch.isnan(p[1]).all()
    assert torch.allclose(p[[0, 2]], fn(z[[0, 2]]))


@pytest.mark.parametrize("alpha", [0.5, 0.999, -1.0, float("nan")])
def test_alpha_below_one_raises_naming_alpha(alpha):
    z = torch.randn(2, 3)
    with pytest.raises(ValueError, match="alpha"):
        oe.entmax_bisect(z, alpha)
    with pytest.raises(ValueError, match="alpha"):
        oe.entmax(z, alpha)
    with pytest.raises(ValueError, match="alpha"):
        oe.entmax_bisect(z, torch.tensor([[alpha], [1.5]]))
    with pytest.raises(ValueError, match="alpha"):
        oe.alpha_relu(z, alpha)


def test_alpha_marked_in_range_is_checked_again_only_once_changed():
    """alpha_in_range: for alphas in range by construction (learned ones are clamped), no check a call."""
    z = torch.randn(2, 3)
    alpha = torch.tensor([[0.5], [1.5]])  # (out of range only to see whether it is checked)
    oe.entmax_bisect(z, oe.alpha_in_range(alpha))
    alpha.mul_(1.0)  # changed in place: checked again
    with pytest.raises(ValueError, match="alpha"):
        oe.entmax_bisect(z, alpha)


@pytest.mark.parametrize("alpha", [1.01, 1.5, 2.0, 4.0, 10.0])
def test_large_alpha_and_huge_logits_stay_finite(alpha):
    z = torch.randn(4, 300) * 1e4
    p = oe.entmax(z, alpha)
    assert torch.isfinite(p).all()
    assert torch.allclose(p.sum(-1), torch.ones(4), atol=1e-5)
    np.testing.assert_allclose(p.double().numpy(), entmax_ref(z.double().numpy(), alpha), atol=1e-5)


@pytest.mark.parametrize("name", MAPPINGS)
def test_ties_share_mass_equally(name):
    fn, _ = MAPPINGS[name]
    z = torch.tensor([[1.0, 1.0, 1.0, -5.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    p = fn(z)
    assert torch.allclose(p[0, :3], torch.full((3,), 1 / 3, dtype=torch.float64))
    assert p[0, 3] == 0
    assert torch.allclose(p[1], torch.full((4,), 0.25, dtype=torch.float64))


def test_alpha_relu_formula_gradient_and_bad_tau():
    z = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    for alpha, tau in [(1.5, 0.0), (1.5, 0.3), (2.0, -0.2), (1.25, 0.1)]:
        p = oe.alpha_relu(z, alpha, tau)
        expected = ((alpha - 1) * z - tau).clamp(min=0) ** (1 / (alpha - 1))
        assert torch.allclose(p, expected)
        assert torch.autograd.gradcheck(lambda z: oe.alpha_relu(z, alpha, tau), (z,))
    g = torch.randn(5, 8, dtype=torch.float64)
    (dz,) = torch.autograd.grad(oe.alpha_relu(z, 1.5, 0.1), z, g)
    assert not torch.allclose(dz, torch.autograd.grad(oe.alpha_relu(z, 1.5, 0.1), z, torch.ones_like(g))[0])
    with pytest.raises(ValueError, match="tau"):
        oe.alpha_relu(z, 1.5, float("nan"))
    with pytest.raises(ValueError, match="alpha"):
        oe.alpha_relu(z, 1.0)
    assert oe.alpha_relu(torch.tensor([float("-inf"), 1.0]), 1.5).tolist()[0] == 0


def test_agrees_with_pypi_entmax():
    entmax = pytest.importorskip("entmax")
    z = torch.randn(16, 77, dtype=torch.float64) * 2
    assert torch.allclose(oe.sparsemax(z), entmax.sparsemax(z))
    assert torch.allclose(oe.entmax15(z), entmax.entmax15(z))
    for alpha in (1.2, 1.7):
        assert torch.allclose(oe.entmax_bisect(z, alpha), entmax.entmax_bisect(z, alpha), atol=1e-8)
    assert math.isclose(float(oe.entmax15(z).sum()), 16.0, rel_tol=1e-12)


@pytest.mark.parametrize("name", MAPPINGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fully_masked_long_row_is_uniform(name, dtype):
    """A Transformer row with every key masked (-1e18) and more than 64 keys: uniform weights, as
    for shorter rows (the candidate search once compared against max - reach, which rounds to max
    at -1e18, and kept 64 candidates of 1/64 each: rows summing to 10.9)."""
    fn, _ = MAPPINGS[name]
    for n in (65, 700):
        p = fn(torch.full((2, n), -1e18, dtype=dtype))
        torch.testing.assert_close(p, torch.full_like(p, 1.0 / n))


@pytest.mark.parametrize("kind, alpha", [("sparsemax", None), ("entmax15", None), ("entmax_bisect", 1.33)])
def test_log_probs_are_the_log_of_the_mapping_with_minus_inf_on_zeros(kind, alpha):
    z = torch.randn(5, 40) * 3
    z[0, :20] = float("-inf")
    z[1] = float("-inf")  # a fully masked row: p = 0 everywhere
    p = {"sparsemax": oe.sparsemax, "entmax15": oe.entmax15,
         "entmax_bisect": lambda x: oe.entmax_bisect(x, alpha)}[kind](z)
    lp = oe.ops.log_probs(z, kind, alpha=alpha if alpha is not None else 1.5)
    assert torch.equal(lp == float("-inf"), p == 0)
    live = p > 0
    torch.testing.assert_close(lp[live], p[live].log())
    z[2, 3] = float("nan")
    assert oe.ops.log_probs(z, kind, alpha=alpha if alpha is not None else 1.5)[2].isnan().all()


def test_log_probs_keeps_the_gradient_of_the_log_and_names_a_bad_kind():
    z = (torch.randn(3, 10) * 0.01).requires_grad_()  # flat rows: every p > 0
    w = torch.randn(3, 10)
    (oe.ops.log_probs(z, "entmax15") * w).sum().backward()
    zz = z.detach().clone().requires_grad_()
    (oe.entmax15(zz).log() * w).sum().backward()
    torch.testing.assert_close(z.grad, zz.grad)
    with pytest.raises(ValueError, match="log_probs kind"):
        oe.ops.log_probs(z, "softmax")


def test_beam_stats_count_the_finite_candidates_and_the_best_one_not_kept():
    s = torch.tensor([[0.0, -1.0, float("-inf"), -3.0, -0.5],
                      [float("-inf")] * 5,
                      [-2.0, float("nan"), -1.0, -4.0, float("-inf")]])
    kept = torch.tensor([[0, 4], [1, 2], [0, 2]])
    n, best = oe.ops.beam_stats(s, kept)
    assert n.tolist() == [4, 0, 3] and n.dtype == torch.int64
    assert best[0] == -1.0 and best[1] == float("-inf") and best[2].isnan()  # a NaN left out shows
    kept[2, 0] = 1  # ... unless kept
    assert oe.ops.beam_stats(s, kept)[1][2] == -2.0
    with pytest.raises(ValueError, match="beam_stats"):
        oe.ops.beam_stats(s[0], kept)


def test_beam_topk_is_torch_topk_plus_the_statistics_of_the_positions_it_keeps():
    s = torch.tensor([[0.0, -1.0, float("-inf"), -3.0, -0.5],
                      [float("-inf")] * 5,
                      [-2.0, -1.5, -1.0, -4.0, float("-inf")]])
    values, kept, stats = oe.ops.beam_topk(s, 2)
    ref_values, ref_kept = torch.topk(s, 2, dim=-1)
    assert torch.equal(values, ref_values) and torch.equal(kept[[0, 2]], ref_kept[[0, 2]])
    assert stats.dtype == torch.float64 and stats[:, 0].tolist() == [4, 0, 4]
    assert stats[:, 1].tolist() == [-1.0, float("-inf"), -2.0]  # the third best: the best not kept
    for k in (0, 6, 2.0):
        with pytest.raises(ValueError, match="beam_topk"):
            oe.ops.beam_topk(s, k)


# --- the ends of the domain: alpha -> 1, empty and 0-d tensors, n_iter ---------------------------------
def _one_sided_or_central(f, a0, h=1e-5):
    """df/dalpha by finite differences in float64: central, or one-sided of second order at alpha = 1
    (the mapping is defined for alpha >= 1 only)."""
    if a0 == 1.0:
        return (-3 * f(a0) + 4 * f(a0 + h) - f(a0 + 2 * h)) / (2 * h)
    return (f(a0 + h) - f(a0 - h)) / (2 * h)


@pytest.mark.parametrize("a0", [1.0, 1 + 1e-6, 1.001, 1.01, 1.3, 2.5])
def test_alpha_gradient_matches_finite_differences_down_to_alpha_one(a0):
    z = torch.randn(3, 9, dtype=torch.float64) * 2
    z[0, 4:] = float("-inf")
    g = torch.randn(3, 9, dtype=torch.float64)
    a = torch.tensor(a0, dtype=torch.float64, requires_grad=True)
    (oe.entmax_bisect(z, a) * g).sum().backward()
    h = 1e-5 if a0 == 1.0 or a0 - 1 > 1e-3 else (a0 - 1) / 2 if a0 - 1 > 1e-5 else 1e-7

    def f(x):
        return float((oe.entmax_bisect(z, torch.tensor(x, dtype=torch.float64)) * g).sum())

    assert float(a.grad) == pytest.approx(_one_sided_or_central(f, a0, h), rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("a0", [1.0, 1 + 1e-6, 1.001, 1.01, 1.5])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_loss_alpha_gradient_matches_finite_differences_down_to_alpha_one(a0, smoothing):
    z = torch.randn(4, 7, dtype=torch.float64) * 2
    y = torch.tensor([0, 3, 5, 6])
    a = torch.tensor(a0, dtype=torch.float64, requires_grad=True)
    oe.entmax_bisect_loss(z, y, alpha=a, reduction="sum", label_smoothing=smoothing).backward()
    h = 1e-5 if a0 == 1.0 or a0 - 1 > 1e-3 else (a0 - 1) / 2 if a0 - 1 > 1e-5 else 1e-7

    def f(x):
        return float(oe.entmax_bisect_loss(z, y, alpha=torch.tensor(x, dtype=torch.float64), reduction="sum",
                                           label_smoothing=smoothing))

    assert float(a.grad) == pytest.approx(_one_sided_or_central(f, a0, h), rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("eps", [1e-7, 1e-6, 1e-5, 1e-4, 1e-3])
def test_float32_near_alpha_one_is_as_exact_as_float32_allows(eps):
    """The error of a float32 result stays at float32's resolution, and below softmax's distance
    from the true alpha-entmax (which is of order alpha - 1)."""
    z = torch.randn(8, 1000) * 3
    truth = torch.from_numpy(entmax_ref(z.double().numpy(), 1 + eps))
    err = (oe.entmax_bisect(z, 1 + eps).double() - truth).abs().max()
    assert err <= 3e-7
    assert err < (torch.softmax(z.double(), -1) - truth).abs().max()


MAPPING_FNS = {**{n: fn for n, (fn, _) in MAPPINGS.items()},
               "entmax(1.3)": lambda z, dim=-1: oe.entmax(z, 1.3, dim=dim),
               "softmax_safe": lambda z, dim=-1: oe.softmax_safe(z, dim=dim)}


@pytest.mark.parametrize("name", MAPPING_FNS)
@pytest.mark.parametrize("shape,dim", [((0,), -1), ((2, 0), -1), ((0, 5), -1), ((3, 0, 4), 1), ((), -1), ((), 0)])
def test_empty_and_zero_dimensional_tensors_behave_as_torch_softmax(name, shape, dim):
    z = torch.randn(shape, requires_grad=True)
    p = MAPPING_FNS[name](z, dim=dim)
    assert p.shape == torch.softmax(z, dim=dim).shape and p.dtype == z.dtype
    if not shape:
        assert float(p.detach()) == 1.0  # one entry holds all the mass
    p.sum().backward()
    assert z.grad.shape == z.shape


@pytest.mark.parametrize("name", MAPPING_FNS)
def test_a_zero_dimensional_tensor_has_no_dim_one(name):
    with pytest.raises(IndexError, match="Dimension out of range"):
        MAPPING_FNS[name](torch.tensor(1.0), dim=1)


def test_n_iter_is_honoured_and_a_huge_one_refused():
    z = torch.randn(4, 30, dtype=torch.float64)
    converged = oe.entmax_bisect(z, 1.3, n_iter=60)
    assert torch.allclose(converged, torch.from_numpy(entmax_ref(z.numpy(), 1.3)), atol=1e-12)
    assert (oe.entmax_bisect(z, 1.3, n_iter=3) - converged).abs().max() > 1e-4  # 3 halvings: visibly unconverged
    assert torch.equal(oe.entmax_bisect(z, 1.3, n_iter=3), oe.entmax_bisect(z, 1.3, n_iter=3))
    assert not torch.equal(oe.entmax_bisect(z, 1.3, n_iter=3), oe.entmax_bisect(z, 1.3, n_iter=4))
    for bad in (0, 201, 10**9, 2.5):
        with pytest.raises(ValueError, match=r"n_iter must be an integer in \[1, 200\]"):
            oe.entmax_bisect(z, 1.3, n_iter=bad)
    with pytest.raises(ValueError, match="n_iter must be an integer"):
        oe.entmax_bisect_loss(z, torch.zeros(4, dtype=torch.long), alpha=1.3, n_iter=10**9)


def test_kernels_leave_a_float_alpha_near_one_to_the_reference(monkeypatch):
    """The kernels' float32 threshold cannot resolve p near alpha = 1 (error ~6e-9 / (alpha - 1)); a
    float alpha below 1.01 (learned ones never are) runs the reference, which can, on CUDA too."""
    K = pytest.importorskip("onmt_entmax.ops.triton")
    if not K.HAVE_TRITON:
        pytest.skip("no Triton")
    from onmt_entmax.ops.triton import attention

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # `available` takes CPU tensors then (nothing is launched here)
    z = torch.randn(4, 50)
    bisect, loss = K.KERNELS["entmax_bisect"], K.KERNELS["fy_loss"]
    assert bisect.supports(z, -1, alpha=1.01) and not bisect.supports(z, -1, alpha=1.001)
    assert K.log_probs(z, "entmax_bisect", 1.001) is None
    assert loss.supports(z, -1, kind="entmax_bisect", alpha=1.01)
    assert not loss.supports(z, -1, kind="entmax_bisect", alpha=1.0001)
    assert loss.supports(z, -1, kind="alpha_relu", alpha=1.001)  # elementwise: no threshold to solve
    q = torch.randn(1, 2, 3, 8)
    assert attention._geometry(q, q, q, None, "entmax_bisect", 1.01) is not None
    assert attention._geometry(q, q, q, None, "entmax_bisect", 1.001) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("alpha", [50.0, 1e6, 1e10])
def test_a_huge_alpha_tends_to_argmax_and_never_loses_the_row(alpha, dtype):
    """As alpha grows, alpha-entmax keeps only the largest entry (ties share it): rows still sum to 1."""
    z = torch.tensor([[1.0, 0.5, -1.0], [2.0, 2.0, 0.0], [0.3, 0.2, 0.1]], dtype=dtype)
    p = oe.entmax_bisect(z, alpha)
    assert torch.allclose(p.sum(-1), torch.ones(3, dtype=dtype), atol=1e-6)
    assert p[0].tolist() == [1.0, 0.0, 0.0] and p[1, 2] == 0 and p[1, 0] == pytest.approx(0.5, abs=1e-6)
    assert p[2, 0] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("alpha", [float("inf"), float("nan"), torch.tensor([1.5, float("inf")]).view(2, 1)])
def test_a_non_finite_alpha_is_refused(alpha):
    with pytest.raises(ValueError, match="alpha must be >= 1 and finite"):
        oe.entmax_bisect(torch.randn(2, 4), alpha)
    if not torch.is_tensor(alpha):
        with pytest.raises(ValueError, match="alpha must be > 1 and finite"):
            oe.alpha_relu(torch.randn(2, 4), alpha)


ALPHA_USERS = {  # every public entry taking alpha (and tau), called on logits z
    "entmax_bisect": lambda z, a, tau: oe.entmax_bisect(z, a),
    "entmax": lambda z, a, tau: oe.entmax(z, a),
    "entmax_threshold": lambda z, a, tau: oe.entmax_threshold(z, a),
    "log_probs": lambda z, a, tau: oe.log_probs(z, "entmax_bisect", a),
    "entmax_bisect_loss": lambda z, a, tau: oe.entmax_bisect_loss(z, torch.zeros(len(z), dtype=torch.long), alpha=a),
    "alpha_relu": lambda z, a, tau: oe.alpha_relu(z, a, tau),
    "alpha_relu_log": lambda z, a, tau: oe.alpha_relu_log(z, a, tau),
    "alpha_relu_loss": lambda z, a, tau: oe.alpha_relu_loss(z, torch.zeros(len(z), dtype=torch.long), a, tau),
    "sparse_attention": lambda z, a, tau: oe.sparse_attention(z[None], z[None], z[None], kind="entmax_bisect", alpha=a),
}


@pytest.mark.parametrize("name", ALPHA_USERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_an_alpha_or_tau_that_is_inf_in_the_compute_dtype_is_refused_instead_of_giving_nan(name, dtype):
    """1e39 is a finite Python float but inf in float32 (where half precision is computed too): refused
    naming alpha / tau, where it used to give NaN or zeros without a word; in float64 it is a number."""
    fn = ALPHA_USERS[name]
    z = torch.randn(3, 5).to(dtype)
    with pytest.raises(ValueError, match="alpha"):
        fn(z, 1e39, 0.0)
    if name.startswith("alpha_relu"):
        with pytest.raises(ValueError, match="tau"):
            fn(z, 1.5, -1e39)
        assert torch.isfinite(fn(z.double(), 1.5, -1e39)).all()
    else:
        out = fn(z.double(), 1e39, 0.0)
        assert out.dtype == torch.float64 and not torch.isnan(out).any()


def test_an_alpha_tensor_is_checked_in_the_dtype_of_the_logits_it_is_used_with():
    """A float64 alpha of 1e300 is a number for float64 logits, inf once cast for float32 ones: refused
    there, even right after the same tensor passed for float64 (the checked-once memory knows the dtype)."""
    alpha = torch.tensor([[1e300], [1.5]], dtype=torch.float64)
    z = torch.randn(2, 6, dtype=torch.float64)
    p = oe.entmax_bisect(z, alpha)
    assert torch.allclose(p.sum(-1), torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="alpha"):
        oe.entmax_bisect(z.float(), alpha)
    with pytest.raises(ValueError, match="alpha"):
        oe.entmax_bisect(z.float(), torch.tensor(1e300, dtype=torch.float64))


PUBLIC = {  # every public mapping / loss entry, called with `x` where a tensor of logits belongs
    "sparsemax": lambda x: oe.sparsemax(x),
    "entmax15": lambda x: oe.entmax15(x),
    "entmax_bisect": lambda x: oe.entmax_bisect(x, 1.3),
    "entmax": lambda x: oe.entmax(x, 1.3),
    "entmax_threshold": lambda x: oe.entmax_threshold(x),
    "alpha_relu": lambda x: oe.alpha_relu(x),
    "log_probs": lambda x: oe.log_probs(x, "entmax15"),
    "sparse_attention": lambda x: oe.sparse_attention(x, x, x),
    "sparsemax_loss": lambda x: oe.sparsemax_loss(x, torch.tensor([0])),
    "entmax15_loss": lambda x: oe.entmax15_loss(x, torch.tensor([0])),
    "entmax_bisect_loss": lambda x: oe.entmax_bisect_loss(x, torch.tensor([0])),
    "alpha_relu_loss": lambda x: oe.alpha_relu_loss(x, torch.tensor([0])),
    "Entmax15Loss": lambda x: oe.Entmax15Loss()(x, torch.tensor([0])),
    "bounded_alpha": lambda x: oe.bounded_alpha(x),
    "beam_stats": lambda x: oe.beam_stats(x, torch.tensor([[0]])),
    "beam_topk": lambda x: oe.beam_topk(x, 1),
}


@pytest.mark.parametrize("name", PUBLIC)
def test_a_list_where_a_tensor_belongs_is_a_type_error_saying_a_tensor_is_expected(name):
    with pytest.raises(TypeError, match="Tensor"):
        PUBLIC[name]([[1.0, 2.0]])


@pytest.mark.parametrize("loss", [oe.sparsemax_loss, oe.entmax15_loss, oe.entmax_bisect_loss, oe.alpha_relu_loss])
def test_a_list_of_targets_is_a_type_error_saying_a_tensor_is_expected(loss):
    with pytest.raises(TypeError, match="target.*Tensor"):
        loss(torch.randn(1, 3), [0])
