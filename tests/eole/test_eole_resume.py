"""train_from in Eole: what a resumed run's optimizer gets from the checkpoint's optimizer.pt."""
import pytest
import torch
from eole.utils.optimizers import Optimizer


@pytest.fixture
def config(train_config):
    """The RNN example on the bundled sample (conftest's ``train_config``)."""
    return train_config


def test_train_from_with_reset_optim_keep_states_loads_the_adam_state_and_starts_the_counters_afresh(config):
    """Eole 0.6.4 alone: KeyError 'training_step' (its keep_states passes the torch state only)."""
    model = torch.nn.Linear(2, 2)
    trained = Optimizer.from_config(model, config(optim="adam"))
    for _ in range(3):
        trained.backward(model(torch.ones(1, 2)).sum())
        trained.step()
    saved = {"optim": trained.state_dict(), "config": config(optim="adam")}
    resumed = Optimizer.from_config(model, config(optim="adam", adam_fused=True, train_from="x",
                                                  reset_optim="keep_states", learning_rate=0.5), saved)
    assert resumed.training_step == 1 and resumed.learning_rate() == pytest.approx(0.5)
    state = resumed._optimizer.state[model.weight]
    torch.testing.assert_close(state["exp_avg"], trained._optimizer.state[model.weight]["exp_avg"])
    assert float(state["step"]) == 3.0 and [g.get("fused") for g in resumed._optimizer.param_groups] == [True]
