"""Eole's logs carry our information: its import-time, config and 1-layer-LSTM warnings are filtered at their
source only (the same warning from any other module, and every other warning, still shows), and the corpus-reload
line is logged once."""
import importlib.util
import logging
import sys
import warnings
from pathlib import Path

import pytest

from console import run_console
from eole_testkit import DATA, eole_command, small_config

from onmt_entmax.eole import upstream_noise
from onmt_entmax.upstream_noise import CorporaLoadedOnce

ROWS = pytest.mark.parametrize("message,category,modules", upstream_noise.UPSTREAM_WARNINGS,
                               ids=[r[0][:30] for r in upstream_noise.UPSTREAM_WARNINGS])
SOURCE = {RuntimeWarning: "eole.constants", UserWarning: "eole.bin.run"}  # where Eole's are attributed


def _shown(message: str, category: type, module: str) -> list:
    """The warnings that print when ``module`` raises ``message`` with the filters on."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        upstream_noise.filter_upstream_warnings()
        exec(f"import warnings\nwarnings.warn({message + ' (details)'!r}, {category.__name__})", {"__name__": module})
    return [w for w in caught if issubclass(w.category, category)]


@ROWS
def test_each_upstream_warning_is_silent_in_its_module_only(message, category, modules):
    source = "torch.nn.modules.rnn" if "dropout" in message else SOURCE[category]
    assert _shown(message, category, source) == []
    for other in ("__main__", "onmt_entmax.eole.config", "my_eole.constants"):
        assert len(_shown(message, category, other)) == 1, other
    assert len(_shown("something else entirely", category, source)) == 1


@ROWS
def test_the_filtered_messages_are_in_the_installed_toolkits(message, category, modules):
    """Each row names a real upstream warning: its text is in the module that raises it."""
    if "dropout" in message:
        return test_torchs_one_layer_lstm_dropout_warning_is_the_one_filtered()
    module = "eole.ops" if category is RuntimeWarning else "pydantic.main"
    text = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
    assert message.rstrip(": ") in text, module


def test_torchs_one_layer_lstm_dropout_warning_is_the_one_filtered():
    """torch's real warning, as both toolkits' 1-layer RNNs raise it, matches the row (message and module)."""
    import torch

    for filtered in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if filtered:
                upstream_noise.filter_upstream_warnings()
            torch.nn.LSTM(4, 4, num_layers=1, dropout=0.2)
        assert (len(caught) == 0) == filtered


def test_the_corpus_line_filter_is_on_eoles_logger_once():
    upstream_noise.quiet()
    upstream_noise.quiet()
    assert sum(isinstance(f, CorporaLoadedOnce) for f in logging.getLogger("eole").filters) == 1


def test_eole_commands_print_no_upstream_noise_but_a_users_warning_shows(tmp_path):
    """Real build_vocab, train (a 1-layer RNN with dropout, its small corpus re-read many times) and predict
    (then a warning of the user's own) processes with Python's default warning filters, as a user's shell has them."""
    config = small_config("rnn-entmax15", tmp_path, steps=12)
    env = {"PYTHONWARNINGS": ""}
    logs = [run_console(eole_command() + ["build_vocab", "-c", str(config), "-n_sample", "-1"], cwd=tmp_path, env=env)]
    logs.append(run_console(eole_command() + ["train", "-c", str(config)], cwd=tmp_path, env=env))
    script = tmp_path / "predict_then_warn.py"
    script.write_text("import sys, warnings\nfrom eole.bin.main import main\nsys.argv = ['eole', 'predict', "
                      f"'-model_path', {str(tmp_path / 'model')!r}, '-src', {str(DATA / 'src-dev.txt')!r}, "
                      f"'-output', {str(tmp_path / 'pred.txt')!r}]\nmain()\n"
                      "warnings.warn('the user warns', RuntimeWarning)\n")
    logs.append(run_console([sys.executable, str(script)], cwd=tmp_path, env=env))
    for proc in logs:
        assert proc.returncode == 0, proc.stderr[-3000:]
    out = "".join(p.stdout + p.stderr for p in logs)
    assert [line for line in out.splitlines() if "Warning" in line] == [
        line for line in out.splitlines() if "the user warns" in line] != []
    assert out.count("Weighted corpora loaded so far") == 1
    assert (tmp_path / "pred.txt").read_text().count("\n") == 100
