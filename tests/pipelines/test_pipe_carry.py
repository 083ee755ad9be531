"""reproduce.py pack / unpack (carry.py): a run's resumable state leaves a time-limited machine in
batches small enough for its transfer limits and comes back whole, checked, on the next one."""
import argparse
import json
import re
import shutil

import pytest
import torch

import carry
import experiments as E
import pieces
from pieces import best_checkpoint, latest_checkpoint, step_of
from pipeline_helpers import load_script
from steps import common
from steps.run_files import checkpoint_file
from steps.train import build_vocab, train_all

from onmt_entmax.analysis.checkpoint import load_checkpoint

rep = load_script("scripts/reproduce/reproduce.py")
RUN = "runs/peters2019-sigmorphon/medium/out1-attn1/seed1"  # an experiment's run folder (CLI test)


def _checkpoint(path, step):
    torch.save({"model": {"w": torch.full((3000,), float(step))}, "opt": argparse.Namespace(seed=1),
                "vocab": {"src": ["a", "b"]}, "optim": {"training_step": step, "exp_avg": torch.randn(6000)}}, path)


def _run(work, valid=((1, 50.0), (2, 60.0), (3, 55.0)), done=False, scored=None, name=RUN):
    d = work / name
    d.mkdir(parents=True)
    log = []
    for step, acc in valid:
        log += [f"[..] Validation accuracy: {acc}", f"[..] Saving checkpoint {d}/model_step_{step}.pt"]
        _checkpoint(d / f"model_step_{step}.pt", step)
    (d / "train.log").write_text("\n".join(log) + "\n")
    if done:
        (d / "train.done").write_text("")
    if scored is not None:
        (d / "scores.json").write_text(json.dumps({"step": scored, "accuracy": 1.0, "decode": []}))
    return d


def _manifest_files(folder):
    return json.loads((folder / carry.MANIFEST).read_text())["files"]


def _carried(folders):
    return sorted({e["path"].rsplit("/", 1)[1] for f in folders for e in _manifest_files(f)})


def test_an_unfinished_run_travels_in_small_batches_and_resumes_and_evaluates_on_the_next_machine(tmp_path):
    here, there = tmp_path / "lease1", tmp_path / "lease2"
    run = _run(here)  # best validation at step 2 (not scored yet), newest checkpoint step 3
    newest = (run / "model_step_3.pt").read_bytes()
    folders = carry.pack([run], here, tmp_path / "out", part_bytes=20_000, batch_files=3, batch_bytes=120_000)
    assert len(folders) > 1
    for folder in folders:
        files = list(folder.iterdir())
        assert len(files) <= 3 and sum(f.stat().st_size for f in files) <= 120_000
        assert all(re.fullmatch(r"[A-Za-z0-9._-]+", f.name) for f in files)
    assert _carried(folders) == ["model_step_2.pt", "model_step_3.pt", "train.log"]
    shutil.rmtree(here)  # the lease is over: nothing of it is left
    written = carry.unpack(list(reversed(folders)), there)  # batches in any order
    moved = there / RUN
    assert len(written) == 3 and (moved / "model_step_3.pt").read_bytes() == newest  # Adam and all, to resume
    assert latest_checkpoint(moved) == moved / "model_step_3.pt"
    best = checkpoint_file(moved, best_checkpoint((moved / "train.log").read_text())[0])
    assert best == moved / "model_step_2.pt"  # the logged path was the old machine's
    weights = load_checkpoint(best)
    assert "optim" not in weights and torch.equal(weights["model"]["w"], torch.full((3000,), 2.0))
    assert carry.unpack(folders, there) == []  # again: the same files are already there


