"""docs/results.md's "Table 1, medium-avg" is what the committed CSV gives, row for row: a reader of
the headline table sees the current mean, spread, number of seeds and distance from the paper."""
import re
import statistics

from pipeline_helpers import ROOT, load_script

rep = load_script("scripts/reproduce/reproduce.py")
HEADING = "### Table 1, medium-avg: ours beside the paper"


def page_rows() -> dict[str, list[str]]:
    """{"outA-attnB": [ours, seeds, paper, ours − paper]} from the page's table, bold marks dropped."""
    page = (ROOT / "docs/results.md").read_text(encoding="utf-8")
    assert HEADING in page
    section = page.split(HEADING, 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| (\S+) / (\S+) \| (.+) \|$", line)
        if m and m.group(1)[0].isdigit():
            rows[f"out{m.group(1)}-attn{m.group(2)}"] = [c.strip().replace("**", "") for c in m.group(3).split("|")]
    return rows


def test_medium_avg_table_matches_the_csv():
    accs = rep.results_csv.cells(rep.results_csv.read_rows(rep.results_csv_path("peters2019-table1")))
    paper = {k[2]: v.value for k, v in rep.tables.load_paper_numbers().items()
             if k[:2] == rep.E.TABLES["peters2019-table1"].paper and k[3] == "medium-avg"}
    rows = page_rows()
    assert sorted(rows) == sorted(name for name, col in accs if col == "medium-avg")
    for name, (ours, seeds, paper_cell, diff) in rows.items():
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
