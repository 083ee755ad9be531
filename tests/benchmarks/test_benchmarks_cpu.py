"""The benchmark scripts that run without a GPU, run as docs/benchmarks.md shows them.

They reach into the package (stubbed launches, forced dispatch, in-process engines), so a change
inside the package can break them unseen until the next GPU session: `bench_attention.py --train`
did when `fused_attention.fusable` changed what it returns. Here they run on tiny CPU models;
their numbers mean nothing, their tables must be whole.
"""
import csv
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)
VARIANTS = ("softmax", "entmax15_output_all_attention_", "learned_alpha_all_attention_", "1_5_ReLU_output")
# A hang guard only: no verdict here depends on the machine's speed, and a busy 2-core machine runs these
# tiny scripts many times slower than an idle one.
HANG_S = 3600


def _proc(*args: str) -> subprocess.CompletedProcess:
    """The script run to its end, successfully (its stdout and stderr captured)."""
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def _run(*args: str) -> str:
    return _proc(*args).stdout


def _table(out: str) -> dict:
    """The first column of each markdown body row -> the row's cells."""
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


def _csv(folder: Path, family: str) -> tuple[dict, list]:
    """(the rows --csv wrote to FOLDER/FAMILY.csv, by case; report.py's table of them, each row's cells):
    the file has the columns of the repository's CSV of that family, so report.py renders both alike."""
    with open(folder / f"{family}.csv", newline="", encoding="utf-8") as f, \
            open(report.RESULTS / f"{family}.csv", newline="", encoding="utf-8") as g:
        reader = csv.DictReader(f)
        assert reader.fieldnames == next(csv.reader(g))
        rows = {r["case"]: r for r in reader}
    text = report.family_table(family, folder / f"{family}.csv")
    return rows, [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
                  if line.startswith("| ") and "---" not in line]


# The trainers read a bucket of bucket_size examples before their first batch: a run on documents keeps that under
# a million tokens (20000 documents of 4,096 tokens took over 11 GB of host memory and minutes before the first step)
BUCKET_TOKENS = 2**20


def _bucket_tokens(config: dict, length: int) -> int:
    return int(config["bucket_size"]) * length


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("bench")
    _run("benchmarks/bench_train.py", "--tiny", "--workdir", str(work), "--steps", "10")
    return work


def test_bench_host_ops_times_every_decoding_call_and_the_loss_call():
    rows = _table(_run("benchmarks/bench_host_ops.py"))
    for name in ("1.5-entmax attention, fused (attend)", "learned-alpha attention, fused (attend)",
                 "beam pick + certificate: ops.beam_topk", "ops.entmax15_loss, mean (kernel path)",
                 "F.cross_entropy, mean"):
        ops, us = rows[name][:2]
        assert int(ops) > 0 and float(us) > 0, name


def test_bench_translate_decodes_every_tiny_model_in_process_against_softmax(tiny_models, tmp_path):
    rows = _table(_run("benchmarks/bench_translate.py", "--workdir", str(tiny_models), "--lines", "8",
                       "--in-process", "--repeat", "2", "--median", "--csv", str(tmp_path),
                       "--data-label", "tiny"))
    for variant in VARIANTS:
        speed, ratio = rows[variant][:2]
        assert float(speed) > 0 and ratio.endswith("x"), variant
    assert rows["softmax"][1] == "1.00x"
    # --csv: the same numbers as decoding.csv rows, which report.py renders
    written, rendered = _csv(tmp_path, "decoding")
    for variant in VARIANTS:
        assert written[variant]["mode"] == "in one process" and written[variant]["runs_ms"] == rows[variant][-1]
        assert ["tiny", variant, rows[variant][0], rows["softmax"][0], rows[variant][1], rows[variant][2]] in \
            [r[:6] for r in rendered], variant


def test_bench_translate_process_runs_report_translation_time_and_whole_runs(tiny_models):
    """onmt_translate processes: -report_time's translation time, and each run's whole time with the
    model's loading (where the kernels' warm-up now runs), warm-up run included."""
    proc = _proc("benchmarks/bench_translate.py", "--workdir", str(tiny_models), "--lines", "4", "--repeat", "1")
    out = proc.stdout
    assert "model loading included" in out
    # each run is also reported as it ends (a run cut short by a time limit keeps those lines)
    progress = [line for line in proc.stderr.splitlines() if line.startswith("[bench_translate]")]
    assert len(progress) == 2 * len(VARIANTS), proc.stderr[-2000:]
    assert all(re.search(r"ms a sentence, whole run [0-9.]+ s$", line) for line in progress), progress
    timed, whole_runs = out.split("model loading included")
    rows, whole = _table(timed), _table(whole_runs)
    for variant in VARIANTS:
        assert float(rows[variant][0]) > 0, variant
        runs = [float(t) for t in whole[variant][0].split()]
        assert len(runs) == 2 and min(runs) > 0, variant


