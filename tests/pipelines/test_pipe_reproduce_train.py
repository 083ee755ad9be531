"""reproduce.py train (steps/train.py, pieces.py): the vocabulary built once, the runs trained in resumable pieces
spread over the devices, a failed or stopped piece handled."""
import os
from pathlib import Path

import pytest

import experiments as E
import pieces as pieces_mod
from pieces import best_checkpoint, latest_checkpoint, run_pieces
from pipeline_helpers import ROOT
from steps import common
from steps.train import build_vocab, train_all, train_command


def test_newest_complete_checkpoint_is_resumed_and_a_cut_one_removed(tmp_path):
    import zipfile

    for step in (5, 10):
        with zipfile.ZipFile(tmp_path / f"model_step_{step}.pt", "w") as z:  # torch.save's format
            z.writestr("archive/data.pkl", b"x")
    (tmp_path / "model_step_15.pt").write_bytes(b"PK\x03\x04 cut short by the time limit")
    assert latest_checkpoint(tmp_path) == tmp_path / "model_step_10.pt"
    assert not (tmp_path / "model_step_15.pt").exists()


@pytest.mark.skipif(__import__("shutil").which("onmt_train") is None, reason="needs onmt_train")
def test_time_limited_piece_is_resumed_by_the_same_command(tmp_path, monkeypatch):
    """--max-minutes stops a run mid-way; the next call continues it with -train_from from the
    newest checkpoint (same log, higher steps) until it finishes."""
    import yaml

    from pipeline_helpers import ROOT

    config = ROOT / "configs/smoke/peters2019-sigmorphon.yaml"
    cfg = yaml.safe_load(config.read_text())
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = E.Experiment("smoke", "resume", cfg, "sigsample", "src", "tgt", "peters2019-table1", "x", "medium",
                     "sigmorphon")
    monkeypatch.setattr(E.Experiment, "path", property(lambda self: str(config)))
    build_vocab(cfg, config)
    often = ["-save_checkpoint_steps", "5", "-valid_steps", "5", "-keep_checkpoint", "-1", "-early_stopping", "0"]
    unfinished = train_all([(e, 1)], None, ["-train_steps", "1000000", *often], max_minutes=0.4)
    run_dir = tmp_path / "runs/smoke/resume/seed1"
    assert unfinished == [run_dir] and not (run_dir / "train.done").exists()
    first = latest_checkpoint(run_dir)
    assert first is not None
    step = int(first.stem.rsplit("_", 1)[1])
    assert train_all([(e, 1)], None, ["-train_steps", str(step + 5), *often]) == []
    assert (run_dir / "train.done").exists() and latest_checkpoint(run_dir).name == f"model_step_{step + 5}.pt"
    log = (run_dir / "train.log").read_text()
    assert log.count("[reproduce]") == 2 and f"-train_from {first}" in log
    assert best_checkpoint(log)[0].endswith(".pt")


def _fake_build_vocab(calls, fail=False):
    """A stand-in for onmt_build_vocab: writes its -src_vocab / -tgt_vocab (half of them, then dies, with fail)."""
    import time

    def run(cmd, cwd=None, **_):
        calls.append(cmd)
        time.sleep(0.3)  # long enough for a second runner to look for the files meanwhile
        for flag in ("-src_vocab", "-tgt_vocab"):
            Path(cmd[cmd.index(flag) + 1]).write_text("a\t3\n" if fail else "a\t3\nb\t2\n")
            if fail:
                raise SystemExit("onmt_build_vocab killed")
    return run


VOCAB_CFG = {"src_vocab": "data/c/vocab.src", "tgt_vocab": "data/c/vocab.tgt"}


