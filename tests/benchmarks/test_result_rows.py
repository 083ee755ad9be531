"""benchmarks/result_rows.py: the rows a benchmark's --csv appends are the rows report.py renders, in the
columns of the repository's CSVs, naming the cases the document's rows name (so a re-run replaces them)."""
import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import result_rows  # noqa: E402  (benchmarks/ is not a package)

spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("family", sorted(report.FAMILIES))
def test_each_family_csv_has_the_columns_the_scripts_write(family):
    with open(report.RESULTS / f"{family}.csv", newline="", encoding="utf-8") as f:
        assert next(csv.reader(f)) == result_rows.FIELDS[family]
    assert set(result_rows.FIELDS) == set(report.FAMILIES)


def test_appended_rows_carry_the_machine_and_command_and_a_rerun_replaces_them(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_COMMAND", "python3 benchmarks/bench_ops.py --rows 8")
    result_rows.append(tmp_path, "cpu-ops", [{"case": "8x64 float32", "op": "entmax15", "ours": "1.00"}], gpu=False)
    first = _rows(tmp_path / "cpu-ops.csv")
    assert first[0]["command"] == "python3 benchmarks/bench_ops.py --rows 8" and first[0]["gpu"].startswith("CPU")
    assert first[0]["torch"] and first[0]["date"] and first[0]["baseline"] == ""
    result_rows.append(tmp_path, "cpu-ops", [{"case": "8x64 float32", "op": "entmax15", "ours": "2.00"}], gpu=False)
    assert len(_rows(tmp_path / "cpu-ops.csv")) == 2  # the older row stays in the CSV
    text = report.family_table("cpu-ops", tmp_path / "cpu-ops.csv")
    assert "| 8x64 float32 | entmax15 | 2.00 |" in text and "| 1.00 |" not in text
    with pytest.raises(AssertionError, match="no column"):
        result_rows.append(tmp_path, "cpu-ops", [{"case": "x", "tokens": "1"}], gpu=False)


def test_bench_kernels_rows_name_the_cases_of_the_documents_rows():
    """From bench_kernels' results, one loss and attention row per printed row, keyed as the repository's
    rows are (a re-run replaces them), its ratios the printed ones."""
    bench_kernels = importlib.import_module("bench_kernels")
    loss = {"ce": 2.0, "graph_ce": 1.0, "pypi_entmax15": 20.0}
    loss.update({op: 1.0 for op in ("entmax15", "sparsemax", "bisect1.33")})
    loss.update({f"graph_{op}": 0.5 for op in ("entmax15", "sparsemax", "bisect1.33")})
    attention = {"softmax": 0.1, "graph_softmax": 0.1}
    attention.update({op: 0.2 for op in ("entmax15", "sparsemax", "bisect_per_head")})
    attention.update({f"graph_{op}": 0.05 for op in ("entmax15", "sparsemax", "bisect_per_head")})
    res = {"loss": {f"{d}/randn*{s}": loss for d in ("float32", "bfloat16") for s in (3.0, 0.2)},
           "attention": {"float32": attention, "bfloat16": attention}}
    rows = bench_kernels.csv_rows(res)
    for family in ("losses", "attention"):
        ours = {(r["case"], r["op"]) for r in rows[family]}
        theirs = {(r["case"], r["op"]) for r in _rows(report.RESULTS / f"{family}.csv") if r["units"] == "ms"}
        assert ours == theirs, family
    first = rows["losses"][0]
    assert (first["ours"], first["baseline"], first["ratio"], first["pypi_ratio"]) == ("1.000", "2.000", "0.50", "10.0")
    assert rows["attention"][1]["ratio"] == "0.50"  # GPU time, 0.05 / 0.1


def test_bench_ops_appends_its_printed_rows(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/bench_ops.py", "--rows", "8", "--vocab", "64", "--dtypes",
                           "float32", "--reps", "1", "--csv", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "| op |" not in line]
    rows = _rows(tmp_path / "cpu-ops.csv")
    assert len(rows) == len(printed) == 8
    for line, row in zip(printed, rows):
        op, v, dtype, ours, base, ratio, _ = (c.strip() for c in line.strip("|").split("|"))
        assert (row["case"], row["op"], row["ours"], row["baseline"], row["ratio"] + "x") == \
            (f"8x{v} {dtype}", op, ours, base, ratio)
