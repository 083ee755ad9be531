"""benchmarks/report.py: run_gpu.sh's outputs become docs/benchmarks.md's GPU sections (tested on the
CPU with outputs in the benchmarks' own formats; the GPU run itself is the next GPU session's)."""
import csv
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

KERNELS = """{'gpu': 'NVIDIA H200', 'torch': '2.11.0+cu130'}
loss float32/randn*3.0 {'ce': 1.1}

| case | op | ours ms | baseline ms | ours / baseline | PyPI / baseline |
|---|---|---|---|---|---|
| loss 4096x32768 float32/randn*3.0 | entmax15 | 0.593 | CE 1.103 | 0.54x | 17.2x |
| loss 4096x32768 float32/randn*3.0, GPU time | entmax15 | 0.590 | CE 1.093 | 0.54x | - |
| attention 512x8x50x50 float32, eager | entmax15 | 0.608 | softmax 0.188 | 3.23x | 24.4x |
| attention 512x8x50x50 float32, GPU time | entmax15 | 0.086 | softmax 0.123 | 0.70x | - |
"""
TRAIN = """
training steps in one process (batching excluded) tokens/s (multi30k, NVIDIA H200, 20 steps, ...)
| variant | target tok/s | vs softmax | median of round ratios (95% interval) | steps | runs |
|---|---|---|---|---|---|
| softmax | 136259 | 1.00x | 1.00x (1.00-1.00) | 20 | 1 |
| entmax15 (output + all attention) | 133534 | 0.98x | 0.98x (0.93-1.01) | 20 | 1 |
"""
MACHINE = {"gpu": "NVIDIA H200", "driver": "580.159.04", "torch": "2.11.0+cu130", "triton": "3.6.0",
           "commit": "9b0d7d6" + "0" * 33 + "-dirty", "date": "2026-11-27",
           "parts": ["tests", "kernels", "train-inproc"]}


@pytest.fixture
def outdir(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "machine.json").write_text(json.dumps(MACHINE))
    (out / "kernels.md").write_text(KERNELS)
    (out / "kernels.md.cmd").write_text("python3 benchmarks/bench_kernels.py --json OUT/kernels.json\n")
    (out / "train-inproc-multi30k.md").write_text(TRAIN)
    (out / "train-inproc-multi30k.md.cmd").write_text("python3 benchmarks/bench_train.py --gpu --in-process\n")
    (out / "tests.txt").write_text("....\n========== 223 passed, 1 skipped in 149.18s ==========\n")
    return out


def _section(text: str, title: str) -> str:
    part = text.split(f"### {title}", 1)[1]
    return part.split("\n### ", 1)[0]


def test_each_measured_thing_gets_its_table_command_and_machine(outdir):
    text = report.report([outdir])
    loss, attention = _section(text, "Losses against"), _section(text, "Attention against")
    assert "| loss 4096x32768 float32/randn*3.0 | entmax15 | 0.593 |" in loss and "attention 512" not in loss
    assert "| attention 512x8x50x50 float32, GPU time | entmax15 | 0.086 |" in attention and "| loss" not in attention
    machine = "NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130, Triton 3.6.0, commit 9b0d7d600000 with " \
              "uncommitted changes, 2026-11-27"
    assert f"`python3 benchmarks/bench_kernels.py --json OUT/kernels.json`; {machine}:" in loss
    training = _section(text, "Training against")
    assert "| entmax15 (output + all attention) | 133534 | 0.98x |" in training
    assert "training steps in one process (batching excluded) tokens/s" in training  # the table's caption
    assert "223 passed, 1 skipped in 149.18s" in _section(text, "Kernel tests")
    assert "{'gpu'" not in text  # the scripts' progress lines are not tables
    assert "### Decoding" not in text  # parts that did not run leave no empty section


