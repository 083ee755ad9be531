"""reproduce.py: best-validation checkpoint, scoring of predictions, tables and Figure 4 from finished runs."""
import csv
import json
import os
import re
import statistics
import sys
from pathlib import Path

import pytest

import experiments as E
import pieces as pieces_mod
import results_csv
from pieces import best_checkpoint, device_name, latest_checkpoint, run_pieces, scored_step
from pipeline_helpers import ROOT, load_script
from steps import common, decode
from steps.analyze import analysis_flags, analysis_runs, analyze, collect_analysis, print_analysis, spread_sample
from steps.common import experiments, results_csv_path, run
from steps.decode import score
from steps.evaluate import evaluate
from steps.plot import plot_fig4
from steps.record import record
from steps.status import print_ensemble_status, print_status
from steps.table import collect, print_table
from steps.train import build_vocab, train_all, train_command

rep = load_script("scripts/reproduce/reproduce.py")

LOG = """[2026-01-01 10:00:00,000 INFO] Step 500/1500; acc: 50.1; ...
[2026-01-01 10:00:01,000 INFO] Validation accuracy: 61.5
[2026-01-01 10:00:01,100 INFO] Saving checkpoint runs/x/seed1/model_step_500.pt
[2026-01-01 10:00:02,000 INFO] Validation accuracy: 70.25
[2026-01-01 10:00:02,100 INFO] Saving checkpoint runs/x/seed1/model_step_1000.pt
[2026-01-01 10:00:03,000 INFO] Validation accuracy: 69.0
[2026-01-01 10:00:03,100 INFO] Saving checkpoint runs/x/seed1/model_step_1500.pt
"""


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


def test_of_two_rows_of_one_run_on_one_day_the_later_in_the_file_is_the_runs_row():
    run = {"setting": "medium", "output_alpha": "1.5", "attention_alpha": "1.5", "seed": "1"}
    rows = [{**run, "date": "2026-11-27", "test_acc": "70.0"}, {**run, "date": "2026-11-28", "test_acc": "71.0"},
            {**run, "date": "2026-11-28", "test_acc": "72.0"},
            {**run, "seed": "2", "date": "2026-11-29", "test_acc": "9"}]
    assert [r["test_acc"] for r in results_csv.latest_per_run(rows)] == ["72.0", "9"]
    older = {**run, "date": "2026-11-26", "test_acc": "60.0"}  # later in the file, of an earlier day
    assert [r["test_acc"] for r in results_csv.latest_per_run(rows + [older])] == ["72.0", "9"]


def _runs(tmp_path, table, rows_scores):
    for e in E.all_experiments():
        if e.table == table and e.row in rows_scores:
            for seed, value in enumerate(rows_scores[e.row], 1):
                d = tmp_path / e.run_dir / f"seed{seed}"
                d.mkdir(parents=True)
                (d / "scores.json").write_text(json.dumps({E.TABLES[table].metric: value, "dev_accuracy": value}))