def test_profile_translate_counts_each_models_beam_steps(tiny_models, tmp_path):
    rows = _table(_run("benchmarks/profile_translate.py", "--workdir", str(tiny_models), "--lines", "8",
                       "--csv", str(tmp_path)))
    for variant in VARIANTS:
        steps, aten_ops = rows[variant][:2]
        assert int(steps) > 0 and float(aten_ops) > 0, variant
    _, rendered = _csv(tmp_path, "decoding-steps")
    assert sorted(r[1:] for r in rendered[1:]) == sorted([v, *rows[v]] for v in VARIANTS)  # data: the workdir's name


def test_bench_train_in_process_rounds_give_each_variant_its_paired_interval(tmp_path):
    """Six rounds (the fewest with a 95% interval) of one step, after one warm-up step on each of two batches."""
    rows = _table(_run("benchmarks/bench_train.py", "--tiny", "--workdir", str(tmp_path), "--steps", "1",
                       "--rounds", "6", "--in-process", "--in-process-batches", "2", "--csv", str(tmp_path / "csv")))
    for variant in ("softmax", "entmax15 (output + all attention)", "learned alpha (all attention)",
                    "1.5-ReLU output"):
        rate, _, paired = rows[variant][:3]
        assert float(rate) > 0 and paired.endswith(")") and "x (" in paired, variant
    assert rows["softmax"][2] == "1.00x (1.00-1.00)"
    # --csv: training.csv rows with the printed numbers, rendered by report.py as printed
    written, rendered = _csv(tmp_path / "csv", "training")
    for variant, (rate, vs, paired, *_) in rows.items():
        if variant in written:
            assert written[variant]["mode"] == "in one process" and written[variant]["rounds"] == "6"
            assert ["synthetic 0k", variant, rate, rows["softmax"][0], vs, paired] in [r[:6] for r in rendered]
    assert len(written) == 4


def test_profile_train_gives_each_config_its_step_costs_and_python_profile(tiny_models):
    configs = [str(tiny_models / v / "config.yaml") for v in ("softmax", "entmax15_output_all_attention_")]
    out = _run("benchmarks/profile_train.py", *configs, "--steps", "2", "--profile-steps", "1", "--python", "1",
               "--sample", "2", "--host-ab", "1", "--batches", "2", "--top", "30", "--sync-sites", "2")
    steps, host = out.split("\nhost settings, ")
    rows = _table(steps)
    for config in configs:
        rate, wall_ms, _gpu_ms, _launches, _syncs, aten = rows[config][:6]
        assert float(rate) > 0 and float(wall_ms) > 0 and float(aten) > 0, config
        assert f"{config}: Python functions with the most time of their own (1 steps, cProfile)" in out
        sampled = out.split(f"{config}: share of wall time each function is on the stack (2 steps, sampled)\n")[1]
        assert "thread MainThread:" in sampled.split("\n")[0]
        # the steps are (nearly) the main thread's whole wall time while sampled
        share = re.search(r"([\d.]+)%  train_steps \(profile_train\.py", sampled)
        assert share and float(share.group(1)) > 90, sampled[:800]
        settings = [line.split("|")[2].strip() for line in host.split("\n\n")[1].splitlines()
                    if line.startswith(f"| {config} |")]
        assert settings == ["as is", "gc.freeze", "backward on the calling thread", "both"], settings
        # the loss's statistics read the loss and the correct words back every step (syncs on CUDA)
        reads = out.split(f"{config}: reads of tensors back to the host, calls a step (2 steps; CPU run")[1]
        reads = reads.split("\n\n")[0]
        assert re.search(r"\n +1\.0  item +onmt/utils/loss\.py:\d+ _stats", reads), reads


