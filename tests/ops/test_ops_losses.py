"""Fenchel-Young losses: the value a user logs, the gradient the optimizer sees, and the CE calling convention."""
import numpy as np
import pytest
import torch

from reference import entmax_ref, fy_loss_ref

import onmt_entmax as oe

LOSSES = {
    "sparsemax": (lambda **kw: oe.SparsemaxLoss(**kw), 2.0),
    "entmax15": (lambda **kw: oe.Entmax15Loss(**kw), 1.5),
    "bisect_1.33": (lambda **kw: oe.EntmaxBisectLoss(alpha=1.33, **kw), 1.33),
    "bisect_1": (lambda **kw: oe.EntmaxBisectLoss(alpha=1.0, **kw), 1.0),
}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(7)


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_value_matches_independent_fenchel_young_reference(name, eps):
    make, alpha = LOSSES[name]
    z = torch.randn(5, 11, dtype=torch.float64) * 2
    y = torch.randint(0, 11, (5,))
    got = make(reduction="none", label_smoothing=eps)(z, y)
    for i in range(5):
        q = np.full(11, eps / 11)
        q[y[i]] += 1 - eps
        assert got[i].item() == pytest.approx(fy_loss_ref(z[i].numpy(), int(y[i]), alpha, q), abs=1e-8)


@pytest.mark.parametrize("name", LOSSES)
def test_gradient_is_exactly_p_minus_target(name):
    make, alpha = LOSSES[name]
    z = torch.randn(6, 9, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 9, (6,))
    make(reduction="sum")(z, y).backward()
    p = torch.tensor(entmax_ref(z.detach().numpy(), alpha))
    expected = p - torch.nn.functional.one_hot(y, 9).double()
    assert torch.allclose(z.grad, expected, atol=1e-10)


@pytest.mark.parametrize("name", LOSSES)
def test_label_smoothed_gradient_is_p_minus_smoothed_target(name):
    make, alpha = LOSSES[name]
    z = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 6, (4,))
    make(reduction="sum", label_smoothing=0.2)(z, y).backward()
    q = 0.8 * torch.nn.functional.one_hot(y, 6).double() + 0.2 / 6
    assert torch.allclose(z.grad, torch.tensor(entmax_ref(z.detach().numpy(), alpha)) - q, atol=1e-10)


@pytest.mark.parametrize("name", LOSSES)
def test_loss_is_nonnegative_and_zero_past_the_margin(name):
    make, alpha = LOSSES[name]
    z = torch.randn(50, 8, dtype=torch.float64) * 3
    y = torch.randint(0, 8, (50,))
    loss = make(reduction="none")(z, y)
    assert (loss >= -1e-12).all()
    if alpha > 1:  # margin 1/(alpha-1): the target ahead of every other class by more gives exactly 0
        z2 = torch.zeros(1, 8, dtype=torch.float64)
        z2[0, 3] = 1 / (alpha - 1) + 1e-3
        assert make()(z2, torch.tensor([3])).item() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("name", LOSSES)
