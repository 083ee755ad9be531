"""reproduce.py record (steps/record.py): a row a finished, evaluated run, its validations and languages, and its
configuration's ensemble, in the committed CSVs."""
import json

import pytest

import experiments as E
import pieces as pieces_mod
import results_csv
from pieces import device_name
from reproduce_helpers import evaluated_run
from steps import common
from steps.record import record
from steps.table import print_table


def test_record_keeps_one_csv_row_per_run_and_the_table_is_printed_from_it(tmp_path, monkeypatch):
    e = next(x for x in E.all_experiments() if x.name == "medium/out1.5-attn1.5")
    csv_path = tmp_path / "table1.csv"
    for seed, acc in ((1, 84.0), (2, 85.0)):
        evaluated_run(tmp_path, e, seed, acc, 2980)
    rows = record("peters2019-table1", [1, 2, 3], "medium/out1.5-*", commit="abc1234", runs=tmp_path, out=csv_path)
    assert [(r["seed"], r["epochs"], r["steps"], r["test_acc"]) for r in rows] == [
        ("1", "2.0", "2980", "84.00"), ("2", "2.0", "2980", "85.00")]
    header = csv_path.read_text().splitlines()[0]
    assert header == ("setting,output_alpha,attention_alpha,seed,epochs,steps,"
                      "valid_acc,test_acc,test_lev,gpu,commit,date")
    evaluated_run(tmp_path, e, 1, 86.0, 4470)  # the same run trained on and evaluated again: its row is replaced
    record("peters2019-table1", [1], "medium/out1.5-*", commit="abc1234", runs=tmp_path, out=csv_path)
    lines = csv_path.read_text().splitlines()[1:]
    assert len(lines) == 2 and lines[0].startswith("medium,1.5,1.5,1,3.0,4470,91.00,86.00,0.250,"
                                                   "NVIDIA H100 80GB HBM3,abc1234,")
    curve = (tmp_path / "table1-validation.csv").read_text().splitlines()
    assert curve[0] == "setting,output_alpha,attention_alpha,seed,epoch,step,valid_acc,valid_loss,lr,commit"
    assert curve[1:4] == ["medium,1.5,1.5,1,1.0,1490,85,0.2,0.001,abc1234",  # seed 1 trained on: 3 epochs
                          "medium,1.5,1.5,1,2.0,2980,86,0.19,0.0005,abc1234",  # (halved after this validation)
                          "medium,1.5,1.5,1,3.0,4470,87,0.18,0.0005,abc1234"]
    assert len(curve) == 1 + 3 + 2
    languages = (tmp_path / "table1-languages.csv").read_text().splitlines()
    assert languages[0] == "setting,output_alpha,attention_alpha,seed,language,n,test_acc,test_lev,commit"
    assert languages[1:] == ["medium,1.5,1.5,1,latin,1000,36.00,1.500,abc1234",
                             "medium,1.5,1.5,1,uzbek,100,100.00,0.000,abc1234",
                             "medium,1.5,1.5,2,latin,1000,35.00,1.500,abc1234",
                             "medium,1.5,1.5,2,uzbek,100,100.00,0.000,abc1234"]
    evaluated_run(tmp_path, e, 2, 85.0, 1490)  # seed 2 trained again from scratch, shorter: no stale rows
    record("peters2019-table1", [2], "medium/out1.5-*", commit="abc1234", runs=tmp_path, out=csv_path)
    curve = (tmp_path / "table1-validation.csv").read_text().splitlines()
    assert [line.split(",")[3:6] for line in curve[1:]] == [
        ["1", "1.0", "1490"], ["1", "2.0", "2980"], ["1", "3.0", "4470"], ["2", "1.0", "1490"]]
    record("peters2019-table1", [1, 2], "medium/out1.5-*", commit="def5678", runs=tmp_path, out=csv_path)
    # recorded again unchanged at a later commit (to add an ensemble, say): the rows keep the commit that made them
    assert [line.split(",")[3::7] for line in csv_path.read_text().splitlines()[1:]] == [["1", "abc1234"],
                                                                                          ["2", "abc1234"]]
    evaluated_run(tmp_path, e, 1, 86.0, 5960)  # seed 1 trained on: its rows are those of the new commit only
    record("peters2019-table1", [1, 2], "medium/out1.5-*", commit="def5678", runs=tmp_path, out=csv_path)
    assert [line.split(",")[3::7] for line in csv_path.read_text().splitlines()[1:]] == [["1", "def5678"],
                                                                                          ["2", "abc1234"]]
    curve = (tmp_path / "table1-validation.csv").read_text().splitlines()[1:]
    assert [line.split(",")[3] + "," + line.split(",")[-1] for line in curve] == ["1,def5678"] * 4 + ["2,abc1234"]
    languages = (tmp_path / "table1-languages.csv").read_text().splitlines()[1:]
    assert ([line.split(",")[3] + "," + line.split(",")[-1] for line in languages]
            == ["1,def5678"] * 2 + ["2,abc1234"] * 2)
    monkeypatch.setattr(common, "results_csv_path", lambda table: csv_path)
    row = next(line for line in print_table("peters2019-table1").splitlines() if line.startswith("| out1.5-attn1.5 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5:7] == ["85.50 ± 0.71 (n=2)", "84.93"]  # medium-avg: ours (seeds 1 and 2) beside the paper's


def test_a_row_names_the_gpus_that_trained_the_run_not_the_device_that_decoded_it(tmp_path):
    """Runs resumed lease after lease may train on several kinds of GPU and be decoded on a CPU."""
    e = next(x for x in E.all_experiments() if x.name == "medium/out1-attn1")
    evaluated_run(tmp_path, e, 1, 80.0, 2980)
    d = tmp_path / e.run_dir / "seed1"
    (d / "scores.json").write_text((d / "scores.json").read_text().replace("NVIDIA H100 80GB HBM3", "cpu"))
    pieces = ["[reproduce] 2026-11-27 10:00:00 piece: onmt_train -config c",  # a log from before the names
              "[reproduce] 2026-11-28 10:00:00 piece on NVIDIA H100 80GB HBM3: CUDA_VISIBLE_DEVICES=2 onmt_train",
              "[reproduce] 2026-11-28 11:00:00 piece on NVIDIA H200: CUDA_VISIBLE_DEVICES=0 onmt_train",
              "[reproduce] 2026-11-28 12:00:00 piece on NVIDIA H100 80GB HBM3: CUDA_VISIBLE_DEVICES=0 onmt_train"]
    log = d / "train.log"
    log.write_text("\n".join(pieces) + "\n" + log.read_text())
    (row,) = record("peters2019-table1", [1], "medium/out1-attn1", commit="abc1234", runs=tmp_path,
                        out=tmp_path / "t.csv")
    assert row["gpu"] == "NVIDIA H100 80GB HBM3 + NVIDIA H200 (1 earlier pieces unnamed)"
    log.write_text("\n".join(pieces[:1]) + "\n")
    assert results_csv.training_devices(log.read_text()) is None  # then the row names the decoding device
    assert device_name(None) == "cpu" and pieces_mod.device_name(None) == "cpu"


def test_the_learning_curve_keeps_the_exact_halved_rate_not_the_rounded_one_of_step_lines():
    """OpenNMT-py prints the rate with 5 decimals (6.25e-05 as 0.00006): the curve's lr column is the
    value the halving set, through the step lines that follow it, until the rate changes again."""
    log = "\n".join(["[..] Step 100/900; acc: 9; lr: 0.00013;", "[..] Validation accuracy: 90",
                     "[..] valid_lr_halving: validation loss 0.2 > 0.1, learning rate halved to 6.25e-05",
                     "[..] Saving checkpoint m/model_step_100.pt",
                     "[..] Step 200/900; acc: 9; lr: 0.00006;", "[..] Validation accuracy: 91",
                     "[..] Saving checkpoint m/model_step_200.pt",
                     "[..] Step 300/900; acc: 9; lr: 0.00100;", "[..] Validation accuracy: 92",  # set anew
                     "[..] Saving checkpoint m/model_step_300.pt"])
    assert [v["lr"] for v in results_csv.validation_curve(log)] == ["6.25e-05", "6.25e-05", "0.001"]


def test_a_run_that_has_not_finished_gets_no_row_and_is_named(tmp_path, capsys):
    """The CSV holds finished runs only: a run stopped by a machine's time limit may be evaluated (to
    see where it stands) but is not a result of the table."""
    e = next(x for x in E.all_experiments() if x.name == "medium/out1-attn1")
    evaluated_run(tmp_path, e, 1, 80.0, 2980)
    (tmp_path / e.run_dir / "seed1" / "train.done").unlink()
    out = tmp_path / "t.csv"
    assert record("peters2019-table1", [1], "medium/out1-attn1", commit="abc1234", runs=tmp_path, out=out) == []
    assert "medium/out1-attn1/seed1 is evaluated but not finished" in capsys.readouterr().err
    assert out.read_text().splitlines()[1:] == []
    (tmp_path / e.run_dir / "seed1" / "train.done").write_text("")
    assert len(record("peters2019-table1", [1], "medium/out1-attn1", commit="abc1234", runs=tmp_path, out=out)) == 1


def _ensemble_of_best(root, e, seeds, acc):
    """runs/.../ensemble/scores.json of the seeds' best checkpoints (as their scores.json name them)."""
    ckpts = []
    for s in seeds:
        d = root / e.run_dir / f"seed{s}"
        scores = json.loads((d / "scores.json").read_text())
        scores["checkpoint"] = f"/elsewhere/{e.run_dir}/seed{s}/model_step_1490.pt"  # a path logged on another machine
        (d / "scores.json").write_text(json.dumps(scores))
        ckpts.append(scores["checkpoint"])
    (root / e.run_dir / "ensemble").mkdir(exist_ok=True)
    (root / e.run_dir / "ensemble/scores.json").write_text(json.dumps({
        "checkpoints": ckpts, "accuracy": acc, "levenshtein": 0.2, "gpu": "NVIDIA H200"}))


def test_record_keeps_the_ensemble_of_every_finished_seed_and_the_table_prints_it(tmp_path, monkeypatch, capsys):
    """Table 1's "ens." columns survive the machine that decoded them: one row a configuration in
    <table>-ensembles.csv, the ensemble of every scored seed, replaced when more seeds join it."""
    e = next(x for x in E.all_experiments() if x.name == "medium/out2-attn1.5")
    csv_path = tmp_path / "table1.csv"
    for seed, acc in ((1, 86.0), (2, 85.9)):
        evaluated_run(tmp_path, e, seed, acc, 2980)
    _ensemble_of_best(tmp_path, e, [1, 2], 86.8)
    record("peters2019-table1", [1, 2], "medium/out2-attn1.5", commit="abc1234", runs=tmp_path, out=csv_path)
    ens_csv = tmp_path / "table1-ensembles.csv"
    lines = ens_csv.read_text().splitlines()
    assert lines[0] == "setting,output_alpha,attention_alpha,seeds,test_acc,test_lev,gpu,commit,date"
    assert lines[1:] == [f"medium,2,1.5,1 2,86.80,0.200,NVIDIA H200,abc1234,{lines[1].split(',')[-1]}"]
    evaluated_run(tmp_path, e, 3, 85.5, 2980)  # a third seed: the ensemble of two is no longer the column's
    record("peters2019-table1", [3], "medium/out2-attn1.5", commit="abc1234", runs=tmp_path, out=csv_path)
    assert "no ensemble row for medium/out2-attn1.5: it averages seed1, seed2, " \
        "the scored seeds are seed1, seed2, seed3" \
        in capsys.readouterr().err
    _ensemble_of_best(tmp_path, e, [1, 2, 3], 87.1)
    (tmp_path / e.run_dir / "seed3/train.done").unlink()
    record("peters2019-table1", [3], "medium/out2-attn1.5", commit="abc1234", runs=tmp_path, out=csv_path)
    assert "seed3 has not finished" in capsys.readouterr().err
    (tmp_path / e.run_dir / "seed3/train.done").write_text("")
    record("peters2019-table1", [3], "medium/out2-attn1.5", commit="abc1234", runs=tmp_path, out=csv_path)
    assert [line.split(",")[3:5] for line in ens_csv.read_text().splitlines()[1:]] == [["1 2 3", "87.10"]]
    record("peters2019-table1", [3], "medium/out2-attn1.5", commit="def5678", runs=tmp_path, out=csv_path)
    assert ens_csv.read_text().splitlines()[1].split(",")[7] == "abc1234"  # the same ensemble keeps its commit
    monkeypatch.setattr(common, "results_csv_path", lambda table: csv_path)
    monkeypatch.setattr(common, "ensembles_csv_path", lambda table: ens_csv)
    row = next(line for line in print_table("peters2019-table1").splitlines() if line.startswith("| out2-attn1.5 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # medium avg and ens beside the paper
    assert cells[5:9] == ["85.80 ± 0.26 (n=3)", "85.03", "87.10 (3 seeds)", "86.61"]


def test_an_ensemble_of_checkpoints_other_than_the_scored_ones_gets_no_row(tmp_path, capsys):
    """A seed evaluated again after training on (a newer best) leaves the ensemble of its older best
    behind: no row until the ensemble is decoded again."""
    e = next(x for x in E.all_experiments() if x.name == "medium/out1.5-attn2")
    for seed in (1, 2):
        evaluated_run(tmp_path, e, seed, 85.0, 2980)
    _ensemble_of_best(tmp_path, e, [1, 2], 86.0)
    d = tmp_path / e.run_dir / "seed2"
    (d / "scores.json").write_text((d / "scores.json").read_text().replace("model_step_1490", "model_step_2980"))
    record("peters2019-table1", [1, 2], "medium/out1.5-attn2", commit="abc1234", runs=tmp_path,
               out=tmp_path / "t.csv")
    assert "seed2 was scored at model_step_2980.pt, not the checkpoint the ensemble holds" in capsys.readouterr().err
    assert not (tmp_path / "t-ensembles.csv").exists()


def test_record_refuses_tables_without_a_results_file_and_runs_without_a_commit(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="CSV"):
        record("peters2019-table2", [1])
    monkeypatch.setattr(common, "git_commit", lambda: "")
    with pytest.raises(SystemExit, match="--commit"):
        record("peters2019-table1", [1], runs=tmp_path, out=tmp_path / "t.csv")
