"""docs/results.md's "Table 1, medium" is what the committed CSVs give, row for row: a reader of the
headline table sees the current mean, spread, number of seeds, distance from the paper and ensemble."""
import re
import statistics

from pipeline_helpers import ROOT, load_script

rep = load_script("scripts/reproduce/reproduce.py")
HEADING = "### Table 1, medium: ours beside the paper"


def page_rows() -> dict[str, list[str]]:
    """{"outA-attnB": [ours, seeds, paper, ours − paper, ensemble (ours), ensemble (paper)]} from the
    page's table, bold marks dropped."""
    page = (ROOT / "docs/results.md").read_text(encoding="utf-8")
    assert HEADING in page
    section = page.split(HEADING, 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| (\S+) / (\S+) \| (.+) \|$", line)
        if m and m.group(1)[0].isdigit():
            rows[f"out{m.group(1)}-attn{m.group(2)}"] = [c.strip().replace("**", "") for c in m.group(3).split("|")]
    return rows


def paper_column(column: str) -> dict[str, float]:
    return {k[2]: v.value for k, v in rep.tables.load_paper_numbers().items()
            if k[:2] == rep.E.TABLES["peters2019-table1"].paper and k[3] == column}


def test_medium_table_matches_the_csvs():
    accs = rep.results_csv.cells(rep.results_csv.read_rows(rep.results_csv_path("peters2019-table1")))
    ensembles = {(f"out{r['output_alpha']}-attn{r['attention_alpha']}", r["setting"]): r for r in
                 rep.results_csv.read_rows(rep.ensembles_csv_path("peters2019-table1"),
                                           rep.results_csv.ENSEMBLE_COLUMNS)}
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
