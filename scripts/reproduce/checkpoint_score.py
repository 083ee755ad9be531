"""The test score of any saved checkpoint of a run, not only its best: how a run scored at an earlier
point of its training (e.g. at the paper's code's default length, 100,000 steps), decoded exactly as
``reproduce.py evaluate`` decodes the best one (beam 5, the experiment's decoding options).

    python3 scripts/reproduce/checkpoint_score.py TABLE NAME CKPT [CKPT ...] [--gpu 0] [--translate-batch 1000] \\
        [--csv docs/results/<table>-checkpoints.csv]

NAME is the experiment (e.g. ``medium/out1-attn1``); each CKPT a ``model_step_N.pt`` of one of its runs
(``runs/<family>/<NAME>/seed<S>/``). The predictions go to ``pred.test.step<N>.txt`` beside the checkpoint
(the run's own ``pred.test.txt`` is left alone); one line per checkpoint is printed and, with ``--csv``,
kept as a row (one per run and step; a checkpoint scored again replaces its row).
"""
from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (its neighbours, also when imported)
from steps import common, decode  # noqa: E402  (first: a source checkout's onmt_entmax on sys.path)

# isort: split
import results_csv  # noqa: E402
from pieces import device_name  # noqa: E402

COLUMNS = ("table", "experiment", "seed", "step", "epoch", "test_acc", "test_lev", "device", "commit", "date")
_SEED = re.compile(r"seed(\d+)$")
_CKPT = re.compile(r"model_step_(\d+)\.pt$")


def run_seed(e, ckpt: Path) -> int:
    """The seed of the run ``ckpt`` belongs to; refuses a checkpoint of another experiment's run."""
    ckpt = ckpt.resolve()
    m = _SEED.search(ckpt.parent.name)
    if m is None or ckpt.parent.parent != (common.WORK / e.run_dir).resolve():
        raise ValueError(f"{ckpt}: not a checkpoint of a run of {e.name} (expected {common.WORK / e.run_dir}/seedS/)")
    if _CKPT.fullmatch(ckpt.name) is None:
        raise ValueError(f"{ckpt}: not a model_step_N.pt checkpoint")
    return int(m.group(1))


def epoch_of(log: str, step: int) -> float | None:
    """Epochs trained at ``step``: the validations (one an epoch) logged at or before it, or None."""
    curve = results_csv.validation_curve(log)
    done = [c for c in curve if c["step"] is not None and c["step"] <= step]
    return float(len(done)) if done else None


def score_checkpoint(e, ckpt: Path, gpu: int | None) -> dict:
    """Decode ``ckpt`` on the test set (beam 5, ``e.decode``) and score it: one CSV row without commit/date."""
    seed = run_seed(e, ckpt)
    step = int(_CKPT.fullmatch(ckpt.name).group(1))
    pred = ckpt.parent / f"pred.test.step{step}.txt"
    decode.translate([ckpt], decode.test_source(e), pred, gpu, e.decode)
    scores = decode.score(e, pred)
    log = (ckpt.parent / "train.log").read_text(encoding="utf-8") if (ckpt.parent / "train.log").exists() else ""
    return {"table": e.table, "experiment": e.name, "seed": seed, "step": step, "epoch": epoch_of(log, step),
            "test_acc": f"{scores['accuracy']:.2f}", "test_lev": f"{scores['levenshtein']:.3f}",
            "device": device_name(gpu)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("table")
    ap.add_argument("name", help="the experiment, e.g. medium/out1-attn1")
    ap.add_argument("checkpoints", nargs="+", type=Path, metavar="CKPT")
    ap.add_argument("--gpu", type=int, default=None, help="GPU id (default: CPU)")
    ap.add_argument("--translate-batch", type=int, default=64, help="onmt_translate -batch_size (sentences)")
    ap.add_argument("--csv", type=Path, help="keep a row per checkpoint in this CSV file")
    a = ap.parse_args(argv)
    found = [e for e in common.experiments(a.table) if e.name == a.name] if a.table in common.E.TABLES else []
    if not found:
        sys.exit(f"checkpoint_score: no experiment {a.name!r} in table {a.table!r}")
    e = found[0]
    if e.task != "sigmorphon":
        sys.exit(f"checkpoint_score: {a.table} is not a SIGMORPHON table (its score has no accuracy column)")
    for ckpt in a.checkpoints:
        if not ckpt.is_file():
            sys.exit(f"checkpoint_score: {ckpt}: no such checkpoint")
        try:
            run_seed(e, ckpt)
        except ValueError as err:
            sys.exit(f"checkpoint_score: {err}")
    common.TRANSLATE_BATCH = a.translate_batch
    commit = common.git_commit() or "unknown"
    rows = []
    for ckpt in a.checkpoints:
        row = {**score_checkpoint(e, ckpt, a.gpu), "commit": commit,
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
        rows.append(row)
        print(f"{e.name}/seed{row['seed']} step {row['step']} (epoch {row['epoch']}): test exact match "
              f"{row['test_acc']}, Levenshtein {row['test_lev']} ({row['device']})", flush=True)
    if a.csv:  # a checkpoint scored again replaces its row
        old = results_csv.read_rows(a.csv, COLUMNS)
        results_csv.write_rows(a.csv, results_csv.merge(old, rows, ("table", "experiment", "seed", "step")), COLUMNS)


if __name__ == "__main__":
    main()