def test_bench_rnn_graphs_reports_each_decoder_and_the_same_validations_on_a_cpu(tmp_path):
    out = _run("benchmarks/bench_rnn_graphs.py", "configs/examples/rnn-entmax15.yaml", "--steps", "20",
               "--report-every", "5", "--valid-steps", "10", "--skip", "5", "--workdir", str(tmp_path))
    rows = _table(out)
    assert rows.pop("decoder")[0] == "steps/s"  # (the header)
    assert set(rows) == {"eager", "CUDA graphs"} and rows["eager"][1] == "1.00x"
    assert float(rows["CUDA graphs"][0]) > 0
    assert rows["eager"][3] == rows["CUDA graphs"][3]  # a CPU runs no graphs: the same training


def test_bench_rnn_graphs_leaves_validation_windows_out_of_the_rate_and_times_them():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_rnn_graphs import speed

    log = "\n".join([
        "[2026-11-28 10:00:00,000 INFO] Step 100/ 400; acc: 1",
        "[2026-11-28 10:00:01,000 INFO] Step 200/ 400; acc: 1",   # 100 steps in 1 s
        "[2026-11-28 10:00:05,000 INFO] Validation accuracy: 50.5",
        "[2026-11-28 10:00:06,000 INFO] Step 300/ 400; acc: 1",   # 100 steps and a validation in 5 s
        "[2026-11-28 10:00:07,000 INFO] Step 400/ 400; acc: 1",   # 100 steps in 1 s
    ])
    rate, valid = speed(log, skip=100)
    assert rate == pytest.approx(100.0) and valid == [pytest.approx(4.0)]
    assert speed(log, skip=200)[0] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="no report window"):
        speed(log, skip=400)


def test_bench_mps_reports_each_trainers_rate_and_last_loss_on_a_cpu(tmp_path):
    """On the CPU only the trainers as they are (MPS needs a GPU): a row a config, a rate and a loss a
    seed; a --set variant trains with its option (here no learning: a higher loss for every seed)."""
    out = _run("benchmarks/bench_mps.py", "configs/examples/rnn-entmax15.yaml", "--trainers", "2", "--steps", "15",
               "--report-every", "5", "--skip", "5", "--workdir", str(tmp_path), "--set", "learning_rate=0.0")
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| 2 |")]
    assert [[c.strip() for c in row[:3]] for row in rows] == [["2", "as is", "as given"],
                                                              ["2", "as is", "learning_rate=0.0"]]
    losses = []
    for row in rows:
        each, in_all, seeds = (c.strip() for c in row[3:6])
        rates = [float(r) for r in each.split(", ")]
        assert len(rates) == 2 and all(r > 0 for r in rates)
        assert float(in_all) == pytest.approx(sum(rates), abs=0.11)
        losses.append([float(x) for x in seeds.split(", ")])
    assert all(frozen > trained > 0 for trained, frozen in zip(*losses)), losses


