#!/usr/bin/env python3
"""Run or collect the experiments of one table, over seeds, and print it beside the paper's numbers.

    scripts/reproduce.sh TABLE [--seeds 1 2 3] [--gpus 0 1] [--jobs N] [--only GLOB ...]  # every step
    python3 scripts/reproduce/reproduce.py table TABLE                      # collect finished runs only

Steps (each skips work already done, so an interrupted reproduction resumes):
  data      prepare work/data/<corpus> (SIGMORPHON from ../shared/data or --sigmorphon ARCHIVE;
            MT: download.py + extract.py + prepare_mt.py)
  train     onmt_build_vocab once per corpus, then onmt_train -config C -seed S into runs/<family>/<name>/seed<S>/
  evaluate  best checkpoint = highest "Validation accuracy" in train.log (Peters et al.: best validation
            accuracy), onmt_translate -beam_size 5 on the test set, scores.json; SIGMORPHON also
            decodes the ensemble of the seeds (-avg_raw_probs: averaged probabilities) into ensemble/
  record    peters2019-table1 and peters2019-table1-fork: one row per finished, evaluated run into
            docs/results/<table>.csv, its validations into docs/results/<table>-validation.csv, its
            languages' scores into <table>-languages.csv, and the ensemble of a configuration's finished
            seeds into <table>-ensembles.csv (from train.log and scores.json)
  analyze   for peters2019-table3, peters2019-sec4.1, tezekbayev-table2: decode the validation set of
            the source table's runs with onmt_translate's analyses (sparsity, certificates, empty output);
            tezekbayev-table3: the tau that generator_tau auto chose, from the training logs
  table     markdown: mean ± std over seeds (ours) beside the paper (the tables that record: from their CSV)
  plot      Figure 4: best validation accuracy against alpha (PNG), from the training logs
  runs      markdown: a row a recorded run (CSV tables): length, how it ended, best validation and its
            epoch, the learning-rate halvings, test scores
  status    where each run stands: validations, best validation accuracy and when, validations since
            (against early_stopping), learning rate, finished or not and why (stop rule or step cap), the
            step its scores are for, steps/s of its last piece and minutes from its newest checkpoint to
            train_steps at that rate; a table with an ensemble column: each configuration's ensemble and
            which seeds' best checkpoints are here to decode it
  pack      the runs' resumable state (logs, scores, newest checkpoint of an unfinished run, best
            checkpoint not yet scored) in batches small enough to leave a time-limited machine: --to DIR
  unpack    put packed runs back under runs/ (checked against the pack's sha256s): --from DIR ...
            (then train resumes them and evaluate scores them, as on the machine they came from)
Tables: peters2019-table1, peters2019-table1-fork, peters2019-table2, peters2019-fig4-attention, peters2019-fig4-output,
correia2019-bleu, tezekbayev-table1, multi30k-rnn, multi30k-transformer; analyses: peters2019-table3, peters2019-sec4.1,
tezekbayev-table2, tezekbayev-table3, multi30k-transformer-analysis.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
try:
    import onmt_entmax.evaluation  # noqa: F401
except ImportError:  # source checkout without `pip install -e .` (before the helpers: carry imports it too)
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import experiments as E  # noqa: E402
import results_csv  # noqa: E402
import carry  # noqa: E402
import mps  # noqa: E402
from pieces import (_VALID, best_checkpoint, device_name, latest_checkpoint, missing_gpus,  # noqa: E402,F401
                    run_pieces, scored_step, step_of, trainer_of)  # (re-exported)
from onmt_entmax.evaluation import bleu, sigmorphon, tables  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
WORK = ROOT  # where work/data, work/downloads and runs/ live (config paths are relative to it)
TRANSLATE_BATCH = 64  # sentences per onmt_translate batch (--translate-batch: larger on a GPU)
_TAU = re.compile(r"generator_tau auto: tau = ([0-9.eE+-]+)")  # logged by onmt_entmax.onmt.training.loss


def gpu_env(gpu: int | None) -> dict | None:
    """The environment that puts a child process on GPU ``gpu`` as its device 0 (one-GPU onmt_train
    always trains on device 0, whatever -gpu_ranks says); None (inherit) for the CPU."""
    return None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}


def run(cmd: list[str], cwd: Path | None = None, log: Path | None = None, gpu: int | None = None) -> None:
    """Run a command in ``cwd`` (default WORK), on GPU ``gpu`` if given; with ``log``, stdout and
    stderr go to that file. A failed command stops the script with a message that names it, its exit
    status and its log (whose last lines it quotes), not with a Python traceback."""
    cwd, env = cwd or WORK, gpu_env(gpu)
    on = "" if gpu is None else f"CUDA_VISIBLE_DEVICES={gpu} "
    print("+", on + " ".join(map(str, cmd)), *([">", log] if log else []), flush=True)
    if log is None:
        rc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env).returncode
        if rc != 0:
            raise SystemExit(f"reproduce.py: {Path(str(cmd[0])).name} failed (exit status {rc}); its output is above")
        return
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.run([str(c) for c in cmd], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = "".join(Path(log).read_text(encoding="utf-8", errors="replace").splitlines(True)[-15:])
        raise SystemExit(f"reproduce.py: {Path(str(cmd[0])).name} failed (exit status {proc.returncode}); "
                         f"the last lines of {log}:\n{tail.rstrip()}")


def globs_of(only: str | list[str] | None) -> list[str]:
    """``--only`` as a list of globs (a single glob, a list of them, or none)."""
    return [only] if isinstance(only, str) else list(only or [])


def selected(name: str, only: str | list[str] | None) -> bool:
    """Whether an experiment name matches ``only``: a glob or a list of globs (any of them); None: all."""
    return not only or any(fnmatch.fnmatch(name, pattern) for pattern in globs_of(only))


def experiments(table: str, only: str | list[str] | None = None) -> list[E.Experiment]:
    """The experiments of ``table`` that ``only`` selects, in the order its globs name them (each
    glob's matches in the table's order), so that ``train --jobs N`` starts the first N named first."""
    if table not in E.TABLES:
        raise SystemExit(f"unknown table {table!r}; tables: {', '.join(E.TABLES)}")
    found = [e for e in E.all_experiments() if e.table == table]
    check_only(only, [e.name for e in found], table)
    ordered: list[E.Experiment] = []
    for glob in globs_of(only) or ["*"]:
        ordered += [e for e in found if selected(e.name, glob) and e not in ordered]
    return ordered


def check_only(only: str | list[str] | None, names: list[str], table: str) -> None:
    """Refuse, in one line, an ``--only`` glob that matches none of ``names`` (a typo would otherwise
    select nothing and the command would do nothing without a word)."""
    unmatched = [g for g in globs_of(only) if not any(selected(n, g) for n in names)]
    if unmatched:
        raise SystemExit(f"--only {' '.join(unmatched)}: no experiment of {table} matches; its names: "
                         + ", ".join(names))


# ------------------------------------------------------------------------------------------ data
def prepare_data(e: E.Experiment, sigmorphon_archive: Path | None) -> None:
    out = WORK / E.DATA / e.corpus
    if e.task == "sigmorphon":
        if (out / "src-train.txt").exists():
            return
        archive = sigmorphon_archive or SHARED / "sigmorphon2018-task1.tar.gz"
        if not archive.exists():
            given = f"--sigmorphon {archive}: no such archive or folder" if sigmorphon_archive else \
                f"no SIGMORPHON 2018 archive at {archive}"
            raise SystemExit(f"data {e.table}: {given}; fetch it with `python3 scripts/data/download.py "
                             "sigmorphon2018 --out work/downloads` and give --sigmorphon work/downloads/sigmorphon2018")
        run([sys.executable, ROOT / "scripts/data/prepare_sigmorphon2018.py", "--source", archive, "--out", out,
             "--setting", e.corpus.rsplit("-", 1)[1]])
        return
    if (out / "prepare.json").exists():
        return
    downloads = WORK / "work/downloads"
    if e.corpus == "multi30k" and (SHARED / "multi30k").exists():  # the full corpus is in ../shared/data
        source = SHARED / "multi30k"
    else:
        run([sys.executable, ROOT / "scripts/data/download.py", e.corpus, "--out", downloads])
        source = downloads / e.corpus
    extra = []
    if e.corpus == "iwslt17-de-en":
        run([sys.executable, ROOT / "scripts/data/download.py", "iwslt17-de-en-test", "--out", downloads])
        extra = ["--testsets", downloads / "iwslt17-de-en-test"]
    shared_tests = SHARED / "mt-testsets" / SHARED_TESTSETS.get(e.corpus, "-")
    if shared_tests.exists() and e.corpus != "iwslt14-de-en":  # dev/test sets already here: no SacreBLEU download
        extra = ["--testsets", shared_tests]
    run([sys.executable, ROOT / "scripts/data/extract.py", e.corpus, "--downloads", source,
         "--out", out / "raw", *extra])
    run([sys.executable, ROOT / "scripts/data/prepare_mt.py", e.corpus, "--raw", out / "raw", "--out", out, "--jobs", "8"])


SHARED_TESTSETS = {"iwslt17-de-en": "iwslt17-de-en", "kftt-ja-en": "kftt", "wmt16-ro-en": "wmt16-ro-en",
                   "wmt14-en-de": "wmt14-en-de", "wmt13-en-ru": "wmt13-en-ru"}


def build_vocab(cfg: dict, config: Path | str, cwd: Path | None = None) -> None:
    """onmt_build_vocab over the whole training data, once per corpus (skipped when the files exist).

    The vocabularies are written under temporary names and renamed once complete, holding a lock beside
    them: a build killed midway (a lease's end) leaves no partial file that the next runner would take
    for the vocabulary, and two runners started at once on one corpus build it once, not over each other."""
    cwd = cwd or WORK
    finals = [cwd / cfg[k] for k in ("src_vocab", "tgt_vocab")]
    if all(p.exists() for p in finals):
        return
    finals[0].parent.mkdir(parents=True, exist_ok=True)
    with open(finals[0].with_name(finals[0].name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when this process dies
        if all(p.exists() for p in finals):  # built by the runner that held the lock before
            return
        part = {p: p.with_name(f"{p.name}.part{os.getpid()}") for p in finals}  # one part for a shared path
        run(["onmt_build_vocab", "-config", config, "-n_sample", "-1", "-overwrite",
             "-src_vocab", part[finals[0]], "-tgt_vocab", part[finals[1]],
             "-save_data", Path(cfg["src_vocab"]).parent / "onmt_sample"], cwd=cwd)
        for final, tmp in part.items():
            if not tmp.exists():
                raise SystemExit(f"reproduce.py: onmt_build_vocab wrote no {final} (config {config})")
            os.replace(tmp, final)


# ------------------------------------------------------------------------------------- train/eval
def train_command(e: E.Experiment, seed: int, gpu: bool, extra: list[str] = ()) -> list[str]:
    """onmt_train for one seed, on a GPU or the CPU (pieces.run_pieces picks the GPU by
    CUDA_VISIBLE_DEVICES and adds -train_from when a piece ran before)."""
    run_dir = WORK / e.run_dir / f"seed{seed}"
    gpu_args = ["-world_size", "1", "-gpu_ranks", "0"] if gpu else []
    return [str(c) for c in ["onmt_train", "-config", ROOT / e.path, "-seed", str(seed),
                             "-save_model", run_dir / "model", *gpu_args, *extra]]


def train_all(runs: list[tuple[E.Experiment, int]], gpus: list[int] | None, extra: list[str] = (), jobs: int = 1,
              max_minutes: float | None = None, resume_only: bool = False, retries: int = 1) -> list[Path]:
    """Train (experiment, seed) pairs, ``jobs`` at a time spread over ``gpus`` (None: the CPU; small
    models leave a GPU mostly idle, so several share one), in pieces of at most ``max_minutes`` (see
    pieces.py; ``resume_only``: only continue runs that have a checkpoint; ``retries``: starts again of a
    failed piece). Returns the unfinished runs."""
    return run_pieces([(WORK / e.run_dir / f"seed{s}", train_command(e, s, bool(gpus), list(extra)))
                       for e, s in runs], WORK, jobs, max_minutes, gpus or None, resume_only, retries)


def train(e: E.Experiment, seed: int, gpu: int | None, extra: list[str] = ()) -> Path:
    """onmt_train -config <e> -seed <seed> into runs/.../seed<seed>/ (skipped if it finished before,
    resumed from its newest checkpoint if a piece of it ran before)."""
    train_all([(e, seed)], None if gpu is None else [gpu], extra)
    return WORK / e.run_dir / f"seed{seed}"


def translate(models: list[str], src: Path, out: Path, gpu: int | None, extra: list[str] = (), cwd: Path | None = None) -> None:
    """Beam 5 (Peters et al. §4); several models: an ensemble averaging probabilities (-avg_raw_probs);
    ``extra``: the experiment's decoding options (``Experiment.decode``) and any others."""
    gpu_args = ["-gpu", "0"] if gpu is not None else []  # (the GPU itself: CUDA_VISIBLE_DEVICES)
    ens = ["-avg_raw_probs"] if len(models) > 1 else []
    run(["onmt_translate", "-model", *models, "-src", src, "-output", out, "-beam_size", "5",
         "-batch_size", str(TRANSLATE_BATCH), "-max_length", "250", *ens, *gpu_args, *extra], cwd=cwd,
        log=Path(out).with_suffix(".log"), gpu=gpu)


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def score(e: E.Experiment, pred: Path, data: Path = None) -> dict:
    """Test-set scores of a prediction file (SIGMORPHON: averaged over languages; MT: both BLEUs)."""
    data = data or WORK / E.DATA / e.corpus
    hyp = read_lines(pred)
    if e.task == "sigmorphon":
        per = sigmorphon.score_multilingual(read_lines(data / "src-test.txt"), hyp, read_lines(data / "tgt-test.txt"))
        return {"accuracy": per["average"]["accuracy"], "levenshtein": per["average"]["levenshtein"],
                "per_language": per}
    prepared = json.loads((data / "prepare.json").read_text())
    lower = prepared["recipe"]["lowercase"]
    undo = bleu.remove_sentencepiece if prepared.get("subword") == "sentencepiece" else bleu.remove_bpe
    tok_hyp = [undo(h) for h in hyp]
    raw_ref = read_lines(data / f"test.raw.{e.tgt}")
    if lower:
        raw_ref = [r.lower() for r in raw_ref]
    out = {"tokenized_bleu": bleu.tokenized_bleu(tok_hyp, read_lines(data / f"test.tok.{e.tgt}"))}
    try:
        out["sacrebleu"], out["signature"] = bleu.sacrebleu_score(bleu.moses_detokenize(tok_hyp, e.tgt), raw_ref, e.tgt)
    except RuntimeError as err:  # e.g. Japanese without MeCab: keep the tokenized score
        out["sacrebleu_error"] = str(err)
    return out


def test_source(e: E.Experiment, split: str = "test") -> Path:
    d = WORK / E.DATA / e.corpus
    return d / (f"src-{split}.txt" if e.task == "sigmorphon" else f"{split}.bpe.{e.src}")


def analysis_runs(name: str) -> list[E.Experiment]:
    a = E.ANALYSES[name]
    return [e for e in experiments(a.source) if re.fullmatch(a.keep, e.name)]


# onmt_translate refuses these for a dense (softmax) output layer: no beam is ever exhaustive there
_SPARSE_OUTPUT_ONLY = {"-certificate": 0, "-enumerate_support": 0, "-enumerate_cap": 1}


def analysis_flags(a: E.Analysis, e: E.Experiment) -> list[str]:
    """The analysis options for one run, without those that need a sparse output layer if ``e``'s is softmax."""
    if e.config.get("generator_function", "softmax") != "softmax":
        return list(a.flags)
    out, skip = [], 0
    for flag in a.flags:
        if skip:
            skip -= 1
        elif flag in _SPARSE_OUTPUT_ONLY:
            skip = _SPARSE_OUTPUT_ONLY[flag]
        else:
            out.append(flag)
    return out


def spread_sample(src: Path, n: int, out: Path) -> Path:
    """Every k-th line of ``src``, at most ``n`` lines (the multilingual SIGMORPHON dev set is ordered
    by language: a spread sample keeps every language in proportion); ``src`` itself if it is short."""
    lines = read_lines(src)
    if len(lines) <= n:
        return src
    k = -(-len(lines) // n)
    out.write_text("".join(line + "\n" for line in lines[::k]), encoding="utf-8")
    return out


def analyze(name: str, seeds: list[int], gpus: list[int] | None, only: str | list[str] | None = None, jobs: int = 1,
            max_lines: int | None = None) -> None:
    """Decode the validation set (or a spread sample of ``max_lines``) of each run with the analysis
    options; summary -> analysis-<name>.json."""
    from onmt_entmax.analysis.report import read_jsonl, summarize

    a = E.ANALYSES[name]

    def one(e: E.Experiment, gpu: int | None) -> None:
        for seed in seeds:
            run_dir = WORK / e.run_dir / f"seed{seed}"
            out = run_dir / f"analysis-{name}.json"
            if not (run_dir / "train.log").exists():
                continue
            log = (run_dir / "train.log").read_text(encoding="utf-8")
            if not a.flags:  # read from the training log
                taus = _TAU.findall(log)
                out.write_text(json.dumps({"tau": float(taus[-1])} if taus else {}) + "\n")
                continue
            if (best := _best_validated(run_dir, log)) is None:
                continue
            ckpt = best[0]
            if _scored(out, ckpt, "checkpoint", e.decode):
                continue
            if not checkpoint_file(run_dir, ckpt).exists():  # a carried run: its scored best stayed behind
                print(f"skip {run_dir}: its best checkpoint {Path(ckpt).name} is not on this machine (analyze "
                      "where it was trained, or pack it with --with-best)", file=sys.stderr)
                continue
            report = run_dir / f"analysis-{name}.jsonl"
            src = test_source(e, "dev")
            if max_lines:
                src = spread_sample(src, max_lines, run_dir / f"dev.sample{max_lines}.txt")
            translate([checkpoint_file(run_dir, ckpt)], src, run_dir / f"pred.dev.{name}.txt", gpu,
                      [*e.decode, *analysis_flags(a, e), "-entmax_report", report])
            out.write_text(json.dumps({**summarize(read_jsonl(str(report))), "checkpoint": ckpt,
                                       "decode": list(e.decode)}, indent=1) + "\n")

    runs = analysis_runs(name)
    check_only(only, [e.name for e in runs], name)
    todo = [e for e in runs if selected(e.name, only)]
    if a.layout == "best":  # only the column's best validated configuration is reported: decode only it
        columns: dict[str, list[E.Experiment]] = {}
        for e in todo:
            columns.setdefault(e.column, []).append(e)
        todo = [max(group, key=mean_best_dev) for group in columns.values()]
    _parallel(one, todo, jobs, gpus)


def _parallel(fn, items: list, jobs: int, gpus: list[int] | None = None) -> None:
    """fn(item, gpu) over items, ``jobs`` at a time (each call mostly waits on an onmt_translate
    process), item i on GPU gpus[i % len(gpus)] (None: the CPU)."""
    on = [gpus[i % len(gpus)] if gpus else None for i in range(len(items))]
    if jobs <= 1:
        for item, gpu in zip(items, on):
            fn(item, gpu)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(jobs) as pool:
        for _ in pool.map(fn, items, on):  # re-raises the first failure
            pass


def mean_best_dev(e: E.Experiment, runs: Path | None = None) -> float:
    """Mean over seeds of the best validation accuracy in each training log (-inf if none validated)."""
    vals = []
    for log in sorted(((runs or WORK) / e.run_dir).glob("seed*/train.log")):
        try:
            vals.append(best_checkpoint(log.read_text(encoding="utf-8"))[1])
        except ValueError:
            pass
    return sum(vals) / len(vals) if vals else float("-inf")


def collect_analysis(name: str, runs: Path | None = None) -> dict[tuple[str, str], list[float]]:
    """{(row, column): [value of each seed]} of an analysis table (layouts: see experiments.Analysis)."""
    a, runs = E.ANALYSES[name], runs or WORK
    cells: dict[tuple[str, str], list[float]] = {}
    groups: dict[str, list[E.Experiment]] = {}
    for e in analysis_runs(name):
        groups.setdefault(e.column, []).append(e)
    for column, group in groups.items():
        if a.layout == "best":  # the run with the best mean validation accuracy of its column
            group = [max(group, key=lambda e: mean_best_dev(e, runs))]
        for e in group:
            for path in sorted((runs / e.run_dir).glob(f"seed*/analysis-{name}.json")):
                summary = json.loads(path.read_text())
                for col, (key, scale) in a.columns.items():
                    if summary.get(key) is None:
                        continue
                    cell = {"row": (e.row, col), "best": (col, e.column), "transpose": (col, e.column),
                            "by-column": (e.row, e.column)}[a.layout]
                    cells.setdefault(cell, []).append(scale * summary[key])
    return cells


def print_analysis(name: str, runs: Path | None = None) -> str:
    a = E.ANALYSES[name]
    paper = {(k[2], k[3]): v for k, v in tables.load_paper_numbers().items() if k[:2] == a.paper}
    src = E.TABLES[a.source]
    if a.layout == "row":
        rows, cols = src.rows, tuple(a.columns)
    elif a.layout in ("best", "transpose"):
        rows, cols = tuple(a.columns), tuple(dict.fromkeys(e.column for e in analysis_runs(name)))
    else:
        rows, cols = src.rows, src.columns
    return f"### {a.title}\n\n" + tables.markdown_table(rows, cols, collect_analysis(name, runs), paper)


def checkpoint_file(run_dir: Path, logged: str) -> Path:
    """The checkpoint a training log names, on this machine: the logged path (relative: under WORK), or
    the file of that name in the run's folder (a run carried from another machine: carry.py)."""
    path = Path(logged) if Path(logged).is_absolute() else WORK / logged
    return path if path.exists() else run_dir / path.name


def scored_checkpoint_here(run_dir: Path) -> Path | None:
    """The checkpoint the run's scores.json scores, if it is on this machine (an ensemble needs it here)."""
    logged = (results_csv.scores_of(run_dir) or {}).get("checkpoint")
    return None if logged is None or not (path := checkpoint_file(run_dir, logged)).exists() else path


def _scored(path: Path, checkpoint, key: str, decode: tuple[str, ...]) -> bool:
    """Whether ``path`` holds the scores of this checkpoint (or list) decoded with these options: a run
    resumed after it was evaluated has a newer best checkpoint, and is decoded again, as is one scored
    with other decoding options (scores written before they were recorded have none)."""
    if not path.exists():
        return False
    done = json.loads(path.read_text())
    return done.get(key) == checkpoint and done.get("decode") == list(decode)


def _best_validated(run_dir: Path, log: str) -> tuple[str, float] | None:
    """(checkpoint, validation accuracy) of the best validation in a run's training log, or None (said on
    stderr) before its first validation with a checkpoint: nothing to decode yet."""
    try:
        return best_checkpoint(log)
    except ValueError as err:
        print(f"skip {run_dir}: {err}", file=sys.stderr)
        return None


def scored_seeds(base: Path) -> set[str]:
    """The seed folders (``seed1``, ...) of an experiment's folder that have test scores."""
    return {p.parent.name for p in base.glob("seed*/scores.json")}


def ensemble_seeds(checkpoints: list[str]) -> set[str]:
    """The seed folders an ensemble's checkpoints (their logged paths) come from."""
    return {Path(c).parent.name for c in checkpoints}


def ensemble_members(checkpoints: list[str]) -> set[tuple[str, str]]:
    """(seed folder, checkpoint file name) of each of an ensemble's checkpoints (their logged paths)."""
    return {(Path(c).parent.name, Path(c).name) for c in checkpoints}


def wanted_by_ensemble(e: E.Experiment, run_dir: Path) -> bool:
    """Whether the scored best checkpoint of the finished run ``run_dir`` is here and still needed for its
    configuration's ensemble (a table with an "ens." column whose decoded ensemble does not hold it)."""
    best = scored_checkpoint_here(run_dir)
    if not E.TABLES[e.table].ensemble or not (run_dir / "train.done").exists() or best is None:
        return False
    ens = results_csv.scores_of(run_dir.parent / "ensemble") or {}
    return (run_dir.name, best.name) not in ensemble_members(ens.get("checkpoints", []))


def _decode_test(e: E.Experiment, models: list[Path], out: Path, gpu: int | None) -> dict:
    """Decode the test set with ``models`` (several: their ensemble) into ``out``: the scores, with the
    decoding options, seconds and device."""
    t0 = time.perf_counter()
    translate(models, test_source(e), out, gpu, e.decode)
    seconds = time.perf_counter() - t0
    return {"decode": list(e.decode), "translate_seconds": round(seconds, 1), "gpu": device_name(gpu),
            **score(e, out)}


def evaluate(e: E.Experiment, seeds: list[int], gpu: int | None) -> None:
    best, best_files, absent = [], [], []  # absent: seeds given without a validated checkpoint here
    for seed in seeds:
        run_dir = WORK / e.run_dir / f"seed{seed}"
        if not (run_dir / "train.log").exists():
            print(f"skip {run_dir}: not trained", file=sys.stderr)
            absent.append(run_dir.name)
            continue
        log = (run_dir / "train.log").read_text(encoding="utf-8")
        if (validated := _best_validated(run_dir, log)) is None:
            absent.append(run_dir.name)
            continue
        ckpt, dev_acc = validated
        best.append(ckpt)
        best_files.append(checkpoint_file(run_dir, ckpt))
        if _scored(run_dir / "scores.json", ckpt, "checkpoint", e.decode):
            continue
        if not best_files[-1].exists():  # a carried run whose best checkpoint stayed behind (carry.py)
            print(f"skip {run_dir}: its best checkpoint {Path(ckpt).name} is not on this machine", file=sys.stderr)
            continue
        result = {"checkpoint": ckpt, "step": step_of(ckpt), "dev_accuracy": dev_acc,
                  "finished": (run_dir / "train.done").exists(),
                  **_decode_test(e, [best_files[-1]], run_dir / "pred.test.txt", gpu)}
        (run_dir / "scores.json").write_text(json.dumps(result, indent=1) + "\n")
    ens = WORK / e.run_dir / "ensemble"
    if E.TABLES[e.table].ensemble and len(best) > 1 and not _scored(ens / "scores.json", best, "checkpoints",
                                                                    e.decode):
        if absent:  # an ensemble of the others would pass for the configuration's and hold their best
            # checkpoints, which pack then leaves behind (carry.py): the seed given could never join it
            print(f"skip {ens}: no validated checkpoint here for {', '.join(absent)} (the ensemble is of every "
                  "seed given)", file=sys.stderr)
            return
        if not all(f.exists() for f in best_files):  # (runs carried without their scored best checkpoints)
            print(f"skip {ens}: not every seed's best checkpoint is on this machine", file=sys.stderr)
            return
        left_out = sorted(scored_seeds(WORK / e.run_dir) - ensemble_seeds(best))
        if left_out:  # the table's ens. column is the ensemble of every scored seed (collect)
            print(f"skip {ens}: the seeds given leave out the scored {', '.join(left_out)} (evaluate them "
                  "together for their ensemble)", file=sys.stderr)
            return
        ens.mkdir(parents=True, exist_ok=True)
        result = {"checkpoints": best, **_decode_test(e, best_files, ens / "pred.test.txt", gpu)}
        (ens / "scores.json").write_text(json.dumps(result, indent=1) + "\n")


def run_status(e: E.Experiment, seed: int, runs: Path | None = None) -> dict | None:
    """Where one run stands, from its train.log under ``runs`` (default: here; None: not started)."""
    run_dir = (runs or WORK) / e.run_dir / f"seed{seed}"
    if not (run_dir / "train.log").exists():
        return None
    log_text = (run_dir / "train.log").read_text(encoding="utf-8")
    curve = results_csv.validation_curve(log_text)
    out = {"run": f"{e.name}/seed{seed}", "validations": len(curve), "finished": (run_dir / "train.done").exists(),
           "scored_step": scored_step(run_dir), "patience": e.config.get("early_stopping", 0),
           "rate": results_csv.last_piece_rate(log_text), "saved_step": results_csv.last_saved_step(log_text),
           "trainer": trainer_of(run_dir), "scored_here": scored_checkpoint_here(run_dir) is not None}
    if curve:
        best = max(range(len(curve)), key=lambda i: float(curve[i]["valid_acc"]))  # first of equals
        out.update(best_acc=float(curve[best]["valid_acc"]), best_step=curve[best]["step"],
                   since_best=len(curve) - 1 - best, lr=curve[-1]["lr"], last_step=curve[-1]["step"])
    out["ended"] = ended_by(out, e.config.get("train_steps")) if out["finished"] else None
    return out


def ended_by(status: dict, train_steps: int | None) -> str:
    """Why a finished run stopped: its patience ran out (the stop rule: converged), it reached
    ``train_steps`` (the cap), or neither can be read from its validations."""
    if status["patience"] and status.get("since_best", -1) >= status["patience"]:
        return "stop rule"
    if train_steps and int(status.get("last_step", 0)) >= int(train_steps):
        return "step cap"
    return "yes"


def _steps_left(status: dict, train_steps: int | None) -> int | None:
    """Steps from a run's newest checkpoint (where it resumes) to ``train_steps`` (the cap), or None."""
    if not train_steps or status["saved_step"] is None:
        return None
    return max(int(train_steps) - status["saved_step"], 0)


def print_status(table: str, seeds: list[int], only, runs: Path | None = None) -> str:
    rows = ["| run | validations | best valid. acc. (step) | validations since | learning rate | finished | "
            "scores for step | steps/s (last piece) | minutes to the step cap |", "|---" * 9 + "|"]
    for e in experiments(table, only):
        for seed in seeds:
            r = run_status(e, seed, runs)
            if r is None:
                rows.append(f"| {e.name}/seed{seed} | not started | | | | | | | |")
                continue
            best = f"{r['best_acc']:.2f} ({r['best_step']})" if "best_acc" in r else "–"
            since = f"{r.get('since_best', '–')} / {r['patience']}" if r["patience"] else str(r.get("since_best", "–"))
            rate, left = r["rate"], _steps_left(r, e.config.get("train_steps"))
            minutes = f"{left / rate / 60:.1f}" if rate and left is not None and not r["finished"] else "–"
            going = f"no (training now: process {r['trainer']})" if r["trainer"] else "no"
            scored = "–" if r["scored_step"] is None else \
                f"{r['scored_step']}{'' if r['scored_here'] else ' (checkpoint not here)'}"
            rows.append(f"| {r['run']} | {r['validations']} | {best} | {since} | {r.get('lr', '–')} | "
                        f"{r['ended'] or going} | {scored} | {f'{rate:.1f}' if rate else '–'} | {minutes} |")
    return "\n".join(rows)


def print_ensemble_status(table: str, seeds: list[int], only, runs: Path | None = None) -> str:
    """Where each configuration's ensemble (the "ens." column) stands: decoded or not, and which of
    ``seeds`` could join it here (finished, scored, the scored best checkpoint on this machine; evaluate
    decodes an ensemble only of seeds all here, every scored one among them)."""
    rows = ["| configuration | ensemble decoded (seeds: test acc.) | seeds scored, best checkpoint here | "
            "scored, best checkpoint not here | not scored |", "|---" * 5 + "|"]
    for e in experiments(table, only):
        base = (runs or WORK) / e.run_dir
        ens = results_csv.scores_of(base / "ensemble")
        decoded = "–" if ens is None else (", ".join(sorted((s[len("seed"):] for s in ensemble_seeds(
            ens.get("checkpoints", []))), key=int)) + f": {ens['accuracy']:.2f}")
        groups = {"here": [], "elsewhere": [], "unscored": []}
        for seed in seeds:
            run_dir = base / f"seed{seed}"
            key = "unscored" if scored_step(run_dir) is None else \
                "here" if scored_checkpoint_here(run_dir) is not None else "elsewhere"
            groups[key].append(str(seed))
        rows.append(f"| {e.name} | {decoded} | " + " | ".join(", ".join(g) or "–" for g in groups.values()) + " |")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------- record
RESULTS = ROOT / "docs" / "results"
CSV_TABLES = {"peters2019-table1", "peters2019-table1-fork"}  # printed from their committed CSV (results_csv.py)


def results_csv_path(table: str) -> Path:
    return RESULTS / f"{table}.csv"


def curves_csv_path(table: str) -> Path:
    return RESULTS / f"{table}-validation.csv"


def ensembles_csv_path(table: str) -> Path:
    return RESULTS / f"{table}-ensembles.csv"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def ensemble_record(e: E.Experiment, runs: Path, commit: str) -> dict | None:
    """The <table>-ensembles.csv row of ``e``'s ensemble/scores.json when it averages every scored seed,
    each finished (train.done) and scored at the checkpoint the ensemble holds; else None, and why on
    stderr where an ensemble was decoded."""
    base = runs / e.run_dir
    ens = results_csv.scores_of(base / "ensemble")
    if ens is None or not E.TABLES[e.table].ensemble:
        return None
    members = ensemble_members(ens.get("checkpoints", []))
    seeds, scored = ensemble_seeds(ens.get("checkpoints", [])), scored_seeds(base)
    why = None
    if seeds != scored:
        why = (f"it averages {', '.join(sorted(seeds)) or 'no named seeds'}, "
               f"the scored seeds are {', '.join(sorted(scored))}")
    for s in sorted(seeds) if why is None else []:
        best = (results_csv.scores_of(base / s) or {}).get("checkpoint")
        if not (base / s / "train.done").exists():
            why = f"{s} has not finished"
        elif best is not None and (s, Path(best).name) not in members:
            why = f"{s} was scored at {Path(best).name}, not the checkpoint the ensemble holds (evaluate again)"
        if why:
            break
    if why:
        print(f"record: no ensemble row for {e.name}: {why}", file=sys.stderr)
        return None
    return results_csv.ensemble_row(e.column, e.row, sorted(int(s[len("seed"):]) for s in seeds), ens, commit)


def record(table: str, seeds: list[int], only: str | list[str] | None = None, commit: str | None = None,
           runs: Path | None = None, out: Path | None = None) -> list[dict]:
    """One row per finished, evaluated run of ``table`` (train.done: the stop rule or the step cap ended
    it; scores.json) into its CSV (``out``, default docs/results/<table>.csv), replacing the rows of the
    same run (setting, alphas, seed), and the run's validations into <out>-validation.csv, its languages'
    test scores into <out>-languages.csv; an evaluated run that has not finished is named on stderr and
    gets no row. The ensemble of a configuration's scored seeds, all finished, goes into
    <out>-ensembles.csv (``ensemble_record``; whatever ``seeds`` says), replacing its earlier one. A run
    or ensemble whose rows would not change but for commit and date keeps them as they are (recording
    the seeds again to add their ensemble does not claim their rows for this commit). Returns the new
    run rows. Reads only train.done, scores.json and train.log, so it runs wherever those files were
    copied."""
    if table not in CSV_TABLES:
        raise SystemExit(f"record: only {', '.join(sorted(CSV_TABLES))} keep their results in a CSV file")
    commit = commit or git_commit()
    if not commit:
        raise SystemExit("record: no git checkout here to read the commit from; pass --commit")
    runs, out = runs or WORK, out or results_csv_path(table)
    curves_out = out.with_name(f"{out.stem}-validation.csv")
    languages_out = out.with_name(f"{out.stem}-languages.csv")
    old_rows = results_csv.read_rows(out)
    old_curves = results_csv.read_rows(curves_out, results_csv.CURVE_COLUMNS)
    old_languages = results_csv.read_rows(languages_out, results_csv.LANGUAGE_COLUMNS)
    new, curves, languages, kept = [], [], [], 0
    for e in experiments(table, only):
        epoch = E.SIGMORPHON[e.column]["epoch"]
        for seed in seeds:
            run_dir = runs / e.run_dir / f"seed{seed}"
            scores = results_csv.scores_of(run_dir)
            log = (run_dir / "train.log").read_text(encoding="utf-8") if (run_dir / "train.log").exists() else ""
            steps = results_csv.last_saved_step(log)
            if scores is None or steps is None:
                continue
            if not (run_dir / "train.done").exists():
                print(f"record: {e.name}/seed{seed} is evaluated but not finished (no train.done): no row "
                      "until it ends by the stop rule or the step cap (`status` says how far it got)",
                      file=sys.stderr)
                continue
            row = results_csv.run_row(e.column, e.row, seed, scores, steps, epoch, commit,
                                      devices=results_csv.training_devices(log))
            curve = results_csv.curve_rows(e.column, e.row, seed, log, epoch, commit)
            scored = results_csv.language_rows(e.column, e.row, seed, scores, commit)
            if (results_csv.unchanged(old_rows, [row]) and results_csv.unchanged(old_curves, curve)
                    and results_csv.unchanged(old_languages, scored)):
                kept += 1
                continue
            new.append(row)
            curves += curve
            languages += scored
    results_csv.write_rows(out, results_csv.sorted_rows(results_csv.merge(old_rows, new)))
    results_csv.write_rows(curves_out, results_csv.sorted_rows(results_csv.merge(old_curves, curves), "step"),
                           results_csv.CURVE_COLUMNS)
    results_csv.write_rows(languages_out, results_csv.sorted_rows(results_csv.merge(old_languages, languages),
                                                                  "language"), results_csv.LANGUAGE_COLUMNS)
    ensembles_out = out.with_name(f"{out.stem}-ensembles.csv")
    old_ensembles = results_csv.read_rows(ensembles_out, results_csv.ENSEMBLE_COLUMNS)
    ensembles = [row for e in experiments(table, only) if (row := ensemble_record(e, runs, commit)) is not None
                 and not results_csv.unchanged(old_ensembles, [row], results_csv.ENSEMBLE_KEY)]
    if ensembles:
        results_csv.write_rows(ensembles_out, results_csv.sorted_ensemble_rows(
            results_csv.merge(old_ensembles, ensembles, results_csv.ENSEMBLE_KEY)), results_csv.ENSEMBLE_COLUMNS)
    print(f"{len(new)} row(s) recorded in {out}, {len(curves)} validation(s) in {curves_out}, "
          f"{len(languages)} language score(s) in {languages_out}, {len(ensembles)} ensemble(s) in {ensembles_out}"
          + (f"; {kept} run(s) unchanged since recorded, left as they were" if kept else ""))
    return new


# ----------------------------------------------------------------------------------------- table
def collect(table: str, runs: Path | None = None) -> dict[tuple[str, str], list[float]]:
    """{(row, column): [metric of each seed]} from runs/<family>/<name>/seed*/scores.json, or, for the
    tables kept in a committed CSV and no ``runs`` folder given, from that file; an "ens." column's
    cell holds its ensemble's one score (``ensembles``)."""
    if table in CSV_TABLES and runs is None:
        cells = results_csv.cells(results_csv.read_rows(results_csv_path(table)))
        return cells | {k: [value] for k, (value, _) in ensembles(table).items()}
    spec, runs = E.TABLES[table], runs or WORK
    cells: dict[tuple[str, str], list[float]] = {}
    for e in experiments(table):
        base = runs / e.run_dir
        values = [json.loads(p.read_text())[spec.metric] for p in sorted(base.glob("seed*/scores.json"))]
        if not values and spec.metric == "dev_accuracy":  # Figure 4 needs no test decoding: read the logs
            values = [best_checkpoint(p.read_text(encoding="utf-8"))[1] for p in sorted(base.glob("seed*/train.log"))
                      if _VALID.search(p.read_text(encoding="utf-8"))]
        col = f"{e.column}-avg" if spec.ensemble else e.column
        if values:
            cells[(e.row, col)] = values
    return cells | {k: [value] for k, (value, _) in ensembles(table, runs).items()}


def ensembles(table: str, runs: Path | None = None) -> dict[tuple[str, str], tuple[float, int]]:
    """{(row, "<setting>-ens"): (metric, number of seeds averaged)}: from <table>-ensembles.csv for the
    tables kept in a committed CSV and no ``runs`` folder given, else from runs/.../ensemble/scores.json,
    the ensemble of every scored seed only (not one that `evaluate --seeds 2 3` decoded beside seed 1)."""
    if table in CSV_TABLES and runs is None:
        rows = results_csv.read_rows(ensembles_csv_path(table), results_csv.ENSEMBLE_COLUMNS)
        return results_csv.ensemble_cells(rows)
    spec, runs, out = E.TABLES[table], runs or WORK, {}
    for e in experiments(table) if spec.ensemble else []:
        base = runs / e.run_dir
        ens = results_csv.scores_of(base / "ensemble")
        if ens is None:
            continue
        seeds = ensemble_seeds(ens["checkpoints"]) if "checkpoints" in ens else scored_seeds(base)
        if seeds == scored_seeds(base):
            out[(e.row, f"{e.column}-ens")] = (ens[spec.metric], len(seeds))
    return out


def print_table(table: str, runs: Path | None = None) -> str:
    spec = E.TABLES[table]
    paper = {}
    if spec.paper[0]:
        paper = {(k[2], k[3]): v for k, v in tables.load_paper_numbers().items() if k[:2] == spec.paper}
    sizes = {k: f"{n} seeds" for k, (_, n) in ensembles(table, runs).items()}  # an ens. cell: how many it averages
    text = f"### {spec.title}\n\n" + tables.markdown_table(spec.rows, spec.columns, collect(table, runs), paper,
                                                            labels=sizes)
    if table == "peters2019-table1":
        extra = {k: v for k, v in paper.items() if k[0] not in spec.rows}
        if extra:
            text += "\n" + tables.markdown_table(sorted({r for r, _ in extra}), spec.columns, {}, extra).split("\n", 2)[2]
    return text


def print_runs(table: str, seeds: list[int], only) -> str:
    """Markdown, a row a run recorded in <table>.csv (``seeds`` of the configurations ``only`` selects):
    epochs (steps), how it ended, best validation and its epoch (step), the epochs whose validation halved
    the learning rate, test scores (``results_csv.run_summary``)."""
    if table not in CSV_TABLES:
        raise SystemExit(f"runs: {table} is not recorded in a CSV; tables that are: {', '.join(sorted(CSV_TABLES))}")
    recorded = results_csv.latest_per_run(results_csv.read_rows(results_csv_path(table)))
    runs = {results_csv.run_key(r): r for r in recorded}
    curves: dict[tuple, list[dict]] = {}
    for v in results_csv.read_rows(curves_csv_path(table), results_csv.CURVE_COLUMNS):
        curves.setdefault(results_csv.run_key(v), []).append(v)
    rows = ["| setting | output α / attention α, seed | epochs (steps) | ended by | best validation token acc. | "
            "its epoch (step) | learning rate halved at epochs | test exact match | test Levenshtein |",
            "|---" * 9 + "|"]
    for e in experiments(table, only):
        out_alpha, attn_alpha = results_csv.alphas(e.name)
        for seed in seeds:
            key = (e.column, out_alpha, attn_alpha, str(seed))  # (results_csv.run_key of its rows)
            if (run := runs.get(key)) is None:
                continue
            r = results_csv.run_summary(run, curves.get(key, []), e.config.get("train_steps"))
            best = "–" if r["best_step"] is None else f"{r['best_epoch']} ({r['best_step']:,})"
            rows.append(f"| {e.column} | {out_alpha} / {attn_alpha}, seed {seed} | {r['epochs']} ({r['steps']:,}) | "
                        f"{r['ended']} | {r['valid_acc']} | {best} | {', '.join(map(str, r['halved'])) or '–'} | "
                        f"{r['test_acc']} | {r['test_lev']} |")
    return "\n".join(rows)


def plot_fig4(out: Path, runs: Path | None = None) -> Path:
    """Figure 4 from the validations of its runs under ``runs`` (default: here); refused in one line when
    no run has one (the figure would be empty)."""
    panels = {which: collect(f"peters2019-fig4-{which}", runs) for which in ("attention", "output")}
    if not any(panels.values()):
        where = (runs or WORK) / E.RUNS / "peters2019-fig4"
        raise SystemExit(f"plot: no Figure 4 run with a validation under {where}: train them first "
                         "(reproduce.py train peters2019-fig4-attention, peters2019-fig4-output) or give --runs DIR")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3), sharey=True)
    for ax, which in zip(axes, ("attention", "output")):
        cells = panels[which]
        xs = [a for a in E.FIG4_GRID if (E.alpha_tag(a), "dev accuracy") in cells]
        vals = [cells[(E.alpha_tag(a), "dev accuracy")] for a in xs]
        means = [tables.mean_std(v)[0] for v in vals]
        stds = [tables.mean_std(v)[1] or 0.0 for v in vals]
        ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3)
        ax.set_xlabel(f"{which} α (other α = 1.5)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("DE→EN validation accuracy (%)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)
    return out


