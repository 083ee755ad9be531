"""``status``: where each run stands: validations, best validation accuracy and when, validations since
(against early_stopping), learning rate, finished or not and why (stop rule or step cap), the step its
scores are for, steps/s of its last piece and minutes from its newest checkpoint to train_steps at that
rate; for a table with an ensemble column, each configuration's ensemble and which seeds' best
checkpoints are here to decode it."""
from __future__ import annotations

import argparse
from pathlib import Path

import experiments as E
import results_csv
from pieces import scored_step, trainer_of

from . import common, run_files


def run_status(e: E.Experiment, seed: int, runs: Path | None = None) -> dict | None:
    """Where one run stands, from its train.log under ``runs`` (default: here; None: not started)."""
    run_dir = (runs or common.WORK) / e.run_dir / f"seed{seed}"
    if not (run_dir / "train.log").exists():
        return None
    log_text = (run_dir / "train.log").read_text(encoding="utf-8")
    curve = results_csv.validation_curve(log_text)
    out = {"run": f"{e.name}/seed{seed}", "validations": len(curve), "finished": (run_dir / "train.done").exists(),
           "scored_step": scored_step(run_dir), "patience": e.config.get("early_stopping", 0),
           "rate": results_csv.last_piece_rate(log_text), "saved_step": results_csv.last_saved_step(log_text),
           "trainer": trainer_of(run_dir), "scored_here": run_files.scored_checkpoint_here(run_dir) is not None}
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
    """Markdown, a row a run of ``seeds`` of the experiments ``only`` selects (``run_status``)."""
    rows = ["| run | validations | best valid. acc. (step) | validations since | learning rate | finished | "
            "scores for step | steps/s (last piece) | minutes to the step cap |", "|---" * 9 + "|"]
    for e in common.experiments(table, only):
        for seed in seeds:
            r = run_status(e, seed, runs)
            if r is None:
                rows.append(f"| {e.name}/seed{seed} | not started | | | | | | | |")
                continue
            best = f"{r['best_acc']:.2f} ({r['best_step']})" if "best_acc" in r else "–"
            since = str(r.get("since_best", "–"))
            since = f"{since} / {r['patience']}" if r["patience"] else since
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
    for e in common.experiments(table, only):
        base = (runs or common.WORK) / e.run_dir
        ens = results_csv.scores_of(base / "ensemble")
        decoded = "–" if ens is None else (", ".join(sorted((s[len("seed"):] for s in run_files.ensemble_seeds(
            ens.get("checkpoints", []))), key=int)) + f": {ens['accuracy']:.2f}")
        groups = {"here": [], "elsewhere": [], "unscored": []}
        for seed in seeds:
            run_dir = base / f"seed{seed}"
            key = "unscored" if scored_step(run_dir) is None else \
                "here" if run_files.scored_checkpoint_here(run_dir) is not None else "elsewhere"
            groups[key].append(str(seed))
        rows.append(f"| {e.name} | {decoded} | " + " | ".join(", ".join(g) or "–" for g in groups.values()) + " |")
    return "\n".join(rows)


def run_step(a: argparse.Namespace) -> None:
    """The runs of ``--seeds`` of the experiments ``--only`` selects (of ``--runs`` if given), then their
    ensembles where the table has an ensemble column."""
    print(print_status(a.table, a.seeds, a.only, a.runs))
    if E.TABLES[a.table].ensemble:
        print("\n" + print_ensemble_status(a.table, a.seeds, a.only, a.runs))
