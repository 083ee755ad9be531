"""reproduce.py status (steps/status.py): where each run and each configuration's ensemble stands."""
import json
import os

import pytest

import experiments as E
import results_csv
from pipeline_helpers import load_script
from reproduce_helpers import evaluated_run
from steps import common
from steps.status import print_ensemble_status, print_status

rep = load_script("scripts/reproduce/reproduce.py")


def test_status_says_where_each_run_stands(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1.5-attn1.5")
    evaluated_run(tmp_path, e, 1, 80.0, 1490 * 3)  # validations at 79, 80, 81; halved at the second; finished
    text = print_status("peters2019-table1", [1, 2], "medium/out1.5-attn1.5")
    assert "| medium/out1.5-attn1.5/seed1 | 3 | 81.00 (4470) | 0 / 10 | 0.0005 | yes |" in text
    assert "| medium/out1.5-attn1.5/seed2 | not started |" in text
    d = tmp_path / e.run_dir / "seed2"
    d.mkdir()
    (d / "train.log").write_text("[..] Step 100/149000; acc: 9; lr: 0.00100;\n")
    (d / "train.pid").write_text(f"{os.getpid()} -\n")  # a piece under way (this process stands in for its trainer)
    assert f"| medium/out1.5-attn1.5/seed2 | 0 | – | – / 10 | – | no (training now: process {os.getpid()}) |" \
        in print_status("peters2019-table1", [2], "medium/out1.5-attn1.5")
    monkeypatch.setattr(common, "WORK", tmp_path / "elsewhere")  # --runs: a carried copy, e.g. a lease's master
    assert "| medium/out1.5-attn1.5/seed1 | 3 | 81.00 (4470) |" in \
        print_status("peters2019-table1", [1], "medium/out1.5-attn1.5", runs=tmp_path)


def test_status_says_when_a_scored_checkpoint_is_not_here(tmp_path, monkeypatch):
    """A run decoded on another machine and carried back with its scores only cannot join its seeds'
    ensemble here: status says so before anyone plans to decode it."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1-attn1")
    evaluated_run(tmp_path, e, 1, 80.0, 2980)
    d = tmp_path / e.run_dir / "seed1"
    scores = json.loads((d / "scores.json").read_text())
    scores.update(step=2980, decode=[], checkpoint=f"/elsewhere/{e.run_dir}/seed1/model_step_2980.pt")
    (d / "scores.json").write_text(json.dumps(scores))
    assert "| 2980 (checkpoint not here) |" in print_status("peters2019-table1", [1], "medium/out1-attn1")
    (d / "model_step_2980.pt").write_bytes(b"")
    assert "| 2980 |" in print_status("peters2019-table1", [1], "medium/out1-attn1")


def test_status_says_where_each_configurations_ensemble_stands(tmp_path, monkeypatch, capsys):
    """Before a lease: which ensembles are decoded, and which seeds could join one here (a seed scored
    elsewhere, its best checkpoint left there, cannot; a seed not scored yet has nothing to give)."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1-attn1")
    for seed in (1, 2):
        evaluated_run(tmp_path, e, seed, 80.0, 2980)
        d = tmp_path / e.run_dir / f"seed{seed}"
        scores = json.loads((d / "scores.json").read_text())
        scores.update(step=2980, decode=[], checkpoint=f"/elsewhere/{e.run_dir}/seed{seed}/model_step_2980.pt")
        (d / "scores.json").write_text(json.dumps(scores))
    (tmp_path / e.run_dir / "seed1" / "model_step_2980.pt").write_bytes(b"")  # seed 2's stayed elsewhere
    status = print_ensemble_status("peters2019-table1", [1, 2, 3], "medium/out1-attn1")
    assert status.splitlines()[-1] == "| medium/out1-attn1 | – | 1 | 2 | 3 |"
    (tmp_path / e.run_dir / "ensemble").mkdir()
    (tmp_path / e.run_dir / "ensemble" / "scores.json").write_text(json.dumps({"accuracy": 81.5, "checkpoints": [
        f"/elsewhere/{e.run_dir}/seed{s}/model_step_2980.pt" for s in (1, 2)]}))
    rep.main(["status", "peters2019-table1", "--only", "medium/out1-attn1", "--seeds", "1", "2", "3"])
    out = capsys.readouterr().out
    assert "| medium/out1-attn1/seed3 | not started |" in out
    assert "| medium/out1-attn1 | 1, 2: 81.50 | 1 | 2 | 3 |" in out


