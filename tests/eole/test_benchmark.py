"""The Eole Multi30k benchmark (docs/eole.md: the GPU run) runs as documented; here its CPU smoke mode on
the bundled sample, whose numbers mean nothing but whose table must be whole. One variant (the one with
the most options) keeps it to three eole processes."""
import json
import sys

from eole_testkit import REPO, run_console


def test_bench_eole_multi30k_smoke_run_trains_decodes_and_scores(tmp_path):
    proc = run_console([sys.executable, str(REPO / "benchmarks" / "bench_eole_multi30k.py"), "--tiny", "--out",
                        str(tmp_path / "bench"), "--steps", "2", "--lines", "2", "--variants", "entmax_learned"],
                       cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "bench" / "results.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == ["entmax_learned"]
    assert all(r["train_tok_s"] > 0 and r["decode_seconds"] > 0 and r["sacrebleu"] >= 0 for r in rows)
    assert "| learned alpha attention, 1.5-entmax output |" in proc.stdout and "| 1.00x |" in proc.stdout


def test_bench_eole_multi30k_reads_a_relative_data_folder_from_any_run_folder(tmp_path, monkeypatch):
    """eole runs in each variant's folder: a --data given relative to where the benchmark started must
    still name the same files there (a relative path made `eole build_vocab` fail on the GPU machine)."""
    import argparse
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_eole", REPO / "benchmarks" / "bench_eole_multi30k.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    data = tmp_path / "work" / "m30k"
    data.mkdir(parents=True)
    for name in ("train.bpe.de", "train.bpe.en", "dev.bpe.de", "dev.bpe.en", "test.bpe.de", "test.raw.en"):
        (data / name).write_text("x\n")
    monkeypatch.chdir(tmp_path)
    files = bench.data_files(argparse.Namespace(tiny=False, data="work/m30k"))
    paths = [*files["train"], *files["dev"], files["test"], files["ref"]]
    assert all(p.is_absolute() and p.exists() for p in paths)
    monkeypatch.chdir(tmp_path / "work")  # where a variant's eole process would run
    assert all(p.exists() for p in paths)
    try:
        bench.data_files(argparse.Namespace(tiny=False, data="no/such/folder"))
    except SystemExit as e:
        assert "--data no/such/folder" in str(e) and "train.bpe.de" in str(e)
    else:
        raise AssertionError("a missing --data folder was accepted")
