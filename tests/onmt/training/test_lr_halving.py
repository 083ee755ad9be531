"""valid_lr_halving: Peters et al.'s schedule (halve the learning rate when the validation loss rises)."""
import types

import pytest
import torch

from onmt_testkit import build_vocab, train, yaml_config

from onmt_entmax.onmt.training import lr_halving
from onmt_entmax.training.lr_halving import STEP_DECAY_DEFAULTS


def _stats(loss, n_words):
    return types.SimpleNamespace(loss=loss, n_words=n_words)


def test_rate_halves_exactly_when_the_validation_loss_rises():
    losses = iter([2.0, 1.5, 1.6, 1.4, 1.45, 1.45])  # per token (n_words = 1)
    validate = lr_halving.wrap_validate(lambda self, it, moving_average=None: _stats(next(losses), 1))
    trainer = types.SimpleNamespace(optim=types.SimpleNamespace(_learning_rate=1e-3, _entmax_halving=True))
    rates = []
    for _ in range(6):
        validate(trainer, None)
        rates.append(trainer.optim._learning_rate)
    assert rates == pytest.approx([1e-3, 1e-3, 5e-4, 5e-4, 2.5e-4, 2.5e-4])
    assert trainer.optim._entmax_halvings == 2
    losses = iter([1.0, 2.0, 3.0])
    off = types.SimpleNamespace(optim=types.SimpleNamespace(_learning_rate=1e-3))
    for _ in range(3):
        validate(off, None)
    assert off.optim._learning_rate == 1e-3


def test_every_kth_validation_checks_against_the_loss_k_validations_before():
    """valid_lr_halving_every: 2 (the paper's medium runs: every ten): a rise between two checked
    validations halves; a rise at a validation in between does not."""
    losses = iter([2.0, 1.5, 1.6, 1.7, 1.4, 1.8])
    validate = lr_halving.wrap_validate(lambda self, it, moving_average=None: _stats(next(losses), 1))
    optim = types.SimpleNamespace(_learning_rate=1e-3, _entmax_halving=True, _entmax_halving_every=2)
    rates = []
    for _ in range(6):
        validate(types.SimpleNamespace(optim=optim), None)
        rates.append(optim._learning_rate)
    # checks at validations 2, 4, 6: 1.5 (first), 1.7 > 1.5 halves, 1.8 > 1.7 halves; every validation
    # would have halved at 3, 4 and 6
    assert rates == pytest.approx([1e-3, 1e-3, 1e-3, 5e-4, 5e-4, 2.5e-4])


def test_a_resumed_run_keeps_the_cadence_of_its_checks():
    from onmt.utils.optimizers import Optimizer

    first = Optimizer(torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))]), learning_rate=1e-3)
    first._entmax_validations, first._entmax_last_valid = 3, 1.5  # validated 3 times, checked at 2
    resumed = Optimizer(torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))]), learning_rate=1e-3)
    resumed.load_state_dict(first.state_dict())
    resumed._entmax_halving, resumed._entmax_halving_every = True, 2
    validate = lr_halving.wrap_validate(lambda self, it, moving_average=None: _stats(1.6, 1))
    validate(types.SimpleNamespace(optim=resumed), None)  # validation 4: a check, 1.6 > 1.5
    assert resumed.learning_rate() == pytest.approx(5e-4) and resumed._entmax_validations == 4


def test_halvings_survive_the_checkpoint():
    from onmt.utils.optimizers import Optimizer

    def optimizer():
        return Optimizer(torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))]), learning_rate=1e-3)

    first = optimizer()
    first._learning_rate, first._entmax_halvings, first._entmax_last_valid = 2.5e-4, 2, 1.4
    resumed = optimizer()
    resumed.load_state_dict(first.state_dict())
    assert resumed.learning_rate() == pytest.approx(2.5e-4)
    assert resumed._entmax_last_valid == 1.4
    stock = optimizer()
    stock.load_state_dict({"training_step": 5, "decay_step": 5})  # a stock 3.5.1 checkpoint
    assert stock.learning_rate() == pytest.approx(1e-3)


def test_onmt_train_accepts_it_and_refuses_it_on_several_gpus(toy):
    model = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8,
                 generator_function="entmax15", global_attention_function="entmax15")
    config = yaml_config(toy, model, steps=4, extra="valid_lr_halving: true\n")
    build_vocab(config)
    train(config)
    ckpt = torch.load(toy / "run/model_step_4.pt")
    assert ckpt["opt"].valid_lr_halving is True
    assert "entmax_lr_halvings" in ckpt["optim"]
    with pytest.raises(ValueError, match="valid_lr_halving"):
        train(config, "-world_size", "2", "-gpu_ranks", "0", "1")
    with pytest.raises(ValueError, match="valid_lr_halving_every: 0"):
        train(config, "-valid_lr_halving_every", "0")
    alone = yaml_config(toy, model, steps=4, name="alone", extra="valid_lr_halving_every: 10\n")
    with pytest.raises(ValueError, match="valid_lr_halving_every is set but valid_lr_halving is not"):
        train(alone)


def _train_opt(*args: str):
    """onmt_train's options with upstream's defaults (step decay from 50,000, every 10,000 steps)."""
    from onmt.bin.train import _get_parser

    data = "{'valid': {'path_src': 's', 'path_tgt': 't'}}"
    return _get_parser().parse_known_args(["-data", data, "-src_vocab", "v", *args])[0]


def test_the_halving_replaces_upstreams_step_decay_also_on_train_from():
    """With the defaults, upstream halves at step 50,000 and every 10,000 steps after: that is not the
    paper's schedule, and on -train_from upstream rebuilds it from the checkpoint's options."""
    from onmt.utils.optimizers import Optimizer

    model = torch.nn.Linear(2, 2)
    stock = Optimizer.from_opt(model, _train_opt())
    stock._decay_step = 60001
    assert stock.learning_rate() == pytest.approx(0.25 * stock._learning_rate)  # what would happen
    halving = Optimizer.from_opt(model, _train_opt("-valid_lr_halving"))
    halving._decay_step = 60001
    assert halving.learning_rate() == pytest.approx(halving._learning_rate)
    saved = {"opt": _train_opt(), "optim": dict(stock.state_dict())}  # a checkpoint trained with the decay
    resumed = Optimizer.from_opt(model, _train_opt("-valid_lr_halving", "-train_from", "x.pt"), saved)
    assert resumed._decay_step == 60001 and resumed.learning_rate() == pytest.approx(resumed._learning_rate)


def test_a_second_schedule_beside_the_halving_is_refused_by_name():
    from onmt_entmax.errors import EntmaxOptionError

    defaults = _train_opt()
    assert {k: getattr(defaults, k) for k in STEP_DECAY_DEFAULTS} == STEP_DECAY_DEFAULTS
    with pytest.raises(EntmaxOptionError, match="decay_method noam"):
        lr_halving.check_train_opts(_train_opt("-valid_lr_halving", "-decay_method", "noam"))
    with pytest.raises(EntmaxOptionError, match="start_decay_steps 1000 is set"):
        lr_halving.check_train_opts(_train_opt("-valid_lr_halving", "-start_decay_steps", "1000"))
    lr_halving.check_train_opts(_train_opt("-valid_lr_halving"))
