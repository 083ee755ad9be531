"""training.adam_fused in Eole: optim adam through torch's fused Adam, checked with the config and held
by the run's config when a saved optimizer state (train_from) says otherwise."""
import pytest
import torch
from eole.utils.optimizers import Optimizer

from onmt_entmax.eole.training import adam_fused
from onmt_entmax.errors import ConfigError


@pytest.fixture
def config(train_config):
    """The RNN example on the bundled sample (conftest's ``train_config``)."""
    return train_config


def _fused(optim) -> list:
    return [g.get("fused") for g in optim._optimizer.param_groups]


def test_adam_is_fused_when_asked_and_updates_as_eoles_own(config):
    torch.manual_seed(0)
    models = [torch.nn.Linear(4, 3) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    stock = Optimizer.from_config(models[0], config(optim="adam", learning_rate=1e-2))
    fused = Optimizer.from_config(models[1], config(optim="adam", learning_rate=1e-2, adam_fused=True))
    assert _fused(fused) == [True] and _fused(stock) != [True]
    x = torch.randn(8, 4)
    for _ in range(3):
        for model, optim in zip(models, (stock, fused)):
            optim.zero_grad()
            optim.backward(model(x).pow(2).sum())
            optim.step()
    for a, b in zip(*(m.parameters() for m in models)):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-8)
        assert not torch.equal(a, torch.zeros_like(a))


def test_the_runs_config_decides_over_a_resumed_optimizer_state(config):
    model = torch.nn.Linear(2, 2)
    stock = Optimizer.from_config(model, config(optim="adam"))
    stock.backward(model(torch.ones(1, 2)).sum())
    stock.step()
    saved = {"optim": stock.state_dict(), "config": config(optim="adam")}
    resumed = Optimizer.from_config(model, config(optim="adam", adam_fused=True, train_from="x"), saved)
    assert _fused(resumed) == [True]
    assert {float(s["step"]) for s in resumed._optimizer.state.values()} == {1.0}
    back = Optimizer.from_config(model, config(optim="adam", train_from="x"),
                                 {"optim": resumed.state_dict(), "config": config(optim="adam", adam_fused=True)})
    assert _fused(back) == [None]
    assert all(s["step"].device.type == "cpu" for s in back._optimizer.state.values())


def test_adam_fused_without_adam_is_refused_in_one_line(config):
    adam_fused.check(config(optim="adam", adam_fused=True))
    with pytest.raises(ConfigError, match="training.adam_fused is an implementation of Adam: it needs "
                                          "training.optim adam, not sgd"):
        adam_fused.check(config(optim="sgd", adam_fused=True))

