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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the steps first: importing them puts a source checkout's onmt_entmax on sys.path (pieces.py imports it)
from steps import analyze, common, data, evaluate, pack, plot, record, runs, smoke_data, status, table, train, unpack  # noqa: E402

# isort: split
import experiments as E  # noqa: E402
from pieces import missing_gpus  # noqa: E402


def parser() -> argparse.ArgumentParser:
    """The command line: a step, a table, and the options of every step (each step reads those it needs)."""
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
    p.add_argument("--out", type=Path, default=common.ROOT / "runs/figure4.png", help="plot output")
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
    return p


def gpus_checked(a: argparse.Namespace, p: argparse.ArgumentParser) -> list[int] | None:
    """The GPUs to run on (None: the CPU), after refusing in one line the options no step can run with."""
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
    return gpus


def main(argv: list[str] | None = None) -> None:
    """Run the step the command line names (``all``: data, train, evaluate, record and table in turn)."""
    p = parser()
    a = p.parse_args(argv)
    if a.step == "unpack":  # (it reads --from only)
        unpack.run_step(a, p)
        return
    gpus = gpus_checked(a, p)
    common.TRANSLATE_BATCH = a.translate_batch
    if a.step == "smoke-data":
        smoke_data.run_step(a)
        return
    if a.step == "plot":
        plot.run_step(a)
        return
    if a.table is None:
        p.error(f"{a.step} needs a table: " + ", ".join([*E.TABLES, *E.ANALYSES]))
    if a.step == "runs":
        runs.run_step(a)
        return
    if a.table in E.ANALYSES:  # tables computed from another table's runs (train/evaluate that one first)
        analyze.run_step(a, gpus)
        return
    todo = common.experiments(a.table, a.only)
    if a.step == "status":
        status.run_step(a)
    elif a.step == "pack":
        pack.run_step(a, p, todo)
    else:  # all: data, train, evaluate, record (a table kept in a CSV), table
        if a.step in ("all", "data"):
            data.run_step(a, todo)
        if a.step in ("all", "train"):
            train.run_step(a, todo, gpus)
        if a.step in ("all", "evaluate"):
            evaluate.run_step(a, todo, gpus)
        if a.step in ("all", "record"):
            record.run_step(a)
        if a.step in ("all", "table"):
            table.run_step(a)


if __name__ == "__main__":
    main()
