"""The registry: one class per transformation, and the three things it gives agree with each other."""
import math

import pytest
import torch

from onmt_entmax import registry
from onmt_entmax.registry import get_transformation, help_text, transformation_names

PARAMS = {"entmax_bisect": dict(alpha=1.3), "alpha_relu": dict(alpha=1.5, tau=0.1)}


def make(name):
    return get_transformation(name, **PARAMS.get(name, {}))


def test_every_issue_function_is_registered_and_attention_excludes_alpha_relu():
    assert set(transformation_names()) >= {"softmax", "sparsemax", "entmax15", "entmax_bisect", "alpha_relu"}
    assert "alpha_relu" not in transformation_names(for_attention=True)
    for name in transformation_names():
        assert name in help_text()


@pytest.mark.parametrize("name", ["softmax", "sparsemax", "entmax15", "entmax_bisect", "alpha_relu"])
def test_log_probs_are_log_of_mapping_with_minus_inf_exactly_at_zeros(name):
    t = make(name)
    z = torch.randn(6, 11, dtype=torch.float64) * 3
    p = t.mapping(z)
    lp = t.log_probs(z)
    zero = p == 0
    assert torch.equal(torch.isneginf(lp), zero)
    assert torch.allclose(lp[~zero].exp(), p[~zero])
    if name != "softmax":
        assert zero.any(), "a sparse mapping of spread-out scores should have zeros"


@pytest.mark.parametrize("name", ["softmax", "sparsemax", "entmax15", "entmax_bisect", "alpha_relu"])
def test_loss_gradient_is_mapping_minus_one_hot_and_pads_are_ignored(name):
    t = make(name)
    z = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 3, -100, 6, 2])
    t.loss(z, y, ignore_index=-100, reduction="sum").backward()
    expected = t.mapping(z.detach())
    expected[torch.arange(5), y.clamp(min=0)] -= 1
    expected[2] = 0
    assert torch.allclose(z.grad, expected, atol=1e-6)


def test_bad_hyperparameters_are_refused_with_the_option_name():
    with pytest.raises(ValueError, match="generator_function.*alpha"):
        get_transformation("entmax_bisect", alpha=0.5, option="generator_function")
    with pytest.raises(ValueError, match="unknown function 'entmax16'"):
        get_transformation("entmax16", option="attention_function")
    with pytest.raises(ValueError, match="alpha_relu"):
        get_transformation("alpha_relu", alpha=1.0)
    with pytest.raises(RuntimeError, match="tau is not set"):
        get_transformation("alpha_relu", alpha=1.5).mapping(torch.zeros(2, 3))


def test_hyperparameters_a_function_does_not_use_are_ignored():
    assert get_transformation("entmax15", alpha=1.2).spec() == ("entmax15", None, None, None)
    assert get_transformation("entmax_bisect", alpha=1.2, n_iter=30).spec() == ("entmax_bisect", 1.2, None, 30)


def test_bisect_iter_reaches_the_mapping_the_log_probs_and_the_loss():
    """A model trained with bisect_iter runs that many bisection steps in every use of the mapping."""
    import onmt_entmax.ops as ops

    z = torch.randn(4, 30, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 3])
    few, default = get_transformation("entmax_bisect", alpha=1.3, n_iter=3), get_transformation("entmax_bisect",
                                                                                                  alpha=1.3)
    assert torch.equal(few.mapping(z), ops.entmax_bisect(z, 1.3, n_iter=3))
    assert (few.mapping(z) - default.mapping(z)).abs().max() > 1e-4  # 3 halvings are visibly unconverged
    assert torch.equal(few.log_probs(z), torch.log(ops.entmax_bisect(z, 1.3, n_iter=3)))
    assert torch.equal(few.loss(z, y), ops.entmax_bisect_loss(z, y, alpha=1.3, n_iter=3, reduction="sum"))
    assert not torch.equal(few.loss(z, y), default.loss(z, y))
    with pytest.raises(ValueError, match=r"bisect_iter must be an integer in \[1, 200\]"):
        get_transformation("entmax_bisect", n_iter=10**6)


def test_a_new_registered_class_becomes_a_choice():
    @registry.register_transformation
    class Entmax13(registry.EntmaxBisect):
        name = "entmax13_test"
        summary = "1.3-entmax (test)"

        def __init__(self, alpha=None, tau=None, n_iter=None):
            super().__init__(alpha=1.3, n_iter=n_iter)

    try:
        assert "entmax13_test" in transformation_names(for_attention=True)
        p = get_transformation("entmax13_test").mapping(torch.tensor([[2.0, 1.0, -3.0]]))
        assert math.isclose(float(p.sum()), 1.0, rel_tol=1e-5) and p[0, 2] == 0
    finally:
        registry._REGISTRY.pop("entmax13_test")


@pytest.mark.parametrize("name,params,option", [
    ("entmax_bisect", dict(alpha=1e39), "alpha"),  # a finite float, inf in float32 (the models' dtype)
    ("entmax_bisect", dict(alpha=True), "alpha"),
    ("entmax_bisect", dict(n_iter=True), "bisect_iter"),
    ("alpha_relu", dict(alpha=1.5, tau=-1e39), "tau"),
    ("alpha_relu", dict(alpha=1.0, tau=0.1), "alpha"),
])
def test_hyper_parameters_the_math_cannot_use_are_refused_naming_them(name, params, option):
    with pytest.raises(ValueError, match=option):
        get_transformation(name, **params)