@pytest.mark.parametrize("args, message", [
    (["--set", "adam_fused"], "--set 'adam_fused': expected KEY=VALUE"),
    (["--ways", "mps"], "--ways mps needs --gpu"),
])
def test_bench_mps_refuses_a_malformed_set_and_mps_without_a_gpu_in_one_line(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "benchmarks/bench_mps.py", "configs/examples/rnn-entmax15.yaml",
                           "--workdir", str(tmp_path), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode != 0 and proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert message in proc.stderr


DOCUMENT_VARIANTS = ("softmax", "entmax15 (all attention)", "learned alpha (all attention)")


def test_bench_train_on_long_documents_trains_each_attention_writes_its_rows_and_its_models_decode(tmp_path):
    """--data long-copy (issue 62 item 5, here 64 tokens and a tiny model): every document has the tokens
    asked on both sides, the target the source's sentences in reverse order; softmax, 1.5-entmax and
    learned-alpha attention train through onmt_train and write the training.csv rows docs/benchmarks.md
    shows; a model decodes whole documents with onmt_translate."""
    work = tmp_path / "work"
    rows = _table(_run("benchmarks/bench_train.py", "--tiny", "--data", "long-copy", "--length", "64",
                       "--sentences", "12", "--steps", "4", "--report-every", "2", "--workdir", str(work),
                       "--csv", str(tmp_path / "csv")))
    src = (work / "train.src").read_text().splitlines()
    tgt = (work / "train.tgt").read_text().splitlines()
    assert len(src) == len(tgt) == 12
    for s, t in zip(src, tgt):
        assert len(s.split()) == len(t.split()) == 64
        sentences = [x.split() for x in s.replace("s. ", "s.\n").splitlines()]
        assert t.split() == ["t" + w[1:] for x in reversed(sentences) for w in x] and len(sentences) > 1
    assert set(rows) >= set(DOCUMENT_VARIANTS) and rows["softmax"][1] == "1.00x"
    assert _bucket_tokens(yaml.safe_load((work / "softmax" / "config.yaml").read_text()), 64) <= BUCKET_TOKENS
    written, rendered = _csv(tmp_path / "csv", "training")
    assert set(written) == set(DOCUMENT_VARIANTS)
    for variant in DOCUMENT_VARIANTS:
        assert float(written[variant]["ours"]) > 0 and written[variant]["data"] == "long copy 64 tokens, synthetic 0k"
        assert ["long copy 64 tokens, synthetic 0k", variant, rows[variant][0]] in [r[:3] for r in rendered]
    model = next((work / "learned_alpha_all_attention_").glob("model_step_*.pt"))
    (tmp_path / "docs.src").write_text("\n".join(src[:2]) + "\n")
    subprocess.run(["onmt_translate", "-model", str(model), "-src", str(tmp_path / "docs.src"), "-output",
                    str(tmp_path / "docs.out"), "-beam_size", "2", "-min_length", "64", "-max_length", "66"],
                   cwd=ROOT, check=True, capture_output=True, timeout=HANG_S)
    out = (tmp_path / "docs.out").read_text().splitlines()
    assert len(out) == 2 and all(len(line.split()) >= 64 for line in out), out


def test_bench_train_multi30k_documents_join_whole_captions_up_to_the_length(tmp_path):
    """--data multi30k-docs: consecutive caption pairs joined into documents of at most --length tokens a
    side, each caption whole and beside its translation, a document ended only where the next pair
    would not fit; a blank caption and one longer than a document left out."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gzip

    from bench_train import multi30k_documents

    de = [f"Ein Hund c{i} läuft" + " weit" * (i % 5) for i in range(40)]
    en = [f"A dog c{i} runs" + " far" * (i % 3) for i in range(40)]
    de[7], en[12] = "", "A dog c12" + " far" * 30  # left out: a blank caption, one longer than 20 tokens
    for lang, lines in (("de", de), ("en", en)):
        with gzip.open(tmp_path / f"train.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    (tmp_path / "out").mkdir()
    src, tgt = multi30k_documents(tmp_path / "out", tmp_path, "de", "en", 20)
    docs = list(zip(src.read_text().splitlines(), tgt.read_text().splitlines()))
    kept = [i for i in range(40) if i not in (7, 12)]
    ids = [[int(w[1:]) for w in side.split() if re.fullmatch(r"c\d+", w)] for doc in docs for side in doc]
    assert len(docs) > 5 and ids[0::2] == ids[1::2]  # each caption beside its translation
    assert [i for doc in ids[0::2] for i in doc] == kept[:sum(map(len, ids[0::2]))]
    for (s, t), doc in zip(docs, ids[0::2]):
        assert s.split() == " ".join(de[i] for i in doc).lower().split()
        assert t.split() == " ".join(en[i] for i in doc).lower().split()
        assert len(s.split()) <= 20 and len(t.split()) <= 20
        nxt = kept[kept.index(doc[-1]) + 1]
        assert len(s.split()) + len(de[nxt].split()) > 20 or len(t.split()) + len(en[nxt].split()) > 20


def test_bench_train_refuses_a_length_beyond_the_position_table_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/bench_train.py", "--tiny", "--data", "long-copy", "--length",
                           "5000", "--workdir", str(tmp_path / "work")], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "--length 5000" in proc.stderr and "5000" in proc.stderr.replace("--length 5000", "")
    assert not (tmp_path / "work").exists()  # refused before any data is written


def test_bench_eole_long_trains_on_whole_documents_writes_its_rows_and_decodes_a_document(tmp_path):
    """bench_eole_long.py (issue 62 item 5, Eole; here 64 tokens, a tiny model, the 1.5-entmax variant alone:
    each `eole` process imports Eole for seconds): `eole train`'s report windows held whole documents (64
    target tokens and </s> each: none filtered or cut), the training.csv and decoding.csv rows report.py
    renders, and `eole predict` decoded one whole document."""
    work, variant = tmp_path / "work", "entmax15 (all attention)"
    out = _run("benchmarks/bench_eole_long.py", "--tiny", "--length", "64", "--documents", "12", "--steps", "4",
               "--report-every", "2", "--variants", variant, "--workdir", str(work), "--csv", str(tmp_path / "csv"))
    training, decoding = (_table(part) for part in out.split("eole predict of one document"))
    rate, _, _, windows, _, per_document = training[variant][:6]
    assert float(rate) > 0 and windows == "1" and per_document == "65-65"
    assert float(decoding[variant][0]) > 0 and decoding[variant][2] == "64"
    written, rendered = _csv(tmp_path / "csv", "training")
    data = "long copy 64 tokens, synthetic 0k"
    assert written[variant]["mode"] == "eole train" and written[variant]["data"] == data
    assert [data, variant, rate] in [r[:3] for r in rendered]
    decoded, _ = _csv(tmp_path / "csv", "decoding")
    assert decoded[variant]["mode"] == "eole predict" and decoded[variant]["output_words"] == "64"
    out = (work / "entmax15_all_attention_" / "round0" / "document.pred").read_text().splitlines()
    assert len(out) == 1 and len(out[0].split()) == 64
    cfg = yaml.safe_load((work / "entmax15_all_attention_" / "round0" / "config.yaml").read_text())
    assert _bucket_tokens(cfg["training"], 64) <= BUCKET_TOKENS


def test_bench_eole_long_reads_the_target_tokens_a_document_of_each_report_window(tmp_path):
    """A window's documents came in report_every batches: report_every x the batch's target tokens / the
    window's documents a document, whatever Eole's rounding of the documents a batch."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_eole_long import windows

    log = "\n".join([
        "[2026-12-01 19:19:47,223 INFO] Step  2/    4; acc: 0.4; lr: 7.91e-06; sents:       4; bsz:  128/ 130/ 2; "
        "132/134 tok/s;      2 sec;",  # 2 batches of 2 documents of 65 target tokens
        "[2026-12-01 19:19:48,223 INFO] Step  4/    4; acc: 0.4; lr: 7.91e-06; sents:       3; bsz:   96/  98/ 2; "
        "100/1000 tok/s;      3 sec;",  # 2 batches of 1.5 documents (printed 2) of 65.33 target tokens
    ])
    (tmp_path / "train.log").write_text(log)
    seen = windows(tmp_path / "train.log", report_every=2)
    assert [rate for rate, _ in seen] == [134.0, 1000.0]
    assert [round(size, 2) for _, size in seen] == [65.0, 65.33]


