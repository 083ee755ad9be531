"""valid_lr_halving: Peters et al.'s schedule (halve the learning rate when the validation loss rises)."""
import types

import pytest
import torch

from conftest import build_vocab, train, yaml_config

from onmt_entmax.onmt.training import lr_halving


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
