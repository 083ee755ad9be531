"""reproduce.py evaluate (steps/evaluate.py, steps/decode.py): the best-validation checkpoint decoded and scored, again
only when it or the decoding options changed, and the seeds' ensemble."""
import json
from pathlib import Path

import pytest

import experiments as E
import pieces as pieces_mod
import results_csv
from pieces import best_checkpoint, scored_step
from reproduce_helpers import LOG, train_log
from steps import common, decode
from steps.decode import score
from steps.evaluate import evaluate


def test_best_checkpoint_is_the_highest_validation_accuracy():
    assert best_checkpoint(LOG) == ("runs/x/seed1/model_step_1000.pt", 70.25)
    with pytest.raises(ValueError, match="valid_steps"):
        best_checkpoint("[..] Saving checkpoint m_step_5.pt\n")


def test_of_equal_best_validations_the_first_checkpoint_is_decoded_as_the_run_summary_says():
    log = LOG.replace("69.0", "70.25")  # steps 1000 and 1500 validate equally
    path, acc = best_checkpoint(log)
    curve = [{"epoch": f"{i}.0", "step": str(500 * i), "valid_acc": a, "lr": "0.001"}
             for i, a in enumerate(["61.5", "70.25", "70.25"], 1)]
    run = {"epochs": "3.0", "steps": "1500", "valid_acc": "70.25", "test_acc": "1", "test_lev": "1"}
    assert (path, acc) == ("runs/x/seed1/model_step_1000.pt", 70.25)
    assert pieces_mod.step_of(path) == results_csv.run_summary(run, curve, 1500)["best_step"]


def test_sigmorphon_scores_from_prediction_file(tmp_path):
    e = E.sigmorphon("medium", 1.5, 1.5)
    (tmp_path / "src-test.txt").write_text("english V d r a w\nhebrew V ז ז\nhebrew N a\n")
    (tmp_path / "tgt-test.txt").write_text("d r a w n\nז ו ז ו\nb\n")
    (tmp_path / "pred.txt").write_text("d r a w n\nז ו ז ו\nc\n")
    scores = score(e, tmp_path / "pred.txt", data=tmp_path)
    assert scores["accuracy"] == pytest.approx((100 + 50) / 2)
    assert scores["per_language"]["hebrew"]["levenshtein"] == 0.5


def test_mt_scores_remove_bpe_and_use_both_references(tmp_path):
    e = E.peters_mt("de-en", 1.5, 1.5)
    (tmp_path / "prepare.json").write_text(json.dumps({"recipe": {"lowercase": False}}))
    (tmp_path / "test.tok.en").write_text("It 's a small house , isn 't it ?\n")
    (tmp_path / "test.raw.en").write_text("It's a small house, isn't it?\n")
    (tmp_path / "pred.txt").write_text("It 's a sm@@ all house , isn 't it ?\n")
    scores = score(e, tmp_path / "pred.txt", data=tmp_path)
    assert scores["tokenized_bleu"] == pytest.approx(100.0)
    assert scores["sacrebleu"] == pytest.approx(100.0) and "tok:13a" in scores["signature"]


def test_evaluation_is_redone_when_a_resumed_run_has_a_newer_best_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "multi30k-transformer" and x.name == "de-en/entmax15")
    run_dir = tmp_path / e.run_dir / "seed1"
    decoded = []
    monkeypatch.setattr(decode, "translate",
                        lambda models, src, out, gpu, extra=(), cwd=None: decoded.append(models[0]))
    monkeypatch.setattr(decode, "score", lambda e, pred: {"sacrebleu": 1.0})
    train_log(run_dir, 50.0)
    evaluate(e, [1], None)
    evaluate(e, [1], None)  # nothing new: not decoded again
    with open(run_dir / "train.log", "a") as log:  # a later piece validated a better checkpoint
        log.write(f"[..] Validation accuracy: 60.0\n[..] Saving checkpoint {run_dir}/model_step_10.pt\n")
    (run_dir / "model_step_10.pt").write_bytes(b"")
    evaluate(e, [1], None)
    assert [Path(d).name for d in decoded] == ["model_step_5.pt", "model_step_10.pt"]
    assert json.loads((run_dir / "scores.json").read_text())["step"] == 10