def test_table_collects_seeds_and_prints_paper_numbers(tmp_path):
    _runs(tmp_path, "peters2019-table2", {"entmax15": [26.0, 26.4, 26.2]})
    text = print_table("peters2019-table2", runs=tmp_path)
    row = next(line for line in text.splitlines() if line.startswith("| entmax15 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # de-en: our 3 seeds (all six directions share the row) beside the paper's 26.17 ± 0.13
    assert cells[1] == "26.20 ± 0.20 (n=3)" and cells[2] == "26.17 ± 0.13"
    assert "ro-en (paper)" in text and "30.15 ± 0.06" in text


def _ensemble(tmp_path, row, column, seeds):
    for e in E.all_experiments():
        if e.table == "peters2019-table1" and e.row == row and e.column == column:
            (tmp_path / e.run_dir / "ensemble").mkdir(exist_ok=True)
            ckpts = [f"{e.run_dir}/seed{s}/model_step_9.pt" for s in seeds]
            (tmp_path / e.run_dir / "ensemble/scores.json").write_text(json.dumps({"accuracy": 86.0,
                                                                                    "checkpoints": ckpts}))


def test_table1_has_average_and_ensemble_columns(tmp_path):
    _runs(tmp_path, "peters2019-table1", {"out1.5-attn1.5": [84.0, 85.0]})
    _ensemble(tmp_path, "out1.5-attn1.5", "medium", [1, 2])
    cells = collect("peters2019-table1", runs=tmp_path)
    assert cells[("out1.5-attn1.5", "medium-avg")] == [84.0, 85.0]
    assert cells[("out1.5-attn1.5", "high-avg")] == [84.0, 85.0]
    assert cells[("out1.5-attn1.5", "medium-ens")] == [86.0]
    text = print_table("peters2019-table1", runs=tmp_path)
    assert "| UZH (2018) |" in text and "| 86.00 (2 seeds) | 86.55 |" in text


def test_an_ensemble_of_fewer_seeds_than_the_table_scores_is_not_its_ensemble_column(tmp_path):
    """`evaluate --seeds 2 3` beside a scored seed 1 decodes the ensemble of two: the table's "ens" column
    (the ensemble of its seeds, as the paper's) stays empty rather than show it."""
    _runs(tmp_path, "peters2019-table1", {"out1-attn1": [84.0, 85.0, 83.0]})
    _ensemble(tmp_path, "out1-attn1", "medium", [2, 3])
    assert ("out1-attn1", "medium-ens") not in collect("peters2019-table1", runs=tmp_path)
    _ensemble(tmp_path, "out1-attn1", "medium", [2, 3, 4])  # as many models, not the scored seeds
    assert ("out1-attn1", "medium-ens") not in collect("peters2019-table1", runs=tmp_path)
    _ensemble(tmp_path, "out1-attn1", "medium", [1, 2, 3])
    assert collect("peters2019-table1", runs=tmp_path)[("out1-attn1", "medium-ens")] == [86.0]


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


def test_figure4_plot_is_written(tmp_path):
    for which in ("attention", "output"):
        _runs(tmp_path, f"peters2019-fig4-{which}", {"1": [60.0, 60.5], "1.5": [61.0, 61.2], "2": [60.2]})
    out = plot_fig4(tmp_path / "fig4.png", runs=tmp_path)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_table_is_named():
    with pytest.raises(SystemExit, match="unknown table 'table9'"):
        experiments("table9")


def _analysis(tmp_path, e, name, seed, summary, dev=None):
    d = tmp_path / e.run_dir / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"analysis-{name}.json").write_text(json.dumps(summary))
    if dev is not None:
        _train_log(d, dev)


def _train_log(run_dir, dev):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "train.log").write_text(f"[..] Validation accuracy: {dev}\n[..] Saving checkpoint {run_dir}/model_step_5.pt\n")
    (run_dir / "model_step_5.pt").write_bytes(b"")  # the checkpoint the log names (decoding is faked)


def test_table3_reads_sparsity_of_the_de_en_runs_only(tmp_path):
    for e in analysis_runs("peters2019-table3"):
        assert e.column == "de-en"
        _analysis(tmp_path, e, "peters2019-table3", 1, {"mean_attended": 5.0, "mean_output_support": 16.0})
        _analysis(tmp_path, e, "peters2019-table3", 2, {"mean_attended": 6.0, "mean_output_support": 18.0})
    text = print_analysis("peters2019-table3", runs=tmp_path)
    assert "| entmax15 | 5.50 ± 0.71 (n=2) | 5.55 | 17.00 ± 1.41 (n=2) | 16.13 |" in text


def test_certificates_come_from_the_best_validated_sparse_configuration(tmp_path):
    runs = {e.name: e for e in analysis_runs("peters2019-sec4.1")}
    assert "medium/out1-attn1" not in runs  # a softmax output has no certificate
    _analysis(tmp_path, runs["medium/out1.5-attn1.5"], "peters2019-sec4.1", 1,
              {"single_sequence_share": 0.5, "certified_rate": 0.6}, dev=80.0)
    _analysis(tmp_path, runs["medium/out2-attn1"], "peters2019-sec4.1", 1,
              {"single_sequence_share": 0.7, "certified_rate": 0.8}, dev=82.0)
    cells = collect_analysis("peters2019-sec4.1", runs=tmp_path)
    assert cells == {("single sequence", "medium"): [70.0], ("certified", "medium"): [80.0]}


