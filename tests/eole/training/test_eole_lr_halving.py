"""training.valid_lr_halving in Eole: Peters et al.'s schedule (halve the learning rate when the
validation loss rises), checked with the config, resumed from optimizer.pt, run by `eole train`."""
import types

import pytest
import torch
import yaml
from eole.utils.optimizers import Optimizer
from eole.utils.statistics import Statistics

from eole_testkit import run_eole, sample_vocabs, small_config

from onmt_entmax.eole.training import lr_halving
from onmt_entmax.errors import ConfigError


@pytest.fixture
def config(train_config):
    """The RNN example on the bundled sample (conftest's ``train_config``)."""
    return train_config


def test_the_options_are_checked_training_fields_refused_in_one_line_beside_another_schedule(config):
    assert config(valid_lr_halving=True, valid_lr_halving_every=10).training.valid_lr_halving_every == 10
    with pytest.raises(Exception, match="greater than or equal to 1"):
        config(valid_lr_halving=True, valid_lr_halving_every=0)
    for not_a_count in (True, 2.5):  # (a YAML boolean would read as every validation)
        with pytest.raises(Exception, match="valid integer"):
            config(valid_lr_halving=True, valid_lr_halving_every=not_a_count)
    lr_halving.check(config(valid_lr_halving=True))
    refused = {"training.decay_method noam is another": dict(decay_method="noam"),
               "training.start_decay_steps 1000 is set": dict(start_decay_steps=1000),
               "use it with training.world_size 1": dict(world_size=2, gpu_ranks=[0, 1])}
    for message, options in refused.items():
        with pytest.raises(ConfigError, match=message):
            lr_halving.check(config(valid_lr_halving=True, **options))
    with pytest.raises(ConfigError, match="training.valid_lr_halving_every is set but training.valid_lr_halving"):
        lr_halving.check(config(valid_lr_halving_every=10))
    no_valid = config(valid_lr_halving=True)
    no_valid.data.pop("valid")
    with pytest.raises(ConfigError, match="no validation data"):
        lr_halving.check(no_valid)


def test_the_halving_replaces_eoles_step_decay_also_on_train_from(config):
    """Eole's defaults halve at step 50,000 and every 10,000 steps after: not the paper's schedule, and
    with train_from Eole rebuilds it from the checkpoint's training config."""
    model = torch.nn.Linear(2, 2)
    stock = Optimizer.from_config(model, config(learning_rate=1e-3))
    stock._decay_step = 60001
    assert stock.learning_rate() == pytest.approx(0.25e-3)  # what would happen
    halving = Optimizer.from_config(model, config(learning_rate=1e-3, valid_lr_halving=True))
    halving._decay_step = 60001
    assert halving.learning_rate() == pytest.approx(1e-3)
    saved = {"optim": stock.state_dict(), "config": config(learning_rate=1e-3)}  # trained with the decay
    resumed = Optimizer.from_config(model, config(learning_rate=1e-3, valid_lr_halving=True, train_from="x"), saved)
    assert resumed._decay_step == 60001 and resumed.learning_rate() == pytest.approx(1e-3)


def test_the_rate_halves_when_the_validation_loss_per_token_rises_and_the_halvings_survive_optimizer_pt(config,
                                                                                                         tmp_path):
    model = torch.nn.Linear(2, 2)
    optim = Optimizer.from_config(model, config(learning_rate=1e-3, valid_lr_halving=True))
    losses = iter([(20.0, 10), (15.0, 10), (32.0, 20), (14.0, 10)])  # per token: 2.0, 1.5, 1.6, 1.4
    validate = lr_halving.wrap_validate(
        lambda self, it, moving_average=None: (lambda loss, n: Statistics(loss=loss, n_tokens=n))(*next(losses)))
    rates = []
    for _ in range(4):
        validate(types.SimpleNamespace(optim=optim), None)
        rates.append(optim.learning_rate())
    assert rates == pytest.approx([1e-3, 1e-3, 5e-4, 5e-4])
    torch.save(optim.state_dict(), tmp_path / "optimizer.pt")
    resumed = Optimizer.from_config(model, config(learning_rate=1e-3, valid_lr_halving=True))
    resumed.load_state_dict(torch.load(tmp_path / "optimizer.pt", weights_only=True))  # as Eole loads it
    assert resumed.learning_rate() == pytest.approx(5e-4)
    assert (resumed._entmax_validations, resumed._entmax_last_valid) == (4, pytest.approx(1.4))
    stock = Optimizer.from_config(model, config(learning_rate=1e-3))
    stock.load_state_dict({"training_step": 5, "decay_step": 5})  # an optimizer.pt of stock Eole
    assert stock.learning_rate() == pytest.approx(1e-3)


def test_eole_train_halves_and_saves_the_halvings_and_refuses_a_second_schedule_in_one_line(tmp_path):
    sample_vocabs(tmp_path)
    config = small_config("rnn-entmax15", tmp_path, steps=6, num_workers=0, valid_lr_halving=True)
    cfg = yaml.safe_load(config.read_text())
    cfg["training"].update(valid_steps=1, learning_rate=1e-3)  # six validations
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    log = run_eole(["train", "-c", config], cwd=tmp_path).stderr
    state = torch.load(tmp_path / "model" / "step_6" / "optimizer.pt", weights_only=True)
    assert state["entmax_validations"] == 6 and state["entmax_last_valid_loss"] > 0
    assert state["entmax_lr_halvings"] == log.count("valid_lr_halving: validation loss")
    cfg["training"]["decay_method"] = "rsqrt"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = run_eole(["train", "-c", config], cwd=tmp_path, check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "training.valid_lr_halving is a learning-rate schedule and training.decay_method rsqrt" in last