def test_gradcheck(name):
    make, _ = LOSSES[name]
    z = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 3, 6, 2])
    for eps in (0.0, 0.1):
        assert torch.autograd.gradcheck(lambda z: make(label_smoothing=eps)(z, y), (z,))


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_learnable_alpha_gets_a_gradient(eps):
    z = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 3, 6, 2])
    per_row = torch.tensor([[1.2], [1.5], [1.7], [2.2]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda z, a: oe.entmax_bisect_loss(z, y, a, label_smoothing=eps), (z, per_row))
    shared = torch.tensor(1.4, dtype=torch.float64, requires_grad=True)
    loss_fn = oe.EntmaxBisectLoss(alpha=shared, label_smoothing=eps)
    assert torch.autograd.gradcheck(lambda a: oe.EntmaxBisectLoss(alpha=a, label_smoothing=eps)(z, y), (shared,))
    loss_fn(z, y).backward()
    assert shared.grad is not None and torch.isfinite(shared.grad)


def test_alpha_relu_loss_value_is_consistent_with_its_gradient():
    """Integrating the gradient alpha_relu(z) - e_y along a path reproduces the change in the loss."""
    alpha, tau = 1.5, 0.2
    loss_fn = oe.AlphaReLULoss(alpha=alpha, tau=tau, reduction="sum")
    y = torch.tensor([2])
    z0, z1 = torch.randn(1, 6, dtype=torch.float64), torch.randn(1, 6, dtype=torch.float64) * 2
    ts = torch.linspace(0, 1, 2001, dtype=torch.float64)
    grads = []
    for t in ts:
        z = (z0 + t * (z1 - z0)).requires_grad_()
        loss_fn(z, y).backward()
        assert torch.allclose(z.grad, oe.alpha_relu(z.detach(), alpha, tau) - torch.nn.functional.one_hot(y, 6))
        grads.append((z.grad * (z1 - z0)).sum())
    integral = torch.trapezoid(torch.stack(grads), ts)
    assert integral.item() == pytest.approx((loss_fn(z1, y) - loss_fn(z0, y)).item(), abs=1e-6)


def test_alpha_relu_loss_is_zero_exactly_at_the_target():
    alpha, tau = 1.5, 0.3
    z = torch.full((1, 5), -10.0, dtype=torch.float64)
    z[0, 1] = (1 + tau) / (alpha - 1)  # alpha_relu(z) = e_1
    assert oe.alpha_relu(z, alpha, tau)[0].tolist() == pytest.approx([0, 1, 0, 0, 0])
    assert oe.alpha_relu_loss(z, torch.tensor([1]), alpha, tau).item() == pytest.approx(0.0, abs=1e-12)
    z2 = torch.randn(30, 5, dtype=torch.float64) * 3
    assert (oe.alpha_relu_loss(z2, torch.randint(0, 5, (30,)), alpha, tau, reduction="none") >= 0).all()


@pytest.mark.parametrize("name", LOSSES)
def test_ignore_index_contributes_zero_and_is_left_out_of_the_mean(name):
    make, _ = LOSSES[name]
    z = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([1, -100, 3, 4, -100, 0])
    per_row = make(reduction="none")(z, y)
    assert (per_row[[1, 4]] == 0).all()
    mean = make()(z, y)
    assert mean.item() == pytest.approx(per_row[[0, 2, 3, 5]].mean().item())
    mean.backward()
    assert (z.grad[[1, 4]] == 0).all()
    pad = make(ignore_index=0, reduction="none")(z, torch.tensor([0, 1, 2, 0, 3, 4]))
    assert (pad[[0, 3]] == 0).all()
    assert torch.allclose(pad[[1, 2, 4, 5]], make(reduction="none")(z[[1, 2, 4, 5]], torch.tensor([1, 2, 3, 4])))
    assert make()(z, torch.full((6,), -100)).item() == 0.0


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("bad", [5, -1, 99])
def test_target_out_of_range_raises(name, bad):
    make, _ = LOSSES[name]
    with pytest.raises(ValueError, match="target"):
        make()(torch.randn(2, 5), torch.tensor([0, bad]))


@pytest.mark.parametrize("name", LOSSES)
def test_minus_inf_logits_of_other_classes_are_fine(name):
    make, _ = LOSSES[name]
    z = torch.randn(4, 6, dtype=torch.float64)
    z[:, 4:] = float("-inf")
    z.requires_grad_()
    y = torch.tensor([0, 1, 2, 3])
    for eps in (0.0, 0.1):
        loss = make(label_smoothing=eps)(z, y)
        assert torch.isfinite(loss)
        (g,) = torch.autograd.grad(loss, z)
        assert torch.isfinite(g).all() and (g[:, 4:] == 0).all()
        assert loss.item() == pytest.approx(make(label_smoothing=eps)(z[:, :4].detach(), y).item())


@pytest.mark.parametrize("name", LOSSES)
def test_spatial_shapes_follow_cross_entropy_convention(name):
    make, _ = LOSSES[name]
    z = torch.randn(2, 5, 3, 4, dtype=torch.float64)
    y = torch.randint(0, 5, (2, 3, 4))
    y[0, 1, 2] = -100
    none = make(reduction="none")(z, y)
    assert none.shape == (2, 3, 4)
    flat = make(reduction="none")(z.movedim(1, -1).reshape(-1, 5), y.reshape(-1))
    assert torch.allclose(none.reshape(-1), flat)
    assert make()(z, y).item() == pytest.approx(flat.sum().item() / 23)
    assert make()(z[0, :, 0, 0], y[0, 0, 0]).item() == pytest.approx(flat[0].item())
    with pytest.raises(ValueError, match="target shape"):
        make()(z, y[:, :2])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("name", list(LOSSES) + ["alpha_relu"])
def test_half_precision_losses_are_finite_and_close(name, dtype):
    make = (lambda **kw: oe.AlphaReLULoss(1.5, 0.1, **kw)) if name == "alpha_relu" else LOSSES[name][0]
    z64 = torch.randn(8, 300, dtype=torch.float64) * 3
    y = torch.randint(0, 300, (8,))
    z = z64.to(dtype).requires_grad_()
    loss = make()(z, y)
    assert loss.dtype == dtype and torch.isfinite(loss)
    ref = make()(z.detach().double(), y)
    assert loss.double().item() == pytest.approx(ref.item(), rel=2e-2)
    loss.backward()
    assert z.grad.dtype == dtype and torch.isfinite(z.grad).all()


def test_bad_arguments_raise_clear_errors():
    z, y = torch.randn(2, 4), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="reduction"):
        oe.Entmax15Loss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        oe.entmax15_loss(z, y, label_smoothing=1.5)
    with pytest.raises(ValueError, match="alpha"):
        oe.EntmaxBisectLoss(alpha=0.9)
    with pytest.raises(ValueError, match="tau"):
        oe.AlphaReLULoss(tau=float("inf"))
    with pytest.raises(TypeError, match="target"):
        oe.entmax15_loss(z, y.float())


