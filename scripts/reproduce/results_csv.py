"""Finished runs as rows of a committed CSV file, the source of the reproduced tables.

A run's folder (runs/<family>/<name>/seed<S>/) holds its training log, checkpoints and, once
evaluated, scores.json; none of it is committed. ``record`` turns each evaluated run into one row of
docs/results/<table>.csv (replacing the rows of the same run), so that the table can be
printed on any machine, after the GPU machine that trained the runs is gone.

Columns (peters2019-table1): setting, output_alpha, attention_alpha, seed; epochs and steps = how
long the run trained (its last checkpoint); valid_acc = the best validation token accuracy, whose
checkpoint was decoded; test_acc / test_lev = exact match (%) and Levenshtein distance on the test
set, averaged over languages (the paper's metric); gpu = what trained it (the devices its pieces name
in train.log, joined by " + "; the decoding device where no piece names one), commit, date (UTC).

Beside it, docs/results/<table>-validation.csv keeps every validation of every recorded run (the
learning curves: how far from converged a run stopped), from the training logs,
<table>-languages.csv the test scores of every language, and <table>-ensembles.csv one row a
configuration: the ensemble of its recorded seeds' best checkpoints (Table 1's "ens." columns; seeds =
the seeds it averages, space-separated).
"""
from __future__ import annotations

import csv
import datetime
import json
import math
import re
from pathlib import Path

COLUMNS = ("setting", "output_alpha", "attention_alpha", "seed", "epochs", "steps", "valid_acc", "test_acc",
           "test_lev", "gpu", "commit", "date")
KEY = ("setting", "output_alpha", "attention_alpha", "seed")  # one run: its rows are replaced whole
_NAME = re.compile(r"out([0-9.]+)-attn([0-9.]+)$")
LANGUAGE_COLUMNS = ("setting", "output_alpha", "attention_alpha", "seed", "language", "n", "test_acc", "test_lev",
                    "commit")
CURVE_COLUMNS = ("setting", "output_alpha", "attention_alpha", "seed", "epoch", "step", "valid_acc", "valid_loss",
                 "lr", "commit")
ENSEMBLE_COLUMNS = ("setting", "output_alpha", "attention_alpha", "seeds", "test_acc", "test_lev", "gpu", "commit",
                    "date")
ENSEMBLE_KEY = ("setting", "output_alpha", "attention_alpha")  # one a configuration: that of its recorded seeds
_VALID_LOSS = re.compile(r"Validation (perplexity|\S+ FY loss): ([0-9.eE+-]+|nan|inf)")
_VALID_ACC = re.compile(r"Validation accuracy: ([0-9.eE+-]+|nan)")
_HALVED = re.compile(r"learning rate halved to ([0-9.eE+-]+)")
_LR = re.compile(r"; lr: ([0-9.eE+-]+);")
_SAVED = re.compile(r"Saving checkpoint \S+_step_(\d+)\.pt")
_PIECE = re.compile(r"^\[reproduce\] \S+ \S+ piece( on ([^:]+))?:", re.M)
_STEP_AT = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) INFO\] Step (\d+)/", re.M)


def alphas(name: str) -> tuple[str, str]:
    """(output alpha, attention alpha) of a Table 1 row name such as ``out1.5-attn2``."""
    m = _NAME.search(name)
    if m is None:
        raise ValueError(f"not a Table 1 row name (outA-attnB): {name!r}")
    return m.group(1), m.group(2)


def read_rows(path: Path, columns: tuple = COLUMNS) -> list[dict]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and tuple(rows[0]) != columns:
        raise ValueError(f"{path}: columns {tuple(rows[0])}, expected {columns}")
    return rows


def write_rows(path: Path, rows: list[dict], columns: tuple = COLUMNS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)  # (never a half-written results file)


def run_key(row: dict, key: tuple = KEY) -> tuple[str, ...]:
    """What a row is of, as text (rows read back from a CSV hold strings, new ones may hold numbers): by
    default (setting, output alpha, attention alpha, seed), the run, in any of the run CSVs."""
    return tuple(str(row[k]) for k in key)


def merge(old: list[dict], new: list[dict], key: tuple = KEY) -> list[dict]:
    """``old`` without the rows of the runs that ``new`` has rows for, then ``new``: a run recorded
    again (trained on, or again at another commit) replaces all its rows (one in the table, one a
    validation or language in the others). ``key``: the columns naming what a row replaces (``run_key``)."""
    again = {run_key(r, key) for r in new}
    return [r for r in old if run_key(r, key) not in again] + new


