"""docs/results/peters2019-table1.md's medium table and its run table are what the committed CSVs give, row for row: a
reader of the headline table sees the current mean, spread, number of seeds, distance from the paper and
ensemble, and each run's row its length, ending, best validation, halvings and test scores."""
import re
import statistics

import experiments as E
import results_csv
from pipeline_helpers import ROOT
from steps.common import curves_csv_path, ensembles_csv_path, results_csv_path
from steps.runs import print_runs

from onmt_entmax.evaluation import tables

PAGE = ROOT / "docs/results/peters2019-table1.md"
HEADING = "## Medium: ours beside the paper"


def page_rows() -> dict[str, list[str]]:
    """{"outA-attnB": [ours, seeds, paper, ours − paper, ensemble (ours), ensemble (paper)]} from the
    page's table, bold marks dropped."""
    page = PAGE.read_text(encoding="utf-8")
    assert HEADING in page
    section = page.split(HEADING, 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| (\S+) / (\S+) \| (.+) \|$", line)
        if m and m.group(1)[0].isdigit():
            rows[f"out{m.group(1)}-attn{m.group(2)}"] = [c.strip().replace("**", "") for c in m.group(3).split("|")]
    return rows


def paper_column(column: str) -> dict[str, float]:
    return {k[2]: v.value for k, v in tables.load_paper_numbers().items()
            if k[:2] == E.TABLES["peters2019-table1"].paper and k[3] == column}


def test_medium_table_matches_the_csvs():
    accs = results_csv.cells(results_csv.read_rows(results_csv_path("peters2019-table1")))
    ensembles = {(f"out{r['output_alpha']}-attn{r['attention_alpha']}", r["setting"]): r for r in
                 results_csv.read_rows(ensembles_csv_path("peters2019-table1"),
                                       results_csv.ENSEMBLE_COLUMNS)}
    paper, paper_ens = paper_column("medium-avg"), paper_column("medium-ens")
    rows = page_rows()
    assert sorted(rows) == sorted(name for name, col in accs if col == "medium-avg")
    for name, (ours, seeds, paper_cell, diff, ens_cell, paper_ens_cell) in rows.items():
        values = accs[(name, "medium-avg")]
        mean = statistics.mean(values)
        head = f"{mean:.2f}" if len(values) == 1 else f"{mean:.2f} ± {statistics.stdev(values):.2f}"
        assert ours.split(" (")[0] == head, (name, ours, head)
        assert sorted(float(v) for v in re.findall(r"\d+\.\d\d", ours.partition(" (")[2])) == \
            (sorted(values) if len(values) > 1 else []), (name, ours, values)
        assert int(seeds) == len(values), (name, seeds)
        assert float(paper_cell) == paper[name], (name, paper_cell)
        # the difference of the rounded mean, as the row shows it
        assert float(diff.replace("−", "-")) == round(round(mean, 2) - paper[name], 2), (name, diff)
        ens = ensembles.get((name, "medium"))
        assert ens_cell == (f"{ens['test_acc']} (seeds {', '.join(ens['seeds'].split())})" if ens else "–"), \
            (name, ens_cell)
        assert float(paper_ens_cell) == paper_ens[name], (name, paper_ens_cell)


RUNS_HEADING = "## Every run"


def test_the_run_tables_match_the_csvs():
    """Each run's row under "Every run" says what its CSV rows say: length, how it ended, best validation
    and when, the halvings, the test scores."""
    section = PAGE.read_text(encoding="utf-8").split(RUNS_HEADING, 1)[1].split("\n## ", 1)[0]
    runs = {(r["output_alpha"], r["attention_alpha"], r["seed"]): r
            for r in results_csv.read_rows(results_csv_path("peters2019-table1")) if r["setting"] == "medium"}
    curves = {}
    for v in results_csv.read_rows(curves_csv_path("peters2019-table1"), results_csv.CURVE_COLUMNS):
        if v["setting"] == "medium":
            curves.setdefault((v["output_alpha"], v["attention_alpha"], v["seed"]), []).append(v)
    seen = set()
    for line in section.splitlines():
        m = re.match(r"\| (\S+) / (\S+?)(?:, seed (\d))? \| (\d+) \(([\d,]+)\) \| (stop rule|step cap) \| ([\d.]+) \| "
                     r"(\d+) \(([\d,]+)\) \| ([\d, ]+) \| ([\d.*]+) \| ([\d.*]+) \|", line)
        if not m:
            continue
        key = (m.group(1), m.group(2), m.group(3) or "1")
        run, curve = runs[key], sorted(curves[key], key=lambda v: int(v["step"]))
        best = max(curve, key=lambda v: float(v["valid_acc"]))  # the first of equals
        halved = [int(float(b["epoch"])) for a, b in zip(curve, curve[1:]) if float(b["lr"]) < float(a["lr"])]
        assert ((int(m.group(4)), int(m.group(5).replace(",", "")))
                == (int(float(run["epochs"])), int(run["steps"]))), line
        assert m.group(6) == ("step cap" if int(run["steps"]) >= 149000 else "stop rule"), line
        assert m.group(7) == run["valid_acc"], line
        assert ((int(m.group(8)), int(m.group(9).replace(",", "")))
                == (int(float(best["epoch"])), int(best["step"]))), line
        assert [int(x) for x in m.group(10).split(", ")] == halved, line
        assert (m.group(11).strip("*"), m.group(12).strip("*")) == (run["test_acc"], run["test_lev"]), line
        seen.add(key)
    assert seen == set(runs), sorted(set(runs) - seen)  # every recorded run has its row


def test_the_runs_command_prints_the_rows_of_the_run_tables():
    """`reproduce.py runs peters2019-table1` gives each recorded run's row as the page shows it, verbatim but
    for the setting column (the page is the medium setting's)."""
    lines = PAGE.read_text(encoding="utf-8").split(RUNS_HEADING, 1)[1].split("\n## ", 1)[0].splitlines()
    printed = print_runs("peters2019-table1", [1, 2, 3], "medium/*").splitlines()[2:]
    assert len(printed) == 27
    for row in printed:
        assert row.replace("| medium | ", "| ", 1) in lines, row


def test_a_run_ended_by_its_cap_or_its_patience_and_its_halvings_are_read_from_its_validations():
    run = {"epochs": "3.0", "steps": "4470", "valid_acc": "81.00", "test_acc": "70.00", "test_lev": "0.500"}
    curve = [{"epoch": f"{i}.0", "step": str(1490 * i), "valid_acc": acc, "lr": lr}
             for i, (acc, lr) in enumerate([("79.0", "0.001"), ("81.0", "0.0005"), ("81.0", "0.00025")], 1)]
    summary = results_csv.run_summary(run, curve[::-1], train_steps=4470)  # (any order)
    assert summary == {"epochs": 3, "steps": 4470, "ended": "step cap", "valid_acc": "81.00", "best_epoch": 2,
                       "best_step": 2980, "halved": [2, 3], "test_acc": "70.00", "test_lev": "0.500"}
    assert results_csv.run_summary(run, curve, train_steps=149000)["ended"] == "stop rule"