def test_a_vocabulary_build_killed_midway_leaves_nothing_the_next_run_takes_for_it(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(common, "run", _fake_build_vocab(calls, fail=True))
    with pytest.raises(SystemExit):
        build_vocab(VOCAB_CFG, "c.yaml", cwd=tmp_path)
    assert not (tmp_path / "data/c/vocab.src").exists() and not (tmp_path / "data/c/vocab.tgt").exists()
    monkeypatch.setattr(common, "run", _fake_build_vocab(calls))
    build_vocab(VOCAB_CFG, "c.yaml", cwd=tmp_path)  # built again, whole
    assert len(calls) == 2 and (tmp_path / "data/c/vocab.src").read_text() == "a\t3\nb\t2\n"


def test_two_runners_started_at_once_on_one_corpus_build_its_vocabulary_once(tmp_path, monkeypatch):
    import threading

    calls = []
    monkeypatch.setattr(common, "run", _fake_build_vocab(calls))
    runners = [threading.Thread(target=build_vocab, args=(VOCAB_CFG, "c.yaml", tmp_path)) for _ in range(2)]
    for t in runners:
        t.start()
    for t in runners:
        t.join()
    assert len(calls) == 1
    assert (tmp_path / "data/c/vocab.tgt").read_text() == "a\t3\nb\t2\n"
    assert sorted(p.name for p in (tmp_path / "data/c").iterdir()) == ["vocab.src", "vocab.src.lock", "vocab.tgt"]


def test_training_runs_are_spread_over_the_gpus(tmp_path):
    """--gpus 0 1: each run starts on the least busy GPU, chosen by CUDA_VISIBLE_DEVICES (a one-GPU
    onmt_train always trains on its device 0, so the command itself says -gpu_ranks 0)."""
    import sys

    show = [sys.executable, "-c", "import os, time; print('on', os.environ['CUDA_VISIBLE_DEVICES']); time.sleep(1)"]
    runs = [(tmp_path / f"r{i}", show) for i in range(3)]
    assert run_pieces(runs, tmp_path, jobs=2, gpus=[0, 1]) == []
    seen = [(tmp_path / f"r{i}" / "train.log").read_text() for i in range(3)]
    assert "on 0" in seen[0] and "on 1" in seen[1] and ("on 0" in seen[2] or "on 1" in seen[2])
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1")
    cmd = train_command(e, 1, gpu=True)
    assert cmd[cmd.index("-gpu_ranks") + 1] == "0" and "-gpu_ranks" not in train_command(e, 1, gpu=False)


def test_runs_side_by_side_on_the_cpu_share_its_cores_instead_of_each_taking_all(tmp_path, monkeypatch):
    """--jobs 2 without --gpus: each trainer gets half the cores as torch threads (OMP_NUM_THREADS);
    one job keeps torch's default, and an OMP_NUM_THREADS the user set is left alone."""
    import sys

    pieces = pieces_mod
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert pieces.cpu_threads(2, cores=2) == {"OMP_NUM_THREADS": "1"}
    assert pieces.cpu_threads(3, cores=16) == {"OMP_NUM_THREADS": "5"}
    assert pieces.cpu_threads(4, cores=2) == {"OMP_NUM_THREADS": "1"}
    assert pieces.cpu_threads(1, cores=16) == {}
    show = [sys.executable, "-c", "import os; print('threads', os.environ.get('OMP_NUM_THREADS'))"]
    runs = [(tmp_path / f"r{i}", show) for i in range(2)]
    assert run_pieces(runs, tmp_path, jobs=2) == []
    want = f"threads {max(1, pieces.usable_cores() // 2)}"
    assert all(want in (tmp_path / f"r{i}" / "train.log").read_text() for i in range(2))
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert pieces.cpu_threads(2, cores=2) == {}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_cpu_share_counts_the_cores_this_process_may_use_not_the_machines():
    """Pinned to one core (taskset, a container's cpuset), the trainers share that core, not the
    machine's count."""
    pieces = pieces_mod
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        assert pieces.usable_cores() == 1
    finally:
        os.sched_setaffinity(0, allowed)
    assert pieces.usable_cores() == len(allowed)


def test_resume_only_refuses_a_run_without_a_checkpoint_before_starting_any(tmp_path):
    """--resume-only on a fresh machine (the carried runs not unpacked): one line naming the run with
    nothing to resume, and no run started; with every run carried, each is resumed (-train_from)."""
    import sys
    import zipfile

    show = [sys.executable, "-c", "import sys; print(sys.argv[1:])"]
    carried, finished, fresh = (tmp_path / n for n in ("carried", "finished", "fresh"))
    for d in (carried, finished, fresh):
        d.mkdir()
    with zipfile.ZipFile(carried / "model_step_1490.pt", "w") as z:
        z.writestr("data.pkl", b"weights")
    (finished / "train.done").write_text("")
    runs = [(d, show) for d in (carried, finished, fresh)]
    with pytest.raises(SystemExit, match=r"--resume-only: no checkpoint to resume in \S*fresh \(unpack") as err:
        run_pieces(runs, tmp_path, resume_only=True)
    assert str(carried) not in str(err.value) and str(finished) not in str(err.value)
    assert not any((d / "train.log").exists() for d in (carried, finished, fresh))
    assert run_pieces(runs[:2], tmp_path, resume_only=True) == []
    assert "'-train_from', '" + str(carried / "model_step_1490.pt") in (carried / "train.log").read_text()
    assert not (finished / "train.log").exists()


def test_a_failed_piece_is_started_again_from_its_checkpoint_once(tmp_path):
    """A piece that dies (e.g. a data-loader worker's exit) is started again with -train_from its newest
    checkpoint, and the failure is written in its train.log; a run that fails again is reported."""
    import sys
    import zipfile

    # fails while its folder has no "survived" mark, leaving one: the second start succeeds
    flaky = [sys.executable, "-c", "import os, sys; d = sys.argv[1]; print(sys.argv[2:]); "
                                   "m = os.path.join(d, 'survived')\n"
             "if not os.path.exists(m): open(m, 'w').close(); sys.exit(3)"]
    broken = [sys.executable, "-c", "import sys; sys.exit(4)"]
    runs = []
    for name, cmd in (("flaky", flaky), ("broken", broken)):
        (tmp_path / name).mkdir()
        with zipfile.ZipFile(tmp_path / name / "model_step_1490.pt", "w") as z:
            z.writestr("data.pkl", b"weights")
        runs.append((tmp_path / name, cmd + ([str(tmp_path / name)] if name == "flaky" else [])))
    with pytest.raises(SystemExit, match=r"training failed: \S*broken \(exit status 4"):
        run_pieces(runs, tmp_path, retries=1)
    log = (tmp_path / "flaky" / "train.log").read_text()
    assert "exit status 3: started again from its newest checkpoint (retry 1 of 1)" in log
    assert log.count("'-train_from', '" + str(tmp_path / "flaky" / "model_step_1490.pt")) == 2
    assert (tmp_path / "flaky" / "train.done").exists() and not (tmp_path / "broken" / "train.done").exists()
    assert (tmp_path / "broken" / "train.log").read_text().count("piece on") == 2  # one start and one retry

    (tmp_path / "flaky" / "survived").unlink()
    (tmp_path / "flaky" / "train.done").unlink()
    with pytest.raises(SystemExit, match=r"\S*flaky \(exit status 3"):
        run_pieces(runs[:1], tmp_path, retries=0)


def test_a_run_has_one_trainer_at_a_time(tmp_path):
    """While a piece runs, its folder's train.pid names the trainer: a second runner given the same run
    refuses before starting anything (two trainers would write over each other's checkpoints); the
    marker goes when the piece ends, and one left by a trainer that died does not block the run."""
    import subprocess
    import sys

    check = [sys.executable, "-c", "import os, sys; d = sys.argv[1]\n"
             "pid = open(os.path.join(d, 'train.pid')).read().split()[0]\n"
             "open(os.path.join(d, 'seen'), 'w').write(pid)", str(tmp_path / "run")]
    (tmp_path / "run").mkdir()
    assert run_pieces([(tmp_path / "run", check)], tmp_path) == []
    assert (tmp_path / "run/seen").read_text().isdigit()  # the trainer's own pid, while it ran
    assert not (tmp_path / "run/train.pid").exists()
    (tmp_path / "run/train.done").unlink()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pieces_mod._mark_trainer(tmp_path / "run", other.pid)
        (tmp_path / "run/seen").unlink()
        with pytest.raises(SystemExit, match=rf"being trained by another runner: \S*run \(process {other.pid}\)"):
            run_pieces([(tmp_path / "run", check)], tmp_path)
        assert not (tmp_path / "run/seen").exists()
    finally:
        other.kill()
        other.wait()
    assert run_pieces([(tmp_path / "run", check)], tmp_path) == []  # its trainer is gone: the run goes on
    assert (tmp_path / "run/seen").exists()


def test_a_failed_piece_is_named_with_the_exception_that_ended_it_and_an_oom_with_the_gpus_sharers(tmp_path):
    """A GPU out of memory (four runs on one H200 did run out) is named in the run's train.log and on
    the console in one line, with how many runs shared the GPU, instead of a bare exit status."""
    import sys

    oom = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 356.00 MiB. GPU 0 has a total "
           "capacity of 139.80 GiB of which 342.38 MiB is free.\n")
    dies = [sys.executable, "-c", f"import sys; print({oom!r}); sys.exit(1)"]
    (tmp_path / "r").mkdir()
    with pytest.raises(SystemExit) as err:
        run_pieces([(tmp_path / "r", dies)], tmp_path, retries=1, gpus=[0])
    cause = ("exit status 1, torch.OutOfMemoryError: CUDA out of memory. (1 run(s) on GPU 0: fewer --jobs a "
             "GPU leave each more memory)")
    assert f"{cause}: started again from its newest checkpoint" in (tmp_path / "r" / "train.log").read_text()
    assert f"({cause}; see its train.log)" in str(err.value.code)
    assert pieces_mod.failure_of(tmp_path / "missing.log") is None
    # a later piece killed without a traceback is not named with the earlier piece's exception
    with open(tmp_path / "r" / "train.log", "a") as log:
        log.write("[reproduce] 2026-11-29 09:30:38 piece on cpu: onmt_train ...\n")
    assert pieces_mod.failure_of(tmp_path / "r" / "train.log") is None