def test_a_finished_or_scored_run_carries_only_what_it_still_needs(tmp_path):
    finished = _run(tmp_path, done=True, scored=2, name="runs/t/finished/seed1")
    folders = carry.pack([finished], tmp_path, tmp_path / "a")
    assert _carried(folders) == ["scores.json", "train.done", "train.log"]
    scored = _run(tmp_path, scored=2, name="runs/t/scored/seed1")  # best already decoded: newest only
    assert _carried(carry.pack([scored], tmp_path, tmp_path / "b")) == ["model_step_3.pt", "scores.json", "train.log"]
    assert _carried(carry.pack([scored], tmp_path, tmp_path / "b2", with_best=True)) == \
        ["model_step_2.pt", "model_step_3.pt", "scores.json", "train.log"]  # for analyses on the next machine
    before = _run(tmp_path, scored=2, name="runs/t/before/seed1")  # scored before evaluate recorded its
    (before / "scores.json").write_text(json.dumps({"step": 2, "accuracy": 1.0}))  # decoding: done again
    assert _carried(carry.pack([before], tmp_path, tmp_path / "d")) == \
        ["model_step_2.pt", "model_step_3.pt", "scores.json", "train.log"]
    (before / "model_step_2.pt").unlink()  # ... unless its checkpoint is gone: the older scores travel
    assert _carried(carry.pack([before], tmp_path, tmp_path / "e")) == ["model_step_3.pt", "scores.json", "train.log"]
    lost = _run(tmp_path, name="runs/t/lost/seed1")
    (lost / "model_step_2.pt").unlink()  # unscored best gone: refused by name, not silently dropped
    with pytest.raises(carry.CarryError, match="model_step_2.pt"):
        carry.pack([lost], tmp_path, tmp_path / "c")


def test_unpack_never_writes_over_a_file_and_names_a_corrupt_or_missing_part(tmp_path):
    run = _run(tmp_path / "a")
    folders = carry.pack([run], tmp_path / "a", tmp_path / "out", part_bytes=20_000, batch_files=3,
                         batch_bytes=120_000)
    there = tmp_path / "b"
    (there / RUN).mkdir(parents=True)
    (there / RUN / "train.log").write_text("another run\n")
    with pytest.raises(carry.CarryError, match="train.log: exists with other content"):
        carry.unpack(folders, there)
    assert (there / RUN / "train.log").read_text() == "another run\n" and not (there / RUN / "model_step_3.pt").exists()
    with pytest.raises(carry.CarryError, match="part\\(s\\) missing.*no run came whole"):
        carry.unpack(folders[:1], tmp_path / "c")
    part = next(p for p in folders[-1].iterdir() if p.name != carry.MANIFEST)
    part.write_bytes(part.read_bytes()[:-1] + b"x")
    with pytest.raises(carry.CarryError, match="do not match the manifest's sha256"):
        carry.unpack(folders, tmp_path / "d")
    with pytest.raises(carry.CarryError, match="not empty"):
        carry.pack([run], tmp_path / "a", tmp_path / "out")
    (tmp_path / "a_file").write_text("x\n")
    for to in (tmp_path / "a_file", tmp_path / "a_file" / "x"):  # the same words for the folder or one above it
        says = f"{to}: {tmp_path / 'a_file'} is a file, not a folder"
        with pytest.raises(carry.CarryError, match=re.escape(says)):
            carry.pack([run], tmp_path / "a", to)


