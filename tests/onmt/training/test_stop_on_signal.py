"""stop_on_signal / stop_between_steps in onmt_train: SIGTERM (a runner's time limit, a cluster's
pre-emption) ends a run after the step under way with a checkpoint of that step, and -train_from
continues from it; upstream dies and loses every step since its last save."""
import re
import signal
import sys

from console import stop_at_step
from onmt_testkit import build_vocab, train, yaml_config

from onmt_entmax.analysis.checkpoint import load_checkpoint

MODEL = dict(encoder_type="brnn", decoder_type="rnn", layers=1, hidden_size=16, word_vec_size=8,
             generator_function="entmax15", global_attention_function="entmax15")


def _config(toy, steps):
    config = yaml_config(toy, MODEL, steps=steps)  # saves and validates only at the last step
    # report every step; two data-loader workers, as onmt_train has by default
    config.write_text(re.sub(r"report_every: \d+", "report_every: 1", config.read_text())
                      .replace("num_workers: 0", "num_workers: 2"))
    return config


def test_sigterm_saves_the_step_under_way_exits_143_and_train_from_continues_it(toy):
    config = _config(toy, 1_000_000)
    build_vocab(config)
    cmd = [sys.executable, "-c", "from onmt.bin.train import main; main()", "-config", str(config)]
    code, log = stop_at_step(cmd, toy, 3)  # the trainer alone gets the signal, as reproduce.py's time limit sends it
    assert code == 128 + signal.SIGTERM, log[-3000:]
    step = int(re.search(r"SIGTERM: stopping after step (\d+); its checkpoint is saved next", log).group(1))
    last_reported = max(int(s) for s in re.findall(r"Step +(\d+)/", log))
    assert step >= 3 and step == last_reported  # every step it trained is in the checkpoint
    saved = sorted((toy / "run").glob("model_step_*.pt"))
    assert [p.name for p in saved] == [f"model_step_{step}.pt"]
    assert load_checkpoint(saved[0])["optim"]["training_step"] == step + 1
    train(_config(toy, step + 2), "-train_from", str(saved[0]))
    assert load_checkpoint(toy / f"run/model_step_{step + 2}.pt")["optim"]["training_step"] == step + 3