def test_bench_eole_long_refuses_a_length_beyond_eoles_position_table_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/bench_eole_long.py", "--tiny", "--length", "4999",
                           "--workdir", str(tmp_path / "work")], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "--length 4999" in proc.stderr and "5000" in proc.stderr
    assert not (tmp_path / "work").exists()  # refused before any data is written


def test_bench_long_attention_resume_skips_only_this_commits_cases_on_this_gpu(tmp_path):
    """`--resume` after a run cut short at a machine's limit: the cases this commit measured on this GPU are
    done; the same case of another commit or GPU is not (it is measured again), and a cross-attention row
    names its case by its Tq, half of T."""
    pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location("bench_long_attention", ROOT / "benchmarks" /
                                                  "bench_long_attention.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = tmp_path / "long.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=bench.FIELDS)
        w.writeheader()
        for gpu, commit, attention, causal, tq in (("H200", "new", "self", 0, 4096), ("H200", "old", "self", 1, 4096),
                                                   ("H100", "new", "self", 1, 4096), ("H200", "new", "cross", 0, 2048)):
            w.writerow({f: "" for f in bench.FIELDS} | {"gpu": gpu, "commit": commit, "dtype": "bf16",
                                                         "kind": "entmax15", "attention": attention, "causal": causal,
                                                         "mask": "none", "tq": tq, "tk": 4096})
    done = bench.done_cases(str(path), "H200", "new")
    assert done == {bench.case_key("bf16", "entmax15", "self", False, "none", 4096, 4096),
                    bench.case_key("bf16", "entmax15", "cross", False, "none", 2048, 4096)}
    assert bench.done_cases(str(tmp_path / "none.csv"), "H200", "new") == set()
    # --skip-measured-by old: the old commit's case on this GPU is skipped too, not its H100 one
    assert bench.done_cases(str(path), "H200", "new", "old") == done | {
        bench.case_key("bf16", "entmax15", "self", True, "none", 4096, 4096)}