def test_status_says_whether_a_finished_run_met_the_stop_rule_or_the_step_cap(tmp_path, monkeypatch):
    """A finished run converged when its patience ran out, not when it reached train_steps."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1.5-attn1.5")
    d = tmp_path / e.run_dir / "seed1"
    d.mkdir(parents=True)
    (d / "train.done").write_text("")

    def log(accuracies, last_step):
        steps = range(last_step - 1490 * (len(accuracies) - 1), last_step + 1, 1490)
        (d / "train.log").write_text("".join(
            f"[..] Step {s}/149000; acc: 80.0; lr: 0.00100;\n[..] Validation accuracy: {a}\n"
            f"[..] Saving checkpoint {d}/model_step_{s}.pt\n" for s, a in zip(steps, accuracies)))
        return print_status("peters2019-table1", [1], "medium/out1.5-attn1.5")

    assert "| 10 / 10 | 0.001 | stop rule |" in log([97.0] + [96.9] * 10, 1490 * 60)
    assert "| 9 / 10 | 0.001 | step cap |" in log([97.0] + [96.9] * 9, 149000)
    assert "| 0 / 10 | 0.001 | yes |" in log([96.0, 97.0], 1490 * 30)  # stopped by something else
    (d / "train.done").unlink()
    assert "| 0 / 10 | 0.001 | no |" in log([96.0, 97.0], 1490 * 30)


def test_status_says_how_fast_the_last_piece_trained_and_how_long_the_rest_takes(tmp_path, monkeypatch):
    """To plan the next lease: steps/s of the last piece (an earlier, slower piece left out) and the
    minutes from the newest checkpoint to the step cap at that rate."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1.5-attn1.5")
    d = tmp_path / e.run_dir / "seed1"
    d.mkdir(parents=True)
    (d / "train.log").write_text(
        "[reproduce] 2026-11-28 10:00:00 piece on NVIDIA H100 80GB HBM3: onmt_train\n"
        "[2026-11-28 10:00:10,000 INFO] Step 500/149000; acc: 50.0; lr: 0.00100;\n"
        "[2026-11-28 10:01:50,000 INFO] Step 1000/149000; acc: 60.0; lr: 0.00100;\n"  # 5 steps/s
        "[2026-11-28 10:01:55,000 INFO] Validation accuracy: 90.0\n"
        "[2026-11-28 10:01:56,000 INFO] Saving checkpoint /r/model_step_1490.pt\n"
        "[reproduce] 2026-11-28 11:00:00 piece on NVIDIA H200: onmt_train\n"
        "[2026-11-28 11:00:10,000 INFO] Step 1500/149000; acc: 70.0; lr: 0.00100;\n"
        "[2026-11-28 11:00:20,000 INFO] Validation accuracy: 91.0\n"
        "[2026-11-28 11:00:21,000 INFO] Saving checkpoint /r/model_step_2980.pt\n"
        "[2026-11-28 11:00:35,500 INFO] Step 3500/149000; acc: 80.0; lr: 0.00100;\n")  # 2000 in 25.5 s
    assert results_csv.last_piece_rate((d / "train.log").read_text()) == pytest.approx(2000 / 25.5)
    row = print_status("peters2019-table1", [1], "medium/out1.5-attn1.5").splitlines()[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-2:] == [f"{2000 / 25.5:.1f}", f"{(149000 - 2980) / (2000 / 25.5) / 60:.1f}"]
    (d / "train.log").write_text("[reproduce] 2026-11-28 11:00:00 piece on NVIDIA H200: onmt_train\n"
                                 "[2026-11-28 11:00:10,000 INFO] Step 500/149000; acc: 70.0; lr: 0.00100;\n")
    assert results_csv.last_piece_rate((d / "train.log").read_text()) is None  # one report: no rate yet
    assert print_status("peters2019-table1", [1], "medium/out1.5-attn1.5").endswith("| – | – |")
