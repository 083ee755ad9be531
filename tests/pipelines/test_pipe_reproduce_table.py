"""reproduce.py table (steps/table.py): the seeds' mean ± std beside the paper's numbers, the ensemble columns, and the
committed runs that the results pages quote."""
import csv
import json
import re
import statistics

import experiments as E
import results_csv
from reproduce_helpers import scored_runs
from steps.common import results_csv_path
from steps.table import collect, print_table


def test_table_collects_seeds_and_prints_paper_numbers(tmp_path):
    scored_runs(tmp_path, "peters2019-table2", {"entmax15": [26.0, 26.4, 26.2]})
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
    scored_runs(tmp_path, "peters2019-table1", {"out1.5-attn1.5": [84.0, 85.0]})
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
    scored_runs(tmp_path, "peters2019-table1", {"out1-attn1": [84.0, 85.0, 83.0]})
    _ensemble(tmp_path, "out1-attn1", "medium", [2, 3])
    assert ("out1-attn1", "medium-ens") not in collect("peters2019-table1", runs=tmp_path)
    _ensemble(tmp_path, "out1-attn1", "medium", [2, 3, 4])  # as many models, not the scored seeds
    assert ("out1-attn1", "medium-ens") not in collect("peters2019-table1", runs=tmp_path)
    _ensemble(tmp_path, "out1-attn1", "medium", [1, 2, 3])
    assert collect("peters2019-table1", runs=tmp_path)[("out1-attn1", "medium-ens")] == [86.0]


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
