"""Run folders as the reproduce steps find them, for their tests (tests/pipelines/test_pipe_reproduce_*.py):
a training log, scored seeds of a table, a finished and evaluated run."""
import json

import experiments as E

LOG = """[2026-01-01 10:00:00,000 INFO] Step 500/1500; acc: 50.1; ...
[2026-01-01 10:00:01,000 INFO] Validation accuracy: 61.5
[2026-01-01 10:00:01,100 INFO] Saving checkpoint runs/x/seed1/model_step_500.pt
[2026-01-01 10:00:02,000 INFO] Validation accuracy: 70.25
[2026-01-01 10:00:02,100 INFO] Saving checkpoint runs/x/seed1/model_step_1000.pt
[2026-01-01 10:00:03,000 INFO] Validation accuracy: 69.0
[2026-01-01 10:00:03,100 INFO] Saving checkpoint runs/x/seed1/model_step_1500.pt
"""


def scored_runs(tmp_path, table, rows_scores):
    """scores.json of each seed of the rows of ``table`` that ``rows_scores`` names: {row: [value of each seed]}."""
    for e in E.all_experiments():
        if e.table == table and e.row in rows_scores:
            for seed, value in enumerate(rows_scores[e.row], 1):
                d = tmp_path / e.run_dir / f"seed{seed}"
                d.mkdir(parents=True)
                (d / "scores.json").write_text(json.dumps({E.TABLES[table].metric: value, "dev_accuracy": value}))


def train_log(run_dir, dev):
    """A training log with one validation (``dev``) and the checkpoint it saved."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "train.log").write_text(f"[..] Validation accuracy: {dev}\n"
                                       f"[..] Saving checkpoint {run_dir}/model_step_5.pt\n")
    (run_dir / "model_step_5.pt").write_bytes(b"")  # the checkpoint the log names (decoding is faked)


def evaluated_run(root, e, seed, acc, step):
    """A finished run folder as the GPU machine leaves it: a training log that validated (and saved) at
    every epoch up to ``step``, the halving of the learning rate at the second validation, train.done
    and scores.json."""
    d = root / e.run_dir / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, s in enumerate(range(1490, step + 1, 1490)):
        lines += [f"[..] Step {s - 10}/149000; acc: 80.0; entmax15 FY loss: 0.1; "
                  f"lr: {'0.00100' if i < 2 else '0.00050'};",
                  f"[..] Validation entmax15 FY loss: {0.2 - i / 100:g}", f"[..] Validation accuracy: {acc - 1 + i:g}"]
        lines += ["[..] valid_lr_halving: validation loss 0.2 > 0.1, learning rate halved to 0.0005"] if i == 1 else []
        lines += [f"[..] Saving checkpoint {d}/model_step_{s}.pt"]
    (d / "train.log").write_text("\n".join(lines) + "\n")
    (d / "train.done").write_text("")
    per = {"latin": {"accuracy": acc - 50, "levenshtein": 1.5, "n": 1000},
           "uzbek": {"accuracy": 100.0, "levenshtein": 0.0, "n": 100},
           "average": {"accuracy": acc, "levenshtein": 0.25, "n": 1100}}
    (d / "scores.json").write_text(json.dumps({"dev_accuracy": acc + 5, "accuracy": acc, "levenshtein": 0.25,
                                               "gpu": "NVIDIA H100 80GB HBM3", "per_language": per}))