def test_the_papers_runs_decode_as_its_fork_and_older_scores_are_redone(tmp_path, monkeypatch):
    """Peters et al.'s runs decode with the options of their fork's translate (no length-ratio cap, no
    length penalty): scores.json says so, and one scored before it did is decoded again."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1.5-attn1.5")
    run_dir = tmp_path / e.run_dir / "seed1"
    calls = []
    monkeypatch.setattr(decode, "translate",
                        lambda models, src, out, gpu, extra=(), cwd=None: calls.append(list(extra)))
    monkeypatch.setattr(decode, "score", lambda e, pred: {"accuracy": 80.0})
    train_log(run_dir, 50.0)
    (run_dir / "scores.json").write_text(json.dumps({"checkpoint": str(run_dir / "model_step_5.pt"), "step": 5}))
    evaluate(e, [1], None)
    evaluate(e, [1], None)
    assert calls == [["-max_length_ratio", "0", "-length_penalty", "none"]]
    assert json.loads((run_dir / "scores.json").read_text())["decode"] == calls[0]
    assert scored_step(run_dir) == 5
    assert all(x.decode == E.PAPER_DECODE for x in E.all_experiments() if x.family.startswith("peters2019"))
    assert all(x.decode == () for x in E.all_experiments() if x.family == "multi30k-transformer")


def test_a_run_carried_without_its_best_checkpoint_keeps_its_scores_and_is_skipped_by_name(tmp_path, monkeypatch,
                                                                                        capsys):
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1-attn1")
    run_dir = tmp_path / e.run_dir / "seed1"
    monkeypatch.setattr(decode, "translate", lambda *a, **k: pytest.fail("nothing to decode"))
    train_log(run_dir, 50.0)
    (run_dir / "model_step_5.pt").unlink()
    old = json.dumps({"checkpoint": str(run_dir / "model_step_5.pt"), "step": 5, "accuracy": 70.0})
    (run_dir / "scores.json").write_text(old)
    evaluate(e, [1], None)
    assert (run_dir / "scores.json").read_text() == old and "model_step_5.pt is not on this machine" in \
        capsys.readouterr().err


def _medium_run_decoding(tmp_path, monkeypatch):
    """Table 1's medium out1-attn1 under ``tmp_path``, decoding stubbed to record each call's number of models
    (scored 80.0): (the experiment, that list)."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1-attn1")
    decoded = []
    monkeypatch.setattr(decode, "translate",
                        lambda models, src, out, gpu, extra=(), cwd=None: decoded.append(len(models)))
    monkeypatch.setattr(decode, "score", lambda e, pred: {"accuracy": 80.0})
    return e, decoded


def test_evaluating_some_seeds_beside_a_scored_one_decodes_each_but_not_their_partial_ensemble(tmp_path, monkeypatch,
                                                                                               capsys):
    e, decoded = _medium_run_decoding(tmp_path, monkeypatch)
    for seed in (1, 2, 3):
        train_log(tmp_path / e.run_dir / f"seed{seed}", 50.0)
    evaluate(e, [1], None)
    evaluate(e, [2, 3], None)  # seed 1 is scored: an ensemble of 2 and 3 would be no column's
    assert decoded == [1, 1, 1] and not (tmp_path / e.run_dir / "ensemble").exists()
    assert "leave out the scored seed1" in capsys.readouterr().err
    evaluate(e, [1, 2, 3], None)  # all three: only their ensemble is new
    assert decoded == [1, 1, 1, 3]


def test_an_ensemble_is_not_decoded_while_a_seed_given_is_not_trained_here(tmp_path, monkeypatch, capsys):
    """--seeds 1 2 3 on a machine that holds seeds 1 and 2 only (seed 3 trains elsewhere, or has no
    validation yet): an ensemble of the two would stand in the ens. column and hold their best checkpoints,
    which pack then leaves behind, so seed 3 could never join it."""
    e, decoded = _medium_run_decoding(tmp_path, monkeypatch)
    for seed in (1, 2):
        train_log(tmp_path / e.run_dir / f"seed{seed}", 50.0)
    evaluate(e, [1, 2, 3], None)
    assert decoded == [1, 1] and not (tmp_path / e.run_dir / "ensemble").exists()
    assert "no validated checkpoint here for seed3" in capsys.readouterr().err
    seed3 = tmp_path / e.run_dir / "seed3"
    seed3.mkdir()
    (seed3 / "train.log").write_text("[..] Step 100/149000; acc: 20.0\n")  # started, not validated yet
    evaluate(e, [1, 2, 3], None)
    assert decoded == [1, 1] and "no validated checkpoint here for seed3" in capsys.readouterr().err
    evaluate(e, [1, 2], None)  # the two named alone: their ensemble, as asked
    assert decoded == [1, 1, 2]
