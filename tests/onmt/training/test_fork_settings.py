"""embeddings_dropout and adam_eps: the word embeddings' dropout and Adam's ε, two values OpenNMT-py 3.5.1
fixes (-dropout, 1e-8) and Peters et al.'s fork set otherwise (0, 1e-9)."""
from types import SimpleNamespace

import pytest
import torch

from onmt_testkit import build_vocab, train, yaml_config

RNN = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8,
           generator_function="entmax15", global_attention_function="entmax15", dropout=0.3)


def _embeddings(**given):
    from onmt.model_builder import build_embeddings

    opt = SimpleNamespace(src_word_vec_size=8, position_encoding=False, position_encoding_type="SinusoidalInterleaved",
                          feat_merge="concat", feat_vec_exponent=0.7, feat_vec_size=-1, dropout=[0.3],
                          freeze_word_vecs_enc=False, optim="adam", **given)
    return build_embeddings(opt, {"src": {"<blank>": 0, "a": 1, "b": 2}}, for_encoder=True)


def test_the_embeddings_drop_the_given_share_and_upstreams_otherwise():
    assert _embeddings().dropout_p == 0.3  # upstream: -dropout
    assert _embeddings(embeddings_dropout=None).dropout_p == 0.3
    off = _embeddings(embeddings_dropout=0.0).train()
    assert off.dropout_p == 0.0 and off.dropout.p == 0.0
    words = torch.tensor([[[1], [2], [1]]])
    assert torch.equal(off(words), off(words))  # nothing dropped in training mode
    assert _embeddings(embeddings_dropout=0.1).dropout.p == 0.1


def _saved_eps(path) -> list[float]:
    return [g["eps"] for g in torch.load(path)["optim"]["optimizer"]["param_groups"]]


def test_onmt_train_builds_adam_with_the_given_eps_and_keeps_it_on_train_from(toy):
    config = yaml_config(toy, RNN, steps=4, extra="adam_eps: 1.0e-9\nembeddings_dropout: 0.0\n")
    build_vocab(config)
    train(config)
    first = toy / "run/model_step_4.pt"
    assert _saved_eps(first) == [1e-9]
    assert torch.load(first)["opt"].embeddings_dropout == 0.0
    # a new epsilon with the optimizer's state kept: the state's saved 1e-9 does not come back
    train(config, "-train_from", str(first), "-train_steps", "6", "-save_checkpoint_steps", "6",
          "-reset_optim", "keep_states", "-adam_eps", "1e-7")
    assert _saved_eps(toy / "run/model_step_6.pt") == [1e-7]
    stock = yaml_config(toy, RNN, steps=4, name="stock")
    train(stock)
    assert _saved_eps(toy / "run/stock_step_4.pt") == [1e-8]  # upstream's own


@pytest.mark.parametrize("args, says", [
    (["-embeddings_dropout", "1"], "-embeddings_dropout 1.0: give a probability in"),
    (["-embeddings_dropout", "0", "-dropout_steps", "0", "2", "-dropout", "0.3", "0.1",
      "-attention_dropout", "0.1", "0.1"], "-dropout_steps schedule"),
    (["-adam_eps", "0"], "-adam_eps 0.0: give a number above 0"),
    (["-adam_eps", "1e-9", "-optim", "sgd"], "it needs -optim adam or sparseadam, not sgd"),
])
def test_values_it_cannot_honour_are_refused_before_training(toy, args, says):
    config = yaml_config(toy, RNN, steps=2, name="refused")
    build_vocab(config)
    with pytest.raises(ValueError, match=says):
        train(config, *args)
    assert not list((toy / "run").glob("refused_step_*.pt"))
