"""Checkpoints under torch >= 2.6 with weights-only loading left on: stock 3.5.1 ones, ours, averaged ones."""
import torch

from onmt_testkit import build_vocab, run_console, train, translate, yaml_config

RNN = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8, dropout=0.0)


def test_stock_checkpoint_loads_and_translates_with_the_plugin(toy):
    config = yaml_config(toy, RNN, steps=3, name="stock")
    build_vocab(config)
    proc = run_console(["onmt_train", "-config", str(config)], cwd=toy, env={"ONMT_ENTMAX_DISABLE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    ckpt_path = toy / "run/stock_step_3.pt"
    ckpt = torch.load(ckpt_path)  # weights-only default
    assert not hasattr(ckpt["opt"], "attention_function"), "trained by stock OpenNMT-py"
    out = translate(ckpt_path, toy / "src-test.txt", toy / "pred.txt")
    assert len(out) == 20


def test_average_models_of_sparse_checkpoints(toy):
    model = dict(encoder_type="transformer", decoder_type="transformer", position_encoding=True, layers=1,
                 hidden_size=16, word_vec_size=16, transformer_ff=16, heads=2, generator_function="entmax15",
                 attention_function="entmax15", learn_alpha=True, save_checkpoint_steps=2)
    config = yaml_config(toy, model, steps=4)
    build_vocab(config)
    train(config, "-save_checkpoint_steps", "2")
    a, b = toy / "run/model_step_2.pt", toy / "run/model_step_4.pt"
    proc = run_console(["onmt_average_models", "-models", str(a), str(b), "-output", str(toy / "avg.pt")], cwd=toy)
    assert proc.returncode == 0, proc.stderr[-2000:]
    avg, sa, sb = (torch.load(p)["model"] for p in (toy / "avg.pt", a, b))
    key = next(k for k in avg if k.endswith("alpha.a"))
    assert torch.allclose(avg[key], (sa[key] + sb[key]) / 2)
    assert len(translate(toy / "avg.pt", toy / "src-test.txt", toy / "pred.txt")) == 20