def test_agrees_with_pypi_entmax_losses():
    entmax = pytest.importorskip("entmax")
    z = torch.randn(12, 40, dtype=torch.float64) * 2
    y = torch.randint(0, 40, (12,))
    assert torch.allclose(oe.entmax15_loss(z, y, reduction="none"), entmax.entmax15_loss(z, y))
    assert torch.allclose(oe.sparsemax_loss(z, y, reduction="none"), entmax.sparsemax_loss(z, y))
    assert torch.allclose(oe.entmax_bisect_loss(z, y, 1.3, reduction="none"),
                          entmax.entmax_bisect_loss(z, y, 1.3), atol=1e-7)


@pytest.mark.parametrize("kind,mapping", [
    ("sparsemax", lambda z: oe.sparsemax(z, -1)),
    ("entmax15", lambda z: oe.entmax15(z, -1)),
    ("entmax_bisect", lambda z: oe.entmax_bisect(z, 1.33, -1)),
    ("alpha_relu", lambda z: oe.ops.alpha_relu(z, alpha=1.5, tau=0.2)),
])
def test_loss_gives_the_support_size_of_each_row_it_solved(kind, mapping):
    """return_support: the number of nonzero probabilities per row, as counting pi(z) > 0, with 0 on
    ignore_index rows, and the loss unchanged (what the training reports count)."""
    z = torch.randn(6, 13, dtype=torch.float64) * 3
    y = torch.tensor([0, 4, -100, 12, 3, 3])
    kw = {"alpha": 1.33} if kind == "entmax_bisect" else {"alpha": 1.5, "tau": 0.2} if kind == "alpha_relu" else {}
    loss, support = oe.ops.fy_loss(z, y, kind, reduction="sum", return_support=True, **kw)
    assert torch.equal(loss, oe.ops.fy_loss(z, y, kind, reduction="sum", **kw))
    expected = (mapping(z) > 0).sum(-1).float() * (y != -100)
    assert support.dtype == torch.float32 and torch.equal(support, expected)
    assert support[2] == 0 and (support[[0, 1, 3]] >= 1).all()