def test_unpack_replaces_a_log_that_the_carried_one_continues(tmp_path):
    """After a lease the carried train.log is this machine's log plus the lines of the piece trained
    there: it replaces the one here (nothing of it is lost) with the new checkpoints beside it."""
    run = _run(tmp_path / "a")
    log = (run / "train.log").read_text()
    folders = carry.pack([run], tmp_path / "a", tmp_path / "out")
    there = tmp_path / "b" / RUN
    there.mkdir(parents=True)
    (there / "train.log").write_text(log[: len(log) // 2])  # the log as the previous piece left it
    assert there / "train.log" in carry.unpack(folders, tmp_path / "b")
    assert (there / "train.log").read_text() == log and (there / "model_step_3.pt").exists()


@pytest.mark.parametrize("here, continues", [
    (b"abcdefg", True),  # ends inside the third part
    (b"abcdef", True),  # ends where a part ends
    (b"a", True),
    (b"abcdeX", False),  # differs in the second part
    (b"abcdefghX", False),  # the same length, other content: another file
    (b"abcdefghij", False),  # longer than the carried file
])
def test_a_file_here_is_continued_only_by_a_carried_file_that_starts_with_all_of_it(tmp_path, here, continues):
    pool = {}
    for name, data in (("p0", b"abc"), ("p1", b"def"), ("p2", b"ghi")):
        pool[name] = tmp_path / name
        pool[name].write_bytes(data)
    (tmp_path / "here").write_bytes(here)
    entry = {"size": 9, "parts": ["p0", "p1", "p2"]}
    assert carry._continues(entry, pool, tmp_path / "here") is continues


def test_each_batch_brings_its_runs_back_whole_when_the_others_are_lost(tmp_path, capsys):
    """A lease can end between two returns: the runs of each batch that came are unpacked, a run is
    never unpacked in part (a log without its checkpoint), and the lost ones are named."""
    here = tmp_path / "lease1"
    runs = [_run(here, name=f"runs/t/r{i}/seed1") for i in range(3)]
    # more than a run packs (log, newest checkpoint, best without Adam), less than two runs
    one_run = sum(f.stat().st_size for f in runs[0].iterdir() if f.name != "model_step_1.pt")
    folders = carry.pack(runs, here, tmp_path / "out", part_bytes=20_000, batch_files=8,
                         batch_bytes=one_run + carry.MANIFEST_ROOM)
    assert len(folders) == 3
    assert [len({e["path"].split("/")[2] for e in _manifest_files(f)}) for f in folders] == [1, 1, 1]
    written = carry.unpack([folders[0], folders[2]], tmp_path / "lease2")  # batch-2 never came back
    assert {w.parent.parent.name for w in written} == {"r0", "r2"} and len(written) == 6
    assert not (tmp_path / "lease2/runs/t/r1").exists()
    assert "left out, its batch did not come: runs/t/r1/seed1 (batch 2)" in capsys.readouterr().err
    spanning = carry.pack(runs[:1], here, tmp_path / "big", part_bytes=20_000, batch_files=3,
                          batch_bytes=120_000)  # one run over several batches: none of them alone is the run
    assert len(spanning) > 1
    for folder in spanning:
        with pytest.raises(carry.CarryError, match="no run came whole"):
            carry.unpack([folder], tmp_path / "lease3")
    assert not (tmp_path / "lease3").exists()


def test_runs_larger_than_a_batch_fill_the_batches_and_a_small_run_beside_them_still_comes_whole(tmp_path, capsys):
    """Resumable runs are larger than one return (checkpoint with Adam + best weights): each starts in the
    room the batch before it left, so the pack takes as many batches as its bytes need, and a batch that
    also holds a whole small run brings that run back alone."""
    here = tmp_path / "lease1"
    small = _run(here, done=True, scored=2, name="runs/t/a/seed1")  # log, done, scores: a few hundred bytes
    big = [_run(here, name=f"runs/t/b{i}/seed1") for i in range(3)]  # log, newest, best: ~3 x 25 KB each
    part, batch = 20_000, 50_000 + carry.MANIFEST_ROOM
    folders = carry.pack([small, *big], here, tmp_path / "out", part_bytes=part, batch_files=8, batch_bytes=batch)
    sent = sum(f.stat().st_size for d in folders for f in d.iterdir() if f.name != carry.MANIFEST)
    assert len(folders) == -(-sent // (batch - carry.MANIFEST_ROOM))  # no batch left half empty
    for folder in folders:
        assert (sum(f.stat().st_size for f in folder.iterdir() if f.name != carry.MANIFEST)
                <= batch - carry.MANIFEST_ROOM)
    written = carry.unpack([folders[0]], tmp_path / "lease2")  # only the first batch came back
    assert {w.parent.parent.name for w in written} == {"a"} and len(written) == 3
    assert "left out, its batch did not come: runs/t/b0/seed1" in capsys.readouterr().err
    written = carry.unpack(folders, tmp_path / "lease2")  # then all of them: every run whole, checked
    assert {w.parent.parent.name for w in written} == {"b0", "b1", "b2"}
    for run in big:
        for f in ("train.log", "model_step_3.pt"):
            rel = run.relative_to(here) / f
            assert (tmp_path / "lease2" / rel).read_bytes() == (here / rel).read_bytes()


def test_batches_of_two_packs_unpack_together_and_a_corrupt_file_writes_nothing(tmp_path):
    """Two leases' returns (their part names repeat: f0000-p000 ...) are unpacked in one command, each
    file joined from its own pack; when one file is corrupt no file of any run is put in place."""
    here = tmp_path / "lease1"
    first = carry.pack([_run(here, done=True, scored=2, name="runs/t/a/seed1")], here, tmp_path / "p1")
    second = carry.pack([_run(here, name="runs/t/b/seed1")], here, tmp_path / "p2")
    assert {p.name for p in first[0].iterdir()} & {p.name for p in second[0].iterdir()} - {carry.MANIFEST}
    written = carry.unpack([*first, *second], tmp_path / "lease2")
    assert len(written) == 6  # a: log, done, scores; b: log, newest checkpoint, best weights
    for rel in ("runs/t/a/seed1/train.log", "runs/t/b/seed1/train.log", "runs/t/b/seed1/model_step_3.pt"):
        assert (tmp_path / "lease2" / rel).read_bytes() == (here / rel).read_bytes()
    part = next(p for p in sorted(second[-1].iterdir()) if p.name != carry.MANIFEST and p.stat().st_size > 100)
    part.write_bytes(part.read_bytes()[:-1] + b"x")
    with pytest.raises(carry.CarryError, match="do not match the manifest's sha256"):
        carry.unpack([*first, *second], tmp_path / "lease3")
    assert not [f for f in (tmp_path / "lease3").rglob("*") if f.is_file()]


def test_pack_and_unpack_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "WORK", tmp_path / "lease1")
    _run(tmp_path / "lease1")
    rep.main(["pack", "peters2019-table1", "--only", "medium/out1-attn1", "--seeds", "1", "--to",
              str(tmp_path / "out"), "--part-mib", "0.02", "--batch-mib", "0.12", "--batch-files", "3"])
    assert "pack: 1 run(s) in" in capsys.readouterr().out
    with pytest.raises(SystemExit,
                       match=r"^pack: a batch must hold the manifest .*--part-mib 1 \(at most --batch-mib 0.5 "):
        rep.main(["pack", "peters2019-table1", "--only", "medium/out1-attn1", "--seeds", "1", "--to",
                  str(tmp_path / "out2"), "--part-mib", "1", "--batch-mib", "0.5"])
    monkeypatch.setattr(common, "WORK", tmp_path / "lease2")
    rep.main(["unpack", "--from", str(tmp_path / "out")])
    assert "unpack: 3 file(s) written" in capsys.readouterr().out
    assert (tmp_path / "lease2" / RUN / "model_step_3.pt").exists()
    with pytest.raises(SystemExit, match="unpack: .*exists with other content"):
        (tmp_path / "lease2" / RUN / "train.log").write_text("changed\n")
        rep.main(["unpack", "--from", str(tmp_path / "out")])


def test_a_finished_seed_carries_its_best_checkpoint_until_its_ensemble_holds_it(tmp_path, monkeypatch, capsys):
    """Table 1's ens. column averages the seeds' best checkpoints: one left on the machine that scored it is
    lost with the lease, and the run would have to be trained again to decode the ensemble."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    run = _run(tmp_path, done=True, scored=2)
    scores = {"step": 2, "accuracy": 80.0, "decode": [], "checkpoint": f"/elsewhere/{RUN}/model_step_2.pt"}
    (run / "scores.json").write_text(json.dumps(scores))
    pack = ["pack", "peters2019-table1", "--only", "medium/out1-attn1", "--seeds", "1", "--to"]
    rep.main(pack + [str(tmp_path / "a")])
    assert "out1-attn1/seed1: its best checkpoint goes too" in capsys.readouterr().err
    assert _carried(sorted((tmp_path / "a").iterdir())) == ["model_step_2.pt", "scores.json", "train.done", "train.log"]
    ensemble = run.parent / "ensemble"
    ensemble.mkdir()
    (ensemble / "scores.json").write_text(json.dumps({"accuracy": 81.0, "checkpoints": [
        f"/elsewhere/{RUN}/model_step_2.pt", "/elsewhere/x/seed2/model_step_9.pt"]}))
    rep.main(pack + [str(tmp_path / "b")])  # the ensemble holds it: the small pack of a finished run
    assert "best checkpoint goes too" not in capsys.readouterr().err
    assert _carried(sorted((tmp_path / "b").iterdir())) == ["scores.json", "train.done", "train.log"]
    (ensemble / "scores.json").unlink()
    (run / "model_step_2.pt").unlink()  # gone already (decoded elsewhere): nothing to carry, nothing refused
    rep.main(pack + [str(tmp_path / "c")])
    assert _carried(sorted((tmp_path / "c").iterdir())) == ["scores.json", "train.done", "train.log"]


def test_a_decoded_ensemble_comes_back_with_its_seeds(tmp_path, monkeypatch, capsys):
    """An ensemble decoded on a lent machine holds its seeds' best checkpoints, which therefore stay
    behind: its scores.json is all that is left of it, and record reads it on the next machine."""
    lease, home = tmp_path / "lease", tmp_path / "home"
    monkeypatch.setattr(common, "WORK", lease)
    run = _run(lease, done=True, scored=2)
    ensemble = run.parent / "ensemble"
    ensemble.mkdir()
    scores = {"accuracy": 81.0, "checkpoints": [f"/elsewhere/{RUN}/model_step_2.pt", "/x/seed2/model_step_9.pt"]}
    (ensemble / "scores.json").write_text(json.dumps(scores))
    rep.main(["pack", "peters2019-table1", "--only", "medium/out1-attn1", "--seeds", "1", "--to", str(tmp_path / "p")])
    assert "pack: 1 run(s) and 1 ensemble(s) in 1 batch(es)" in capsys.readouterr().out
    carried = {e["path"] for f in (tmp_path / "p").iterdir() for e in _manifest_files(f)}
    assert f"{run.parent.relative_to(lease).as_posix()}/ensemble/scores.json" in carried
    monkeypatch.setattr(common, "WORK", home)
    rep.main(["unpack", "--from", str(tmp_path / "p" / "batch-1")])
    assert json.loads((home / RUN).parent.joinpath("ensemble", "scores.json").read_text()) == scores
    monkeypatch.setattr(common, "WORK", lease)
    (ensemble / "scores.json").unlink()  # a configuration without a decoded ensemble packs its runs alone
    rep.main(["pack", "peters2019-table1", "--only", "medium/out1-attn1", "--seeds", "1", "--to", str(tmp_path / "q")])
    assert "pack: 1 run(s) in 1 batch(es)" in capsys.readouterr().out


def test_what_cannot_be_redone_is_packed_first(tmp_path, monkeypatch, capsys):
    """Returns come back one batch at a time and a lease can end between two: the decoded ensembles and
    the finished runs' scores (small, and lost for good) fill the first batch, before an unfinished
    run's checkpoints (which lose only progress)."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    unfinished = _run(tmp_path)  # medium/out1-attn1 seed 1, named first
    finished = _run(tmp_path, done=True, scored=3, name=RUN.replace("seed1", "seed2"))
    (finished / "scores.json").write_text(json.dumps({"step": 3, "accuracy": 80.0, "decode": [],
                                                      "checkpoint": f"{finished}/model_step_3.pt"}))
    ensemble = unfinished.parent / "ensemble"
    ensemble.mkdir()
    (ensemble / "scores.json").write_text(json.dumps({"accuracy": 81.0, "checkpoints": ["/x/seed2/model_step_3.pt",
                                                                                        "/x/seed3/model_step_9.pt"]}))
    rep.main(["pack", "peters2019-table1", "--only", "medium/out1-attn1", "--seeds", "1", "2", "--to",
              str(tmp_path / "p"), "--part-mib", "0.02", "--batch-mib", "0.12", "--batch-files", "8"])
    first = [e["path"].split("/")[-2:] for e in _manifest_files(tmp_path / "p" / "batch-1")]
    assert first[:4] == [["ensemble", "scores.json"], ["seed2", "train.log"], ["seed2", "train.done"],
                         ["seed2", "scores.json"]]
    assert all(folder != "seed1" for folder, _ in first)


@pytest.mark.skipif(shutil.which("onmt_train") is None, reason="needs onmt_train")
def test_a_run_cut_by_one_machine_continues_on_the_next(tmp_path, monkeypatch):
    """The lease workflow end to end: a time limit stops a run on machine A, `pack` takes it off, the
    machine goes away, `unpack` puts it on machine B, and the same `train` continues it there from the
    carried checkpoint, early-stopping state included, to its end."""
    import yaml

    from pipeline_helpers import ROOT

    config = ROOT / "configs/smoke/peters2019-sigmorphon.yaml"
    cfg = yaml.safe_load(config.read_text())
    e = E.Experiment("smoke", "carried", cfg, "sigsample", "src", "tgt", "peters2019-table1", "x", "medium",
                     "sigmorphon")
    monkeypatch.setattr(E.Experiment, "path", property(lambda self: str(config)))
    often = ["-save_checkpoint_steps", "5", "-valid_steps", "5", "-keep_checkpoint", "-1", "-early_stopping", "50",
             "-early_stopping_criteria", "accuracy"]
    machine_a, machine_b = tmp_path / "a", tmp_path / "b"
    for work in (machine_a, machine_b):
        work.mkdir()
        (work / "data").symlink_to(ROOT / "data")
    monkeypatch.setattr(common, "WORK", machine_a)
    build_vocab(cfg, config)
    run_a = machine_a / "runs/smoke/carried/seed1"
    assert train_all([(e, 1)], None, ["-train_steps", "1000000", *often], max_minutes=0.3) == [run_a]
    step = step_of(latest_checkpoint(run_a))
    # the time limit's SIGTERM let the step under way finish and saved there: no trained step lost
    assert f"SIGTERM: stopping after step {step}; its checkpoint is saved next" in (run_a / "train.log").read_text()
    carry.pack([run_a], machine_a, tmp_path / "out", part_bytes=400_000, batch_files=4, batch_bytes=1_000_000)
    shutil.copytree(machine_a / "work", machine_b / "work")  # the vocabulary, as the data step makes it
    shutil.rmtree(machine_a)
    monkeypatch.setattr(common, "WORK", machine_b)
    carry.unpack([tmp_path / "out"], machine_b)
    run_b = machine_b / "runs/smoke/carried/seed1"
    assert train_all([(e, 1)], None, ["-train_steps", str(step + 5), *often]) == []
    log = (run_b / "train.log").read_text()
    assert f"-train_from {run_b / f'model_step_{step}.pt'}" in log and (run_b / "train.done").exists()
    # (the state is carried whether or not machine A reached its first validation in its time: a slow
    # machine stops before it, and the best is then still -inf)
    assert re.search(r"early stopping resumed: best acc (-inf|[\d.]+) at step \d+, patience \d+/50", log)
    assert latest_checkpoint(run_b).name == f"model_step_{step + 5}.pt"


def test_a_run_being_trained_is_not_packed_until_its_trainer_has_ended(tmp_path):
    """pack would carry (or, as cut short, remove) the checkpoint a running trainer is writing: while
    the run's train.pid names a live trainer, pack refuses it by name; a marker left by a trainer that
    has ended does not stop it."""
    import subprocess
    import sys

    d = _run(tmp_path)
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pieces._mark_trainer(d, trainer.pid)
        with pytest.raises(carry.CarryError, match=rf"seed1: being trained now \(process {trainer.pid}\)"):
            carry.pack([d], tmp_path, tmp_path / "out")
        assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    finally:
        trainer.kill()
        trainer.wait()
    assert pieces.trainer_of(d) is None  # the same marker, its process gone
    carry.pack([d], tmp_path, tmp_path / "out")
    assert "model_step_3.pt" in _carried(sorted((tmp_path / "out").glob("batch-*")))


def _edited(folder, edit):
    """The manifest of ``folder`` replaced by ``edit(manifest)`` (bytes are written as they are)."""
    manifest = json.loads((folder / carry.MANIFEST).read_text())
    new = edit(manifest)
    (folder / carry.MANIFEST).write_bytes(new if isinstance(new, bytes) else json.dumps(new).encode())


@pytest.mark.parametrize("edit,says", [
    (lambda m: b"\x89PNG\r\n\x1a\n\x00\xff", "not JSON"),
    (lambda m: b'{"format": 2, "files": [', "not JSON"),
    (lambda m: [m], "not a batch's manifest"),
    (lambda m: {k: v for k, v in m.items() if k != "files"}, "no 'files' list"),
    (lambda m: {**m, "files": [{**m["files"][0], "path": ""}]}, "the path '' is empty"),
    (lambda m: {**m, "files": [{**m["files"][0], "path": "."}]}, "the path '.' is not a file inside"),
    (lambda m: {**m, "files": [{**m["files"][0], "path": "runs/x/"}]}, "is not a file inside"),
    (lambda m: {**m, "files": [{**m["files"][0], "path": "runs/a\0b"}]}, "NUL"),
    (lambda m: {**m, "files": [{**m["files"][0], "path": "runs"}]}, "runs is a folder under"),
    (lambda m: {**m, "files": [{"path": "runs/x"}]}, "without path, size, sha256 and parts"),
], ids=["binary", "cut", "a list", "no files", "empty path", "dot", "folder path", "NUL", "a folder here",
        "no sha256"])
def test_unpack_refuses_a_manifest_it_cannot_trust_in_one_line_writing_nothing(tmp_path, edit, says):
    """Each was a traceback (JSONDecodeError, KeyError, IsADirectoryError, ValueError: embedded null byte)."""
    folders = carry.pack([_run(tmp_path / "a", valid=((1, 50.0),))], tmp_path / "a", tmp_path / "out")
    _edited(folders[0], edit)
    there = tmp_path / "b"
    (there / "runs").mkdir(parents=True)
    with pytest.raises(carry.CarryError) as err:
        carry.unpack(folders, there)
    assert says in str(err.value) and "\n" not in str(err.value)
    assert [p.name for p in there.rglob("*")] == ["runs"]
