"""adam_fused: -optim adam through torch's fused Adam, the same update as upstream's default, held by the
command across -train_from whatever implementation the checkpoint's optimizer state was saved with."""
import pytest
import torch

from onmt_testkit import build_vocab, train, yaml_config

RNN = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8,
           generator_function="entmax15", global_attention_function="entmax15", dropout=0.3)


def _fused(path) -> list:
    return [g.get("fused") for g in torch.load(path)["optim"]["optimizer"]["param_groups"]]


def _weights(path) -> dict:
    return torch.load(path)["model"]


def test_fused_adam_trains_the_same_weights_as_upstreams_adam(toy):
    stock = yaml_config(toy, RNN, steps=4, name="stock")
    build_vocab(stock)
    train(stock)
    train(yaml_config(toy, RNN, steps=4, name="fused", extra="adam_fused: true\n"))
    assert _fused(toy / "run/fused_step_4.pt") == [True] and _fused(toy / "run/stock_step_4.pt") != [True]
    a, b = _weights(toy / "run/stock_step_4.pt"), _weights(toy / "run/fused_step_4.pt")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-5, atol=1e-7, msg=name)


def test_the_command_decides_the_implementation_when_a_run_is_resumed(toy):
    config = yaml_config(toy, RNN, steps=4, name="resumed")
    build_vocab(config)
    train(config)  # upstream's Adam, its state saved with it
    train(config, "-train_from", str(toy / "run/resumed_step_4.pt"), "-train_steps", "6",
          "-save_checkpoint_steps", "6", "-adam_fused")
    assert _fused(toy / "run/resumed_step_6.pt") == [True]
    state = torch.load(toy / "run/resumed_step_6.pt")["optim"]["optimizer"]["state"]
    assert {float(s["step"]) for s in state.values()} == {6.0}  # the counts went on from the checkpoint's 4
    train(config, "-train_from", str(toy / "run/resumed_step_6.pt"), "-train_steps", "8",
          "-save_checkpoint_steps", "8")  # without the option: upstream's again
    assert _fused(toy / "run/resumed_step_8.pt") == [None]
    state = torch.load(toy / "run/resumed_step_8.pt")["optim"]["optimizer"]["state"]
    assert all(s["step"].device.type == "cpu" and float(s["step"]) == 8.0 for s in state.values())


def test_adam_fused_without_adam_is_refused_before_training(toy):
    config = yaml_config(toy, RNN, steps=2, name="refused")
    build_vocab(config)
    with pytest.raises(ValueError, match="-adam_fused is an implementation of Adam: it needs -optim adam, not sgd"):
        train(config, "-adam_fused", "-optim", "sgd")
    assert not list((toy / "run").glob("refused_step_*.pt"))