def unchanged(old: list[dict], new: list[dict], key: tuple = KEY) -> bool:
    """Whether ``new``, the rows of one run (or one ensemble), are the rows ``old`` holds for it in every
    column but commit and date: a run recorded again unchanged keeps the commit it was recorded with."""
    names = {run_key(r, key) for r in new}

    def content(rows):
        return sorted(tuple((k, str(v)) for k, v in sorted(r.items()) if k not in ("commit", "date")) for r in rows)
    return content(r for r in old if run_key(r, key) in names) == content(new)


def sorted_rows(rows: list[dict], then: str | None = None) -> list[dict]:
    """Rows by run (setting, alphas as numbers, seed, commit), then by ``then`` (a validation's step,
    numeric; a language's name): files that change only where a run changed."""
    def key(r):
        last = () if then is None else (int(r[then]) if r[then].isdigit() else r[then],)
        return (r["setting"], float(r["output_alpha"]), float(r["attention_alpha"]), int(r["seed"]), r["commit"],
                *last)
    return sorted(rows, key=key)


def last_saved_step(log_text: str) -> int | None:
    """The step of the last checkpoint the training log says it saved (OpenNMT-py saves at every
    validation and when training ends), or None."""
    steps = _SAVED.findall(log_text)
    return int(steps[-1]) if steps else None


def validation_curve(log_text: str) -> list[dict]:
    """Every validation of a training log: {step, valid_acc, valid_loss, lr}: valid_loss is the loss a
    target token (cross-entropy, from the perplexity OpenNMT-py logs, for a softmax output; the
    Fenchel-Young loss for a sparse one), lr the learning rate after that validation (halved there if
    the loss rose). A validation's step is the one of the checkpoint saved right after it."""
    out, pending, lr = [], {}, None
    for line in log_text.splitlines():
        if (m := _LR.search(line)) is not None:  # printed with 5 decimals: the exact halved value is kept
            if lr is None or f"{float(lr):.5f}" != f"{float(m.group(1)):.5f}":
                lr = m.group(1)
        elif (m := _HALVED.search(line)) is not None:
            lr = m.group(1)
        elif (m := _VALID_LOSS.search(line)) is not None:  # (softmax: cross-entropy = log perplexity)
            value = float(m.group(2))
            pending["valid_loss"] = f"{math.log(value) if m.group(1) == 'perplexity' else value:.6g}"
        elif (m := _VALID_ACC.search(line)) is not None:
            pending["valid_acc"] = m.group(1)
        elif (m := _SAVED.search(line)) is not None and "valid_acc" in pending:
            out.append({"step": int(m.group(1)), "valid_acc": pending["valid_acc"],
                        "valid_loss": pending.get("valid_loss", ""), "lr": f"{float(lr):g}" if lr else ""})
            pending = {}
    return out


def curve_rows(setting: str, name: str, seed: int, log_text: str, steps_per_epoch: int, commit: str) -> list[dict]:
    out_a, attn_a = alphas(name)
    return [{"setting": setting, "output_alpha": out_a, "attention_alpha": attn_a, "seed": str(seed),
             "epoch": f"{v['step'] / steps_per_epoch:.1f}", "step": str(v["step"]), "valid_acc": v["valid_acc"],
             "valid_loss": v["valid_loss"], "lr": v["lr"], "commit": commit} for v in validation_curve(log_text)]


def language_rows(setting: str, name: str, seed: int, scores: dict, commit: str) -> list[dict]:
    """The test scores of each language of an evaluated run (scores.json's per_language)."""
    out_a, attn_a = alphas(name)
    per = scores.get("per_language", {})
    return [{"setting": setting, "output_alpha": out_a, "attention_alpha": attn_a, "seed": str(seed),
             "language": lang, "n": str(v["n"]), "test_acc": f"{v['accuracy']:.2f}",
             "test_lev": f"{v['levenshtein']:.3f}", "commit": commit}
            for lang, v in sorted(per.items()) if lang != "average"]


def training_devices(log_text: str) -> str | None:
    """The devices a run's pieces trained on (``[reproduce] … piece on NAME:`` lines of its train.log),
    in order of first use and joined by " + "; pieces of logs that did not name them yet are said to be
    unnamed. None: no piece names a device."""
    pieces = [m.group(2) for m in _PIECE.finditer(log_text)]
    named = [p for p in pieces if p]
    if not named:
        return None
    unnamed = len(pieces) - len(named)
    return " + ".join(dict.fromkeys(named)) + (f" ({unnamed} earlier pieces unnamed)" if unnamed else "")


def last_piece(log_text: str) -> str:
    """What a log's last piece wrote: the text after its last ``[reproduce] … piece`` line, or the
    whole text if it has none."""
    starts = list(_PIECE.finditer(log_text))
    return log_text[starts[-1].end():] if starts else log_text