def test_a_later_run_replaces_the_same_file_and_keeps_its_own_machine(outdir, tmp_path):
    later = tmp_path / "later"
    later.mkdir()
    (later / "machine.json").write_text(json.dumps({**MACHINE, "gpu": "NVIDIA H100 80GB HBM3", "commit": "abc"}))
    (later / "kernels.md").write_text(KERNELS.replace("0.593", "0.700"))
    text = report.report([outdir, later])
    loss = _section(text, "Losses against")
    assert "0.700" in loss and "0.593" not in loss and "NVIDIA H100 80GB HBM3" in loss
    assert "NVIDIA H200" in _section(text, "Training against")


def test_into_replaces_only_the_text_between_the_markers(outdir, tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# Benchmarks\n\nmethod\n\n{report.BEGIN}\n\nold tables\n\n{report.END}\n\n## CPU\n\nkept\n")
    report.main([str(outdir), "--into", str(doc)])
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nmethod\n\n") and text.endswith(f"{report.END}\n\n## CPU\n\nkept\n")
    assert "old tables" not in text and "| loss 4096x32768" in text
    doc.write_text("# no markers\n")
    with pytest.raises(SystemExit, match="needs one line"):
        report.main([str(outdir), "--into", str(doc)])


def test_report_knows_every_file_run_gpu_sh_writes_and_the_rows_bench_kernels_prints():
    script = (ROOT / "benchmarks" / "run_gpu.sh").read_text()
    written = set(re.findall(r"(?:record|shown) \"?([\w.$-]+\.(?:md|txt))", script))
    written = {w.replace("$1", name) for w in written for name in ("multi30k", "32k")}
    wanted = {item[0] if isinstance(item, tuple) else item for s in report.SECTIONS for item in s[2]}
    assert written == wanted
    kernels = (ROOT / "benchmarks" / "bench_kernels.py").read_text()
    for prefix in {item[1] for s in report.SECTIONS for item in s[2] if isinstance(item, tuple)}:
        assert f'f"| {prefix} ' in kernels, prefix




LONG_CSV = """gpu,dtype,kind,alpha,attention,causal,mask,batch,heads,head_dim,tq,tk,ours_ms,sdpa_ms,adasplash_ms,\
ours_peak_mib,sdpa_peak_mib,adasplash_peak_mib,torch,triton,commit,date,adasplash_v2_ms,adasplash_v2_peak_mib
NVIDIA H200,bf16,entmax15,,self,0,none,2,8,64,4096,4096,2.000,0.500,8.000,49.0,49.0,44.5,2.11.0+cu130,3.6.0,abc123,\
2026-12-01,,
NVIDIA H200,bf16,entmax_bisect,1.33,cross,1,none,1,8,64,8192,16384,9.000,3.000,,75.0,50.0,,2.11.0+cu130,3.6.0,abc123,\
2026-12-01,,
NVIDIA H200,bf16,entmax15,,self,1,none,1,8,64,8192,8192,2.000,1.000,6.000,49.0,49.0,44.5,2.11.0+cu130,3.6.0,abc123,\
2026-12-01,0.500,40.0
"""


def test_long_attention_csv_becomes_one_table_with_its_machine_and_replaces_only_its_block(tmp_path):
    """bench_long_attention.py's rows: one table per machine and date, ratios against SDPA computed
    from the times and peaks, AdaSplash cells empty where it did not run; --into replaces the text
    between the long-attention markers and nothing else (the GPU tables' block stays)."""
    path = tmp_path / "long.csv"
    path.write_text(LONG_CSV)
    text = report.long_attention(path)
    assert "NVIDIA H200, torch 2.11.0+cu130, Triton 3.6.0, 2026-12-01:" in text and "abc123" not in text
    rows = [line for line in text.splitlines() if line.startswith("| bf16")]
    assert len(rows) == 3
    assert "| 4.00x | 8.00 | 16.00x |  |  |" in rows[0] and "| 1.00x |" in rows[0]
    assert "entmax_bisect (α 1.33) | cross | yes | none |" in rows[1] and "| 3.00x |  |  |  |  |" in rows[1]
    assert rows[1].endswith("| 75 | 50 | 1.50x |")
    assert "| 2.00x | 6.00 | 6.00x | 0.50 | 0.50x | 49 |" in rows[2]
    doc = tmp_path / "doc.md"
    doc.write_text(f"top\n{report.BEGIN}\nold gpu\n{report.END}\n"
                   f"{report.LONG_BEGIN}\nold long\n{report.LONG_END}\nend\n")
    report.main(["--long-attention", str(path), "--into", str(doc)])
    new = doc.read_text()
    assert "old long" not in new and "old gpu" in new and new.endswith(f"{report.LONG_END}\nend\n")
    assert new.count("| bf16") == 3


def test_long_attention_a_masked_case_is_a_row_of_its_own_naming_its_mask(tmp_path):
    """The same shape with a keep mask is another case: both rows are shown, each with its mask."""
    masked = LONG_CSV.splitlines()[1].replace(",self,0,none,", ",self,0,causal-full,")
    masked = masked.replace("2.000,0.500", "3.000,1.500")
    path = tmp_path / "long.csv"
    path.write_text(LONG_CSV + masked + "\n")
    rows = [line for line in report.long_attention(path).splitlines() if line.startswith("| bf16")]
    assert len(rows) == 4
    assert sum("| self | no | causal-full | 2 | 4096 | 4096 | 3.00 | 1.50 | 2.00x |" in r for r in rows) == 1
    assert sum("| self | no | none | 2 | 4096 | 4096 | 2.00 | 0.50 | 4.00x |" in r for r in rows) == 1


def test_long_attention_shows_a_re_measured_case_once_with_its_newest_numbers(tmp_path):
    """A case measured again (the same machine, shape, kind and dtype, on the same date or later) replaces its
    older row in the document; the older row stays in the CSV."""
    newer = LONG_CSV.splitlines()[1].replace("2.000,0.500,8.000", "1.000,0.500,8.000")
    assert "1.000,0.500,8.000" in newer
    path = tmp_path / "long.csv"
    path.write_text(LONG_CSV + newer + "\n")
    rows = [line for line in report.long_attention(path).splitlines() if line.startswith("| bf16")]
    assert len(rows) == 3
    assert sum("| 4096 | 4096 | 1.00 | 0.50 | 2.00x |" in r for r in rows) == 1
    assert not any("| 4096 | 4096 | 2.00 |" in r for r in rows)


def test_long_attention_rows_of_earlier_kernels_follow_the_newest_and_say_so(tmp_path):
    """Cases re-measured on a later commit form the first table; the cases not re-measured stay in a table
    of their own whose caption says they ran on earlier kernels (never mixed under one caption), and a run
    that crossed midnight is one table with both dates."""
    newer = LONG_CSV.splitlines()[1].replace("2.000,0.500,8.000", "1.000,0.500,8.000").replace(
        "abc123,2026-12-01", "def456,2026-12-02")
    assert "def456" in newer
    path = tmp_path / "long.csv"
    path.write_text(LONG_CSV + newer + "\n")
    tables = report.long_attention(path).split("\n\n`")
    assert len(tables) == 2
    assert "2026-12-02:" in tables[0] and "earlier commit" not in tables[0]
    assert sum(line.startswith("| bf16") for line in tables[0].splitlines()) == 1
    assert "2026-12-01 (cases not re-measured since: rows of an earlier commit" in tables[1]
    assert sum(line.startswith("| bf16") for line in tables[1].splitlines()) == 2
    midnight = newer.replace("def456,2026-12-02", "def456,2026-12-01").replace(",self,0,", ",self,1,")
    path.write_text(LONG_CSV + newer + "\n" + midnight + "\n")
    assert "2026-12-01 to 2026-12-02:" in report.long_attention(path)


def _family_csv(path: Path, family: str, rows: list[dict]) -> None:
    """rows in the columns of the repository's CSV of that family."""
    with open(report.RESULTS / f"{family}.csv", newline="", encoding="utf-8") as f:
        fields = next(csv.reader(f))
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows({k: r.get(k, "") for k in fields} for r in rows)


def _row(family: str, fields: list[str], **values) -> dict:
    """A row whose every cell names its column (ratios numbers), with the given cells."""
    row = {f: f"{f}-{family}" for f in fields}
    row.update({f: "0.5" for f in fields if "ratio" in f or f.startswith("median_")}, date="2026-12-01", **values)
    return row


@pytest.mark.parametrize("family", sorted(report.FAMILIES))
def test_a_csv_row_appears_in_its_familys_table(family, tmp_path):
    """Every cell the family's table shows comes from the row, under the row's command and machine."""
    with open(report.RESULTS / f"{family}.csv", newline="", encoding="utf-8") as f:
        fields = next(csv.reader(f))
    assert fields[:len(report.RESULT_FIELDS)] == report.RESULT_FIELDS
    row = _row(family, fields)
    path = tmp_path / f"{family}.csv"
    _family_csv(path, family, [row])
    text = report.family_table(family, path)
    lines = text.splitlines()
    assert lines[0].startswith(f"`{row['command']}`; {row['gpu']}, driver {row['driver']}, torch {row['torch']}")
    assert row["date"] in lines[0] and row["commit"] not in text
    table = [line for line in lines if line.startswith("| ") and "---" not in line]
    assert len(table) == 2  # the header and the row
    cells = table[1].strip("| ").split(" | ")
    assert row["case"] in cells
    for cell in cells:
        assert cell.split(" (")[0].rstrip("x") in row.values(), cell


@pytest.mark.parametrize("family", sorted(report.FAMILIES))
def test_a_rerun_replaces_a_case_in_the_document_and_never_duplicates_it(family, tmp_path):
    """A newer row of a case is the one shown; the older stays in the CSV; rendering again changes nothing."""
    with open(report.RESULTS / f"{family}.csv", newline="", encoding="utf-8") as f:
        fields = next(csv.reader(f))
    old, other = _row(family, fields, ours="111.1"), _row(family, fields, case="another case", ours="222.2")
    new = {**old, "ours": "333.3", "date": "2026-12-02", "commit": "later"}
    path = tmp_path / f"{family}.csv"
    _family_csv(path, family, [old, other, new])
    begin, end = report.family_markers(family)
    doc = tmp_path / "doc.md"
    doc.write_text(f"top\n{begin}\nold\n{end}\n{report.LONG_BEGIN}\nlong\n{report.LONG_END}\n")
    report.main(["--results", str(tmp_path), "--into", str(doc)])
    once = doc.read_text()
    assert "333.3" in once and "222.2" in once and "111.1" not in once and "| old" not in once
    assert sum(f" {old['case']} |" in line for line in once.splitlines()) == 1
    assert once.startswith("top\n") and once.endswith(f"{report.LONG_BEGIN}\nlong\n{report.LONG_END}\n")
    report.main(["--results", str(tmp_path), "--into", str(doc)])
    assert doc.read_text() == once


def test_a_training_run_in_another_precision_is_its_own_case(tmp_path):
    """A half-precision model's row stands beside the float32 one of the same variant (its setup names the
    dtype), while a later float32 row replaces the float32 one."""
    with open(report.RESULTS / "training.csv", newline="", encoding="utf-8") as f:
        fields = next(csv.reader(f))
    fp32 = _row("training", fields, ours="111.1", setup="60 steps, 3-layer Transformer, fp32")
    fp16 = {**fp32, "ours": "222.2", "setup": "60 steps, 3-layer Transformer, fp16", "date": "2026-12-02"}
    rerun = {**fp32, "ours": "333.3", "date": "2026-12-03"}
    path = tmp_path / "training.csv"
    _family_csv(path, "training", [fp32, fp16, rerun])
    text = report.family_table("training", path)
    assert "222.2" in text and "333.3" in text and "111.1" not in text


def test_the_document_shows_the_current_rows_of_every_family_csv(tmp_path):
    """docs/benchmarks.md has each family's markers and, between them, what report.py renders from
    benchmarks/results/ now (a CSV changed without re-rendering fails here)."""
    doc = tmp_path / "benchmarks.md"
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    doc.write_text(text)
    report.main(["--results", str(report.RESULTS), "--into", str(doc)])
    assert doc.read_text() == text
    for family in report.FAMILIES:
        assert (report.RESULTS / f"{family}.csv").exists() and all(m in text for m in report.family_markers(family))