def test_a_trainer_asked_to_stop_stays_stopped_and_is_returned_unfinished(tmp_path):
    """SIGTERM or Ctrl-C sent to one trainer (exit 128 + the signal once it saved its step) is a stop,
    not a failure: the run is not started again, and the same command resumes it later."""
    import sys

    (tmp_path / "r").mkdir()
    stops = [sys.executable, "-c", "import sys; sys.exit(143)"]
    assert run_pieces([(tmp_path / "r", stops)], tmp_path, retries=1) == [tmp_path / "r"]
    log = (tmp_path / "r" / "train.log").read_text()
    assert log.count("piece on") == 1 and "stopped by a signal" in log
    assert not (tmp_path / "r" / "train.done").exists()
    assert pieces_mod.was_asked_to_stop(-2) and not pieces_mod.was_asked_to_stop(-9)  # Ctrl-C, not the OOM killer


def test_interrupting_the_runner_stops_its_trainers_instead_of_orphaning_them(tmp_path):
    """The trainers run in sessions of their own, so the terminal's Ctrl-C reaches only the runner; it
    asks each trainer to save and stop (SIGTERM) before it exits, instead of leaving them training."""
    import signal
    import subprocess
    import sys
    import time

    trainer = ("import signal, sys, time, pathlib\n"
               "def stop(*a):\n"
               "    pathlib.Path(sys.argv[1], 'saved').write_text('step saved'); sys.exit(143)\n"
               "signal.signal(signal.SIGTERM, stop)\n"
               "pathlib.Path(sys.argv[1], 'started').write_text('')\n"
               "time.sleep(120)\n")
    run = tmp_path / "r"
    run.mkdir()
    runner = (f"import sys; sys.path.insert(0, {str(ROOT / 'scripts' / 'reproduce')!r})\n"
              "from pathlib import Path; import pieces\n"
              f"pieces.run_pieces([(Path({str(run)!r}), [sys.executable, '-c', {trainer!r}, {str(run)!r}])], "
              f"Path({str(tmp_path)!r}))\n")
    # (as from a terminal: a suite started in the background by a shell inherits SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler)
    proc = subprocess.Popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for _ in range(300):
        if (run / "started").exists():
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert (run / "saved").read_text() == "step saved"
    assert "the same command resumes them" in out