def test_tau_table_reads_the_value_generator_tau_auto_logged(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "WORK", tmp_path)
    for e in analysis_runs("tezekbayev-table3"):
        d = tmp_path / e.run_dir / "seed1"
        d.mkdir(parents=True)
        (d / "train.log").write_text("[..] generator_tau auto: tau = 0.3312 (mean 1.5-entmax threshold over 9 target positions)\n")
    analyze("tezekbayev-table3", [1], None)
    text = print_analysis("tezekbayev-table3")
    assert "| tau (untrained model) | 0.33 (n=1) | 0.33 | 0.33 (n=1) | 0.17 | 0.33 (n=1) | 0.14 |" in text


def test_figure4_reads_validation_accuracy_from_training_logs(tmp_path):
    e = next(x for x in E.all_experiments() if x.table == "peters2019-fig4-output" and x.row == "1.33")
    (tmp_path / e.run_dir / "seed1").mkdir(parents=True)
    (tmp_path / e.run_dir / "seed1/train.log").write_text(LOG)
    assert collect("peters2019-fig4-output", runs=tmp_path) == {("1.33", "dev accuracy"): [70.25]}


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
    e = E.Experiment("smoke", "resume", cfg, "sigsample", "src", "tgt", "peters2019-table1", "x", "medium", "sigmorphon")
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


