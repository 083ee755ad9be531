"""reproduce.py --mps: the trainers sharing a GPU are clients of an MPS daemon started for them and
stopped after them; a machine without MPS is told so in one line, before any run starts."""
import os
import sys

import pytest

import mps
from pieces import run_pieces
from pipeline_helpers import load_script
from steps import common
from steps import train as train_step

rep = load_script("scripts/reproduce/reproduce.py")


def _fake_tools(tmp_path, monkeypatch, start_status: int = 0) -> "os.PathLike":
    """nvidia-smi listing one GPU and an nvidia-cuda-mps-control that writes each call (its arguments,
    the MPS folders it was given, what came on its stdin) to calls.txt; returns that file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 0\n")
    (bin_dir / mps.CONTROL).write_text(
        "#!/bin/sh\n"
        'echo "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY'
        f'${{CUDA_VISIBLE_DEVICES+ visible=$CUDA_VISIBLE_DEVICES}}" >> {calls}\n'
        f'if [ "$1" != "-d" ]; then cat >> {calls}; fi\n'
        f'[ "$1" = "-d" ] && [ {start_status} != 0 ] && echo "cannot start MPS: no permission" >&2\n'
        f"exit {start_status if start_status else 0}\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.delenv(mps.PIPE, raising=False)
    monkeypatch.delenv(mps.LOG, raising=False)
    return calls


def test_trainers_started_under_mps_are_its_clients_and_the_daemon_is_stopped_after_them(tmp_path, monkeypatch):
    calls = _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the runner's own: not the daemon's (it sees every GPU)
    show = [sys.executable, "-c", "import os; print('pipe', os.environ.get('CUDA_MPS_PIPE_DIRECTORY'))"]
    runs = [(tmp_path / f"r{i}", show) for i in range(2)]
    with mps.daemon() as env:
        assert run_pieces(runs, tmp_path, jobs=2, gpus=[0]) == []
    start, stop, quit_ = calls.read_text().splitlines()
    assert start == f"args=-d pipe={env[mps.PIPE]} log={env[mps.LOG]}"
    assert stop == f"args= pipe={env[mps.PIPE]} log={env[mps.LOG]}" and quit_ == "quit"
    for i in range(2):
        log = (tmp_path / f"r{i}" / "train.log").read_text()
        assert f"pipe {env[mps.PIPE]}" in log  # the trainer is a client of this daemon
        assert f"{mps.PIPE}={env[mps.PIPE]} CUDA_VISIBLE_DEVICES=0" in log  # the piece line says how it ran
    assert mps.PIPE not in os.environ and mps.LOG not in os.environ


def test_the_daemon_is_stopped_when_training_fails(tmp_path, monkeypatch):
    calls = _fake_tools(tmp_path, monkeypatch)
    with pytest.raises(SystemExit):
        with mps.daemon():
            raise SystemExit("training failed")
    assert calls.read_text().splitlines()[-1] == "quit"


def test_a_daemon_already_running_is_used_and_left_running(tmp_path, monkeypatch):
    calls = _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setenv(mps.PIPE, str(tmp_path / "theirs"))
    with mps.daemon() as env:
        assert env == {mps.PIPE: str(tmp_path / "theirs")}
    assert not calls.exists()


def test_train_with_mps_runs_the_trainers_under_the_daemon(tmp_path, monkeypatch):
    calls = _fake_tools(tmp_path, monkeypatch)
    monkeypatch.setattr(common, "WORK", tmp_path)
    monkeypatch.setattr(train_step, "build_vocab", lambda *a, **k: None)
    seen = []
    monkeypatch.setattr(train_step, "train_all", lambda runs, gpus, *a, **k: seen.append(
        (gpus, os.environ.get(mps.PIPE))) or [])
    rep.main(["train", "peters2019-table1", "--only", "medium/out2-attn2", "--seeds", "1", "--gpus", "0", "--mps"])
    (gpus, pipe), = seen
    assert gpus == [0] and pipe and calls.read_text().splitlines()[0].startswith("args=-d")
    assert calls.read_text().splitlines()[-1] == "quit" and mps.PIPE not in os.environ


@pytest.mark.parametrize("case", ["missing", "fails"])
def test_mps_that_cannot_start_is_named_in_one_line_before_any_run(case, tmp_path, monkeypatch, capsys):
    _fake_tools(tmp_path, monkeypatch, start_status=1)
    if case == "missing":
        (tmp_path / "bin" / mps.CONTROL).unlink()
        monkeypatch.setenv("PATH", str(tmp_path / "bin"))
        monkeypatch.setattr(mps, "PLACES", (str(tmp_path / "nowhere"),))
    monkeypatch.setattr(common, "WORK", tmp_path)
    monkeypatch.setattr(train_step, "build_vocab", lambda *a, **k: None)
    monkeypatch.setattr(train_step, "train_all", lambda *a, **k: pytest.fail("no run may start"))
    with pytest.raises(SystemExit) as err:
        rep.main(["train", "peters2019-table1", "--only", "medium/out2-attn2", "--seeds", "1", "--gpus", "0", "--mps"])
    said = str(err.value)
    assert said.startswith("--mps: ") and "\n" not in said
    assert ("not found" in said) if case == "missing" else ("(exit status 1): cannot start MPS: no permission" in said)


@pytest.mark.parametrize("argv, why", [
    (["train", "--mps"], "--mps: give the GPUs the runs share (--gpus)"),
    (["evaluate", "--mps", "--gpus", "0"], "--mps: for the training steps (train, all), not evaluate"),
])
def test_mps_where_it_means_nothing_is_refused(argv, why, tmp_path, monkeypatch, capsys):
    _fake_tools(tmp_path, monkeypatch)
    with pytest.raises(SystemExit):
        rep.main([argv[0], "peters2019-table1", "--only", "medium/out2-attn2", *argv[1:]])
    assert why in capsys.readouterr().err
