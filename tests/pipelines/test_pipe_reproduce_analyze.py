"""reproduce.py analyze (steps/analyze.py): the analyses decode the source table's runs, and their tables read the
summaries."""
import json
from pathlib import Path

import pytest

import experiments as E
from reproduce_helpers import train_log
from steps import common, decode
from steps.analyze import analysis_flags, analysis_runs, analyze, collect_analysis, print_analysis, spread_sample


def _analysis(tmp_path, e, name, seed, summary, dev=None):
    d = tmp_path / e.run_dir / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"analysis-{name}.json").write_text(json.dumps(summary))
    if dev is not None:
        train_log(d, dev)


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
        (d / "train.log").write_text("[..] generator_tau auto: tau = 0.3312 "
                                     "(mean 1.5-entmax threshold over 9 target positions)\n")
    analyze("tezekbayev-table3", [1], None)
    text = print_analysis("tezekbayev-table3")
    assert "| tau (untrained model) | 0.33 (n=1) | 0.33 | 0.33 (n=1) | 0.17 | 0.33 (n=1) | 0.14 |" in text


def test_best_layout_decodes_only_the_best_validated_run_of_each_column(tmp_path, monkeypatch):
    """§4.1 reports one configuration a column: the analysis decodes that one, not all six."""
    monkeypatch.setattr(common, "WORK", tmp_path)
    runs = {e.name: e for e in analysis_runs("peters2019-sec4.1")}
    for name, dev in {"medium/out1.5-attn1.5": 88.9, "medium/out1.5-attn1": 89.5, "medium/out2-attn2": 88.1}.items():
        train_log(tmp_path / runs[name].run_dir / "seed1", dev)
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
    train_log(tmp_path / e.run_dir / "seed1", 89.5)
    (tmp_path / e.run_dir / "seed1" / "model_step_5.pt").unlink()  # scored where it trained, not carried
    monkeypatch.setattr(decode, "translate", lambda *a, **k: pytest.fail("decoded a missing checkpoint"))
    analyze("peters2019-sec4.1", [1], None, only="medium/out1.5-attn1")
    assert "model_step_5.pt is not on this machine" in capsys.readouterr().err


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