# ----------------------------------------------------------------------------------------- smoke
MULTI30K_SAMPLE, SAMPLE_LINES = ROOT / "data/multi30k-sample", 400  # the release's first 400 lines a split


def smoke_data(cwd: Path | None = None, lines: int = 400, merges: int = 300) -> None:
    """work/smoke/multi30k: the first ``lines`` Multi30k pairs of each split, BPE with ``merges`` merges,
    from the bundled sample (the release's first lines: the same files) unless more lines are asked for."""
    cwd = cwd or WORK
    out = cwd / "work/smoke/multi30k"
    if (out / "prepare.json").exists():
        return
    raw = cwd / "work/smoke/multi30k-raw"
    source = MULTI30K_SAMPLE if lines <= SAMPLE_LINES else SHARED / "multi30k"
    run([sys.executable, ROOT / "scripts/data/extract.py", "multi30k", "--downloads", source, "--out", raw], cwd=cwd)
    run([sys.executable, ROOT / "scripts/data/prepare_mt.py", "multi30k", "--raw", raw, "--out", out,
         "--max-lines", str(lines), "--merges", str(merges)], cwd=cwd)
    shutil.rmtree(raw)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["all", "data", "train", "evaluate", "record", "analyze", "table", "plot",
                                    "runs", "status", "pack", "unpack", "smoke-data"])
    p.add_argument("table", nargs="?", help="one of: " + ", ".join([*E.TABLES, *E.ANALYSES]))
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--gpu", type=int, help="GPU id (default: CPU); the same as --gpus ID")
    p.add_argument("--gpus", type=int, nargs="+",
                   help="GPU ids to spread the runs over (each training run starts on the least busy one; "
                        "--jobs runs at a time in all)")
    p.add_argument("--mps", action="store_true",
                   help="train, all: the runs that share a GPU go through NVIDIA's Multi-Process Service (their "
                        "kernels run at the same time instead of in turns; mps.py), started and stopped here")
    p.add_argument("--commit", help="record: the commit the runs were made at (default: this checkout's HEAD)")
    p.add_argument("--only", nargs="+", metavar="GLOB",
                   help="globs on experiment names (any of them), e.g. 'medium/*' or 'de-en/*'")
    p.add_argument("--sigmorphon", type=Path, help="SIGMORPHON 2018 archive or task1 folder")
    p.add_argument("--train-args", default="", help="extra onmt_train options, e.g. '-world_size 2 -gpu_ranks 0 1'")
    p.add_argument("--out", type=Path, default=ROOT / "runs/figure4.png", help="plot output")
    p.add_argument("--runs", type=Path, default=None,
                   help="table, status, plot: read the runs/ tree under this folder "
                        "(e.g. docs/results/2026-11-26-h200)")
    p.add_argument("--jobs", type=int, default=1,
                   help="training / decoding processes at a time on the same device (small models: several a GPU)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="stop training after this many minutes; the same command resumes every run from its "
                        "newest checkpoint (-train_from)")
    p.add_argument("--resume-only", action="store_true",
                   help="train: only continue runs that have a checkpoint; stop with their names, starting "
                        "nothing, when one has none (a fresh machine the carried runs were not unpacked on)")
    p.add_argument("--retries", type=int, default=1,
                   help="train: start a run whose piece failed again from its newest checkpoint, at most this "
                        "many times (0: never)")
    p.add_argument("--analysis-lines", type=int, default=None,
                   help="analyses decode every k-th validation line, at most this many (default: all)")
    p.add_argument("--translate-batch", type=int, default=64, help="onmt_translate -batch_size (sentences)")
    carrying = p.add_argument_group("pack / unpack (runs carried between machines: carry.py)")
    carrying.add_argument("--to", type=Path, help="pack: an empty folder for the batches (batch-1, batch-2, ...)")
    carrying.add_argument("--from", dest="from_", type=Path, nargs="+", metavar="DIR",
                          help="unpack: the batch folders (or folders holding them) of one pack; the runs of a batch "
                               "that did not come are named and left out")
    carrying.add_argument("--part-mib", type=float, default=15, help="pack: largest part of a file (MiB)")
    carrying.add_argument("--batch-files", type=int, default=8, help="pack: files in a batch, the manifest included")
    carrying.add_argument("--batch-mib", type=float, default=56,
                          help="pack: bytes in a batch (MiB; 56 leaves a lent machine's 64 room for the repo)")
    carrying.add_argument("--with-best", action="store_true",
                          help="pack: also the best checkpoint (weights only) of runs whose test score is done, "
                               "for analyses on the next machine")
    a = p.parse_args(argv)
    if a.step == "unpack":
        if not a.from_:
            p.error("unpack needs --from DIR [DIR ...]")
        try:
            written = carry.unpack(a.from_, WORK)
        except carry.CarryError as err:
            raise SystemExit(f"unpack: {err}") from None
        print(f"unpack: {len(written)} file(s) written under {WORK}")
        return
    if a.gpu is not None and a.gpus:
        p.error("--gpu and --gpus: give one of them")
    if a.retries < 0:
        p.error(f"--retries {a.retries}: give 0 (never start a failed piece again) or more")
    for option, value in (("--jobs", a.jobs), ("--translate-batch", a.translate_batch),
                          ("--analysis-lines", a.analysis_lines), ("--max-minutes", a.max_minutes)):
        if value is not None and value <= 0:
            p.error(f"{option} {value:g}: give a number above 0")
    if a.runs is not None and not a.runs.is_dir():
        p.error(f"--runs {a.runs}: no such folder")
    gpus = a.gpus or ([a.gpu] if a.gpu is not None else None)
    if a.mps and a.step not in ("all", "train"):
        p.error(f"--mps: for the training steps (train, all), not {a.step}")
    if a.mps and not gpus:
        p.error("--mps: give the GPUs the runs share (--gpus); on the CPU there is nothing to share")
    if gpus and a.step in ("all", "train", "evaluate", "analyze") and (why := missing_gpus(gpus)):
        p.error(f"{'--gpus' if a.gpus else '--gpu'} {' '.join(map(str, gpus))}: {why}")
    global TRANSLATE_BATCH
    TRANSLATE_BATCH = a.translate_batch
    if a.step == "smoke-data":
        smoke_data()
        return
    if a.step == "plot":
        print(plot_fig4(a.out, a.runs))
        return
    if a.table is None:
        p.error(f"{a.step} needs a table: " + ", ".join([*E.TABLES, *E.ANALYSES]))
    if a.step == "runs":
        print(print_runs(a.table, a.seeds, a.only))
        return
    if a.table in E.ANALYSES:  # tables computed from another table's runs (train/evaluate that one first)
        if a.step in ("all", "analyze"):
            analyze(a.table, a.seeds, gpus, a.only, a.jobs, a.analysis_lines)
        if a.step in ("all", "analyze", "table"):
            print(print_analysis(a.table, a.runs))
        return
    todo = experiments(a.table, a.only)
    if a.step == "status":
        print(print_status(a.table, a.seeds, a.only, a.runs))
        if E.TABLES[a.table].ensemble:
            print("\n" + print_ensemble_status(a.table, a.seeds, a.only, a.runs))
        return
    if a.step == "pack":
        if a.to is None:
            p.error("pack needs --to DIR")
        selected = [(e, WORK / e.run_dir / f"seed{s}") for e in todo for s in a.seeds
                    if (WORK / e.run_dir / f"seed{s}" / "train.log").exists()]
        # finished runs first (scores and logs, small; an unfinished one loses only progress if its batch
        # does not come back), each group in the order selected
        selected.sort(key=lambda pair: not (pair[1] / "train.done").exists())
        runs = [run_dir for _, run_dir in selected]
        # a finished seed's best checkpoint left behind is lost with the machine, and its configuration's
        # ensemble with it (the run would have to be trained again): it travels until the ensemble holds it
        best_of = [] if a.with_best else [run_dir for e, run_dir in selected if wanted_by_ensemble(e, run_dir)]
        for run_dir in best_of:
            print(f"pack: {run_dir.relative_to(WORK)}: its best checkpoint goes too (weights only): the "
                  "configuration's ensemble does not hold it yet", file=sys.stderr)
        # a decoded ensemble holds its seeds' best checkpoints, which then stay behind: its scores travel
        ensembles = [ens for ens in dict.fromkeys(run_dir.parent / "ensemble" for run_dir in runs)
                     if (ens / "scores.json").exists()]
        try:
            folders = carry.pack(runs, WORK, a.to, int(a.part_mib * carry.MIB), a.batch_files,
                                 int(a.batch_mib * carry.MIB), with_best=a.with_best, best_of=best_of,
                                 ensembles=ensembles)
        except carry.CarryError as err:
            raise SystemExit(f"pack: {err}") from None
        also = f" and {len(ensembles)} ensemble(s)" if ensembles else ""
        print(f"pack: {len(runs)} run(s){also} in {len(folders)} batch(es): " + " ".join(map(str, folders)))
        return
    if a.step in ("all", "data"):
        for e in todo:
            prepare_data(e, a.sigmorphon)
    if a.step in ("all", "train"):
        for e in todo:
            build_vocab(e.config, ROOT / e.path)
        try:
            with mps.daemon() if a.mps else contextlib.nullcontext():
                unfinished = train_all([(e, seed) for e in todo for seed in a.seeds], gpus, a.train_args.split(),
                                       jobs=a.jobs, max_minutes=a.max_minutes, resume_only=a.resume_only,
                                       retries=a.retries)
        except mps.MpsError as err:
            raise SystemExit(str(err)) from None
        if unfinished and a.step == "all":
            print("evaluating the newest validated checkpoints of the unfinished runs too", flush=True)
    if a.step in ("all", "evaluate"):
        _parallel(lambda e, gpu: evaluate(e, a.seeds, gpu), todo, a.jobs, gpus)
    if a.step == "record":
        record(a.table, a.seeds, a.only, a.commit, a.runs)
    elif a.step == "all" and a.table in CSV_TABLES:
        if a.commit or git_commit():
            record(a.table, a.seeds, a.only, a.commit, a.runs)
        else:  # (a copy without .git, e.g. a GPU machine: the runs are kept, record them later)
            print(f"record skipped: no git checkout to read the commit from; run "
                  f"`reproduce.py record {a.table} --commit HASH` (with --runs DIR where the runs were copied)")
    if a.step in ("all", "table"):
        print(print_table(a.table, a.runs))


if __name__ == "__main__":
    main()