def test_best_layout_decodes_only_the_best_validated_run_of_each_column(tmp_path, monkeypatch):
    """§4.1 reports one configuration a column: the analysis decodes that one, not all six."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    runs = {e.name: e for e in analysis_runs("peters2019-sec4.1")}
    for name, dev in {"medium/out1.5-attn1.5": 88.9, "medium/out1.5-attn1": 89.5, "medium/out2-attn2": 88.1}.items():
        _train_log(tmp_path / runs[name].run_dir / "seed1", dev)
    decoded = []

    def fake_translate(models, src, out, gpu, extra=(), cwd=None):
        decoded.append(models[0])
        report = Path(extra[list(extra).index("-entmax_report") + 1])
        report.write_text(json.dumps({"certified": True, "support": {"size": 1}}) + "\n")

    monkeypatch.setattr(decode, "translate", fake_translate)
    monkeypatch.setattr(decode, "test_source", lambda e, split="test": tmp_path / "dev.txt")
    (tmp_path / "dev.txt").write_text("a\n")
    analyze("peters2019-sec4.1", [1], None)
    assert list(map(str, decoded)) == [f"{tmp_path / runs['medium/out1.5-attn1'].run_dir}/seed1/model_step_5.pt"]
    analyze("peters2019-sec4.1", [1], None)  # done for this checkpoint: not decoded again
    assert len(decoded) == 1
    assert collect_analysis("peters2019-sec4.1", runs=tmp_path) == {
        ("single sequence", "medium"): [100.0], ("certified", "medium"): [100.0]}


def test_an_analysis_of_a_carried_run_without_its_best_checkpoint_is_skipped_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in analysis_runs("peters2019-sec4.1") if x.name == "medium/out1.5-attn1")
    _train_log(tmp_path / e.run_dir / "seed1", 89.5)
    (tmp_path / e.run_dir / "seed1" / "model_step_5.pt").unlink()  # scored where it trained, not carried
    monkeypatch.setattr(decode, "translate", lambda *a, **k: pytest.fail("decoded a missing checkpoint"))
    analyze("peters2019-sec4.1", [1], None, only="medium/out1.5-attn1")
    assert "model_step_5.pt is not on this machine" in capsys.readouterr().err


def test_status_says_where_each_run_stands(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1.5-attn1.5")
    _evaluated_run(tmp_path, e, 1, 80.0, 1490 * 3)  # validations at 79, 80, 81; halved at the second; finished
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
    _evaluated_run(tmp_path, e, 1, 80.0, 2980)
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
        _evaluated_run(tmp_path, e, seed, 80.0, 2980)
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


def test_spread_sample_keeps_every_language(tmp_path):
    src = tmp_path / "dev.txt"
    src.write_text("".join(f"{lang} V {i}\n" for lang in ("a", "b", "c") for i in range(100)))
    out = spread_sample(src, 30, tmp_path / "s.txt")
    lines = out.read_text().splitlines()
    assert len(lines) == 30 and {line.split()[0] for line in lines} == {"a", "b", "c"}
    assert spread_sample(src, 1000, tmp_path / "t.txt") == src


def test_dense_rows_of_an_analysis_leave_out_the_sparse_only_options():
    a = E.ANALYSES["peters2019-sec4.1"]
    dense = next(e for e in E.all_experiments() if e.table == "peters2019-table1" and e.row == "out1-attn1.5")
    sparse = next(e for e in E.all_experiments() if e.table == "peters2019-table1" and e.row == "out2-attn1")
    assert analysis_flags(a, sparse) == list(a.flags)
    assert analysis_flags(a, dense) == []


def test_results_page_quotes_the_committed_gpu_runs():
    """Every Multi30k test score in docs/results/2026-11-27-h100x4 (three seeds of five variants), each
    variant's mean ± std as the table prints it, and every Table 1 row of
    docs/results/peters2019-table1.csv (finished runs; a configuration's mean ± std where it has several seeds),
    of the earlier runs' CSV and of docs/results/peters2019-table1-fork.csv appear on the results pages
    (docs/results/multi30k.md, peters2019-table1.md, peters2019-fork.md)."""
    from pipeline_helpers import ROOT

    folder = ROOT / "docs/results/2026-11-27-h100x4"
    page = "\n".join((ROOT / "docs/results" / f"{name}.md").read_text(encoding="utf-8")
                      for name in ("multi30k", "peters2019-table1", "peters2019-fork"))
    scores = sorted((folder / "runs").glob("*/*/*/seed*/scores.json"))
    assert len(scores) == 15  # five Multi30k Transformers x three seeds
    for path in scores:
        value = json.loads(path.read_text())["sacrebleu"]
        assert f"{value:.2f}" in page, path
    printed = print_table("multi30k-transformer", folder)
    means = re.findall(r"(\d+\.\d\d ± \d+\.\d\d) \(n=3\)", printed)
    assert len(means) == 5 and all(m in page for m in means), (means, printed)
    rows = results_csv.read_rows(results_csv_path("peters2019-table1"))  # the finished runs
    earlier = results_csv.read_rows(ROOT / "docs/results/2026-11-27-peters2019-table1/peters2019-table1.csv")
    assert len(rows) >= 2 and len(earlier) == 9
    table = print_table("peters2019-table1")
    for r in rows + earlier:
        assert f"| {r['valid_acc']} |" in page and f"| {r['test_acc']} |" in page.replace("**", ""), r
    # the table's mean over the seeds, and the page's where there are several
    for config, accs in results_csv.cells(rows).items():
        if len(accs) == 1:
            assert f"{accs[0]:.2f} (n=1)" in table, config
        else:
            cell = f"{statistics.mean(accs):.2f} ± {statistics.stdev(accs):.2f}"
            assert f"{cell} (n={len(accs)})" in table and cell in page, (config, cell)
    fork = results_csv.read_rows(results_csv_path("peters2019-table1-fork"))
    earlier_steps = [r for t in ("peters2019-table1", "peters2019-table1-fork")  # checkpoint_score.py --csv
                     for r in csv.DictReader((ROOT / f"docs/results/{t}-checkpoints.csv").open(encoding="utf-8"))]
    assert len(earlier_steps) >= 11
    for r in fork:
        assert f"| {r['test_acc']} |" in page, r
    for r in earlier_steps:  # (a cell of its own, or "at epoch N" beside a run still training)
        assert f"| {r['test_acc']} |" in page or f"{r['test_acc']} at epoch {float(r['epoch']):.0f}" in page, r


def test_evaluation_is_redone_when_a_resumed_run_has_a_newer_best_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "multi30k-transformer" and x.name == "de-en/entmax15")
    run_dir = tmp_path / e.run_dir / "seed1"
    decoded = []
    monkeypatch.setattr(decode, "translate",
                        lambda models, src, out, gpu, extra=(), cwd=None: decoded.append(models[0]))
    monkeypatch.setattr(decode, "score", lambda e, pred: {"sacrebleu": 1.0})
    _train_log(run_dir, 50.0)
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
    _train_log(run_dir, 50.0)
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
    _train_log(run_dir, 50.0)
    (run_dir / "model_step_5.pt").unlink()
    old = json.dumps({"checkpoint": str(run_dir / "model_step_5.pt"), "step": 5, "accuracy": 70.0})
    (run_dir / "scores.json").write_text(old)
    evaluate(e, [1], None)
    assert (run_dir / "scores.json").read_text() == old and "model_step_5.pt is not on this machine" in \
        capsys.readouterr().err


def test_evaluating_some_seeds_beside_a_scored_one_decodes_each_but_not_their_partial_ensemble(tmp_path, monkeypatch,
                                                                                               capsys):
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1-attn1")
    decoded = []
    monkeypatch.setattr(decode, "translate",
                        lambda models, src, out, gpu, extra=(), cwd=None: decoded.append(len(models)))
    monkeypatch.setattr(decode, "score", lambda e, pred: {"accuracy": 80.0})
    for seed in (1, 2, 3):
        _train_log(tmp_path / e.run_dir / f"seed{seed}", 50.0)
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
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = next(x for x in E.all_experiments() if x.table == "peters2019-table1" and x.name == "medium/out1-attn1")
    decoded = []
    monkeypatch.setattr(decode, "translate",
                        lambda models, src, out, gpu, extra=(), cwd=None: decoded.append(len(models)))
    monkeypatch.setattr(decode, "score", lambda e, pred: {"accuracy": 80.0})
    for seed in (1, 2):
        _train_log(tmp_path / e.run_dir / f"seed{seed}", 50.0)
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


def _evaluated_run(root, e, seed, acc, step):
    """A finished run folder as the GPU machine leaves it: a training log that validated (and saved) at
    every epoch up to ``step``, the halving of the learning rate at the second validation, train.done
    and scores.json."""
    d = root / e.run_dir / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, s in enumerate(range(1490, step + 1, 1490)):
        lines += [f"[..] Step {s - 10}/149000; acc: 80.0; entmax15 FY loss: 0.1; lr: {'0.00100' if i < 2 else '0.00050'};",
                  f"[..] Validation entmax15 FY loss: {0.2 - i / 100:g}", f"[..] Validation accuracy: {acc - 1 + i:g}"]
        lines += ["[..] valid_lr_halving: validation loss 0.2 > 0.1, learning rate halved to 0.0005"] if i == 1 else []
        lines += [f"[..] Saving checkpoint {d}/model_step_{s}.pt"]
    (d / "train.log").write_text("\n".join(lines) + "\n")
    (d / "train.done").write_text("")
    per = {"latin": {"accuracy": acc - 50, "levenshtein": 1.5, "n": 1000},
           "uzbek": {"accuracy": 100.0, "levenshtein": 0.0, "n": 100},
           "average": {"accuracy": acc, "levenshtein": 0.25, "n": 1100}}
    (d / "scores.json").write_text(json.dumps({"dev_accuracy": acc + 5, "accuracy": acc, "levenshtein": 0.25,
                                               "gpu": "NVIDIA H100 80GB HBM3", "per_language": per}))


def test_record_keeps_one_csv_row_per_run_and_the_table_is_printed_from_it(tmp_path, monkeypatch):
    e = next(x for x in E.all_experiments() if x.name == "medium/out1.5-attn1.5")
    csv_path = tmp_path / "table1.csv"
    for seed, acc in ((1, 84.0), (2, 85.0)):
        _evaluated_run(tmp_path, e, seed, acc, 2980)
    rows = record("peters2019-table1", [1, 2, 3], "medium/out1.5-*", commit="abc1234", runs=tmp_path, out=csv_path)
    assert [(r["seed"], r["epochs"], r["steps"], r["test_acc"]) for r in rows] == [
        ("1", "2.0", "2980", "84.00"), ("2", "2.0", "2980", "85.00")]
    header = csv_path.read_text().splitlines()[0]
    assert header == "setting,output_alpha,attention_alpha,seed,epochs,steps,valid_acc,test_acc,test_lev,gpu,commit,date"
    _evaluated_run(tmp_path, e, 1, 86.0, 4470)  # the same run trained on and evaluated again: its row is replaced
    record("peters2019-table1", [1], "medium/out1.5-*", commit="abc1234", runs=tmp_path, out=csv_path)
    lines = csv_path.read_text().splitlines()[1:]
    assert len(lines) == 2 and lines[0].startswith("medium,1.5,1.5,1,3.0,4470,91.00,86.00,0.250,NVIDIA H100 80GB HBM3,abc1234,")
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
    _evaluated_run(tmp_path, e, 2, 85.0, 1490)  # seed 2 trained again from scratch, shorter: no stale rows
    record("peters2019-table1", [2], "medium/out1.5-*", commit="abc1234", runs=tmp_path, out=csv_path)
    curve = (tmp_path / "table1-validation.csv").read_text().splitlines()
    assert [line.split(",")[3:6] for line in curve[1:]] == [
        ["1", "1.0", "1490"], ["1", "2.0", "2980"], ["1", "3.0", "4470"], ["2", "1.0", "1490"]]
    record("peters2019-table1", [1, 2], "medium/out1.5-*", commit="def5678", runs=tmp_path, out=csv_path)
    # recorded again unchanged at a later commit (to add an ensemble, say): the rows keep the commit that made them
    assert [line.split(",")[3::7] for line in csv_path.read_text().splitlines()[1:]] == [["1", "abc1234"],
                                                                                          ["2", "abc1234"]]
    _evaluated_run(tmp_path, e, 1, 86.0, 5960)  # seed 1 trained on: its rows are those of the new commit only
    record("peters2019-table1", [1, 2], "medium/out1.5-*", commit="def5678", runs=tmp_path, out=csv_path)
    assert [line.split(",")[3::7] for line in csv_path.read_text().splitlines()[1:]] == [["1", "def5678"],
                                                                                          ["2", "abc1234"]]
    curve = (tmp_path / "table1-validation.csv").read_text().splitlines()[1:]
    assert [line.split(",")[3] + "," + line.split(",")[-1] for line in curve] == ["1,def5678"] * 4 + ["2,abc1234"]
    languages = (tmp_path / "table1-languages.csv").read_text().splitlines()[1:]
    assert [line.split(",")[3] + "," + line.split(",")[-1] for line in languages] == ["1,def5678"] * 2 + ["2,abc1234"] * 2
    monkeypatch.setattr(common, "results_csv_path", lambda table: csv_path)
    row = next(line for line in print_table("peters2019-table1").splitlines() if line.startswith("| out1.5-attn1.5 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5:7] == ["85.50 ± 0.71 (n=2)", "84.93"]  # medium-avg: ours (seeds 1 and 2) beside the paper's


def test_a_row_names_the_gpus_that_trained_the_run_not_the_device_that_decoded_it(tmp_path):
    """Runs resumed lease after lease may train on several kinds of GPU and be decoded on a CPU."""
    e = next(x for x in E.all_experiments() if x.name == "medium/out1-attn1")
    _evaluated_run(tmp_path, e, 1, 80.0, 2980)
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
    _evaluated_run(tmp_path, e, 1, 80.0, 2980)
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
        _evaluated_run(tmp_path, e, seed, acc, 2980)
    _ensemble_of_best(tmp_path, e, [1, 2], 86.8)
    record("peters2019-table1", [1, 2], "medium/out2-attn1.5", commit="abc1234", runs=tmp_path, out=csv_path)
    ens_csv = tmp_path / "table1-ensembles.csv"
    lines = ens_csv.read_text().splitlines()
    assert lines[0] == "setting,output_alpha,attention_alpha,seeds,test_acc,test_lev,gpu,commit,date"
    assert lines[1:] == [f"medium,2,1.5,1 2,86.80,0.200,NVIDIA H200,abc1234,{lines[1].split(',')[-1]}"]
    _evaluated_run(tmp_path, e, 3, 85.5, 2980)  # a third seed: the ensemble of two is no longer the column's
    record("peters2019-table1", [3], "medium/out2-attn1.5", commit="abc1234", runs=tmp_path, out=csv_path)
    assert "no ensemble row for medium/out2-attn1.5: it averages seed1, seed2, the scored seeds are seed1, seed2, seed3" \
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
    assert cells[5:9] == ["85.80 ± 0.26 (n=3)", "85.03", "87.10 (3 seeds)", "86.61"]  # medium avg and ens beside the paper


def test_an_ensemble_of_checkpoints_other_than_the_scored_ones_gets_no_row(tmp_path, capsys):
    """A seed evaluated again after training on (a newer best) leaves the ensemble of its older best
    behind: no row until the ensemble is decoded again."""
    e = next(x for x in E.all_experiments() if x.name == "medium/out1.5-attn2")
    for seed in (1, 2):
        _evaluated_run(tmp_path, e, seed, 85.0, 2980)
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


def test_only_takes_several_globs():
    names = [e.name for e in experiments("peters2019-table1", ["medium/out1-attn1", "medium/out1.5-attn1.5"])]
    assert names == ["medium/out1-attn1", "medium/out1.5-attn1.5"]
    assert len(experiments("peters2019-table1", "medium/*")) == 9


def test_a_failed_command_stops_with_its_name_status_and_log_tail_not_a_traceback(tmp_path):
    log = tmp_path / "pred.test.log"
    fail = [sys.executable, "-c", "import sys; print('No module named onmt_entmax'); sys.exit(3)"]
    with pytest.raises(SystemExit) as err:
        run(fail, cwd=tmp_path, log=log)
    message = str(err.value.code)
    assert "failed (exit status 3)" in message and str(log) in message
    assert message.splitlines()[-1] == "No module named onmt_entmax"
    with pytest.raises(SystemExit, match=r"failed \(exit status 3\); its output is above"):
        run(fail, cwd=tmp_path)


def test_a_failed_piece_is_started_again_from_its_checkpoint_once(tmp_path):
    """A piece that dies (e.g. a data-loader worker's exit) is started again with -train_from its newest
    checkpoint, and the failure is written in its train.log; a run that fails again is reported."""
    import sys
    import zipfile

    # fails while its folder has no "survived" mark, leaving one: the second start succeeds
    flaky = [sys.executable, "-c", "import os, sys; d = sys.argv[1]; print(sys.argv[2:]); m = os.path.join(d, 'survived')\n"
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


def test_runs_come_in_the_order_only_names_them():
    """`train --only B A --jobs 1` trains B first: a lease can finish the carried runs before it starts
    a new one, whatever the table's order (each glob's own matches keep the table's order)."""
    names = [e.name for e in experiments("peters2019-table1", ["medium/out2-attn2", "medium/out1-attn*"])]
    assert names == ["medium/out2-attn2", "medium/out1-attn1", "medium/out1-attn1.5", "medium/out1-attn2"]
    assert [e.name for e in experiments("peters2019-table1", "medium/*")][0] == "medium/out1-attn1"


def test_negative_retries_are_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        rep.main(["train", "peters2019-table1", "--only", "medium/out1-attn1", "--retries", "-1"])
    assert "--retries -1: give 0" in capsys.readouterr().err


def test_reproduce_runs_from_a_source_checkout_without_pip_install(tmp_path):
    """The script's own fallback puts the checkout on sys.path before any helper imports the package:
    run with every installed copy of onmt_entmax hidden (editable finder and site-packages path
    entries dropped), from a folder outside the checkout, it still prints the table."""
    import subprocess
    import sys
    repo = Path(__file__).resolve().parents[2]
    script = repo / "scripts" / "reproduce" / "reproduce.py"
    hide = (
        "import sys, runpy\n"
        "sys.meta_path = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '') + repr(f)]\n"
        f"sys.path = [p for p in sys.path if p not in ('', {str(repo)!r})]\n"
        "try:\n    import onmt_entmax\nexcept ImportError:\n    pass\n"
        "else:\n    sys.exit('onmt_entmax still importable: the test hides nothing')\n"
        f"sys.argv = [{str(script)!r}, 'table', 'peters2019-table1']\n"
        f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ONMT_ENTMAX_DISABLE"] = "1"
    out = subprocess.run([sys.executable, "-c", hide], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "82.55" in out.stdout  # the paper's softmax/softmax number, beside ours
