"""The Eole Multi30k benchmark (docs/eole.md: the GPU run) runs as documented; here its CPU smoke mode on
the bundled sample, whose numbers mean nothing but whose table must be whole. One variant (the one with
the most options) keeps it to three eole processes."""
import json
import sys

from conftest import REPO, run_console


def test_bench_eole_multi30k_smoke_run_trains_decodes_and_scores(tmp_path):
    proc = run_console([sys.executable, str(REPO / "benchmarks" / "bench_eole_multi30k.py"), "--tiny", "--out",
                        str(tmp_path / "bench"), "--steps", "2", "--lines", "2", "--variants", "entmax_learned"],
                       cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "bench" / "results.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == ["entmax_learned"]
    assert all(r["train_tok_s"] > 0 and r["decode_seconds"] > 0 and r["sacrebleu"] >= 0 for r in rows)
    assert "| learned alpha attention, 1.5-entmax output |" in proc.stdout and "| 1.00x |" in proc.stdout