def last_piece_rate(log_text: str) -> float | None:
    """Training steps a second in a log's last piece (``last_piece``): from the first to the last
    ``Step N/M`` report line's timestamp, so the validations and checkpoints between them are counted
    in. None: fewer than two reports."""
    reports = _STEP_AT.findall(last_piece(log_text))
    if len(reports) < 2:
        return None
    (t0, s0), (t1, s1) = reports[0], reports[-1]
    seconds = (_timestamp(t1) - _timestamp(t0)).total_seconds()
    return (int(s1) - int(s0)) / seconds if seconds > 0 else None


def _timestamp(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")


def _today() -> str:
    """The date (UTC) a row is recorded on."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def _row_name(row: dict) -> str:
    """The Table 1 row name (``outA-attnB``) of a CSV row."""
    return f"out{row['output_alpha']}-attn{row['attention_alpha']}"


def run_row(setting: str, name: str, seed: int, scores: dict, steps: int, steps_per_epoch: int,
            commit: str, date: str | None = None, devices: str | None = None) -> dict:
    """One CSV row of an evaluated run (``scores``: its scores.json; ``devices``: ``training_devices``
    of its log, else the device that decoded it)."""
    out_a, attn_a = alphas(name)
    return {"setting": setting, "output_alpha": out_a, "attention_alpha": attn_a, "seed": str(seed),
            "epochs": f"{steps / steps_per_epoch:.1f}", "steps": str(steps),
            "valid_acc": f"{scores['dev_accuracy']:.2f}", "test_acc": f"{scores['accuracy']:.2f}",
            "test_lev": f"{scores['levenshtein']:.3f}", "gpu": devices or scores.get("gpu", "unknown"),
            "commit": commit, "date": date or _today()}


def ensemble_row(setting: str, name: str, seeds: list[int], scores: dict, commit: str,
                 date: str | None = None) -> dict:
    """One row of <table>-ensembles.csv: the ensemble (averaged probabilities) of ``seeds``' best
    checkpoints; ``scores``: its ensemble/scores.json."""
    out_a, attn_a = alphas(name)
    return {"setting": setting, "output_alpha": out_a, "attention_alpha": attn_a,
            "seeds": " ".join(str(s) for s in sorted(seeds)), "test_acc": f"{scores['accuracy']:.2f}",
            "test_lev": f"{scores['levenshtein']:.3f}", "gpu": scores.get("gpu", "unknown"), "commit": commit,
            "date": date or _today()}


def sorted_ensemble_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["setting"], float(r["output_alpha"]), float(r["attention_alpha"])))


def ensemble_cells(rows: list[dict], metric: str = "test_acc") -> dict[tuple[str, str], tuple[float, int]]:
    """{(row name, "<setting>-ens"): (metric, number of seeds averaged)} of <table>-ensembles.csv rows."""
    return {(_row_name(r), f"{r['setting']}-ens"): (float(r[metric]), len(r["seeds"].split())) for r in rows}


def latest_per_run(rows: list[dict]) -> list[dict]:
    """The newest row (by date, then file order) of each (setting, alphas, seed). ``record`` keeps one
    row per run (``merge``); this guards a file that was put together by other means."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = run_key(r)
        if key not in out or r["date"] >= out[key]["date"]:
            out[key] = r
    return list(out.values())


def run_summary(run: dict, curve: list[dict], train_steps: int | None) -> dict:
    """What a reader asks of one recorded run (a row of <table>.csv and its validations): how long it
    trained, how it ended (``step cap``: it reached ``train_steps``; else ``stop rule``: its patience ran
    out), its best validation and the epoch and step of it (the first of equals: the checkpoint decoded),
    the epochs after whose validation the learning rate was halved, and its test scores."""
    curve = sorted(curve, key=lambda v: int(v["step"]))
    best = max(curve, key=lambda v: float(v["valid_acc"])) if curve else None
    return {"epochs": int(float(run["epochs"])), "steps": int(run["steps"]),
            "ended": "step cap" if train_steps and int(run["steps"]) >= int(train_steps) else "stop rule",
            "valid_acc": run["valid_acc"], "best_epoch": None if best is None else int(float(best["epoch"])),
            "best_step": None if best is None else int(best["step"]),
            "halved": [int(float(b["epoch"])) for a, b in zip(curve, curve[1:]) if float(b["lr"]) < float(a["lr"])],
            "test_acc": run["test_acc"], "test_lev": run["test_lev"]}


def cells(rows: list[dict], metric: str = "test_acc") -> dict[tuple[str, str], list[float]]:
    """{(row name, "<setting>-avg"): [metric of each seed]} for tables.markdown_table."""
    out: dict[tuple[str, str], list[float]] = {}
    for r in latest_per_run(rows):
        out.setdefault((_row_name(r), f"{r['setting']}-avg"), []).append(float(r[metric]))
    return out


def scores_of(run_dir: Path) -> dict | None:
    path = run_dir / "scores.json"
    return json.loads(path.read_text()) if path.exists() else None
