"""Gradients really flow through sparse output, sparse attention and learned alphas: a small
Transformer learns to reverse strings (8 symbols, length 3-5) to >= 90% exact match.

Runtime on the shared 2-core CPU machine: about 40 s per test (1000 steps, one thread).
"""
import pytest

from onmt_testkit import build_vocab, exact_match, reversal_corpus, train, translate, yaml_config

MODEL = dict(encoder_type="transformer", decoder_type="transformer", position_encoding=True, layers=1,
             hidden_size=64, word_vec_size=64, transformer_ff=128, heads=4, dropout=0.0, attention_dropout=0.0,
             generator_function="entmax15", attention_function="entmax15", param_init=0, param_init_glorot=True)
STEPS = 1000


@pytest.mark.parametrize("learn_alpha", [False, True], ids=["entmax15", "learn_alpha"])
def test_transformer_learns_reversal(tmp_path, learn_alpha):
    data = reversal_corpus(tmp_path / "rev", n_train=2000, n_test=100, max_len=5)
    config = yaml_config(data, dict(MODEL, learn_alpha=learn_alpha), steps=STEPS)
    build_vocab(config)
    train(config)
    pred = translate(data / f"run/model_step_{STEPS}.pt", data / "src-test.txt", data / "pred.txt",
                     "-beam_size", "1", "-max_length", "10")
    acc = exact_match(pred, data / "tgt-test.txt")
    assert acc >= 0.9, f"exact match {acc:.2f}"
    if learn_alpha:
        import torch

        state = torch.load(data / f"run/model_step_{STEPS}.pt")["model"]
        alphas = torch.cat([1 + torch.sigmoid(v) for k, v in state.items() if k.endswith("alpha.a")])
        assert (alphas - 1.5).abs().max() > 0.05, "the alphas moved away from their start"
