"""attention_scale.py: the spread of an RNN's attention scores and the norms behind it."""
import os
import subprocess
import sys

import pytest
import torch
import yaml

from pipeline_helpers import ROOT, load_script

sc = load_script("scripts/reproduce/attention_scale.py")
SAMPLE = ROOT / "data" / "sigmorphon2018-sample"


def test_score_sums_count_only_real_positions_and_steps():
    scores = torch.tensor([[[4.0, 1.0, 3.0, 9.0],     # 3 real positions: max 4, next 3, std of (4, 1, 3)
                            [0.0, 0.0, 0.0, 0.0]],    # a padded target step
                           [[5.0, -7.0, 8.0, 8.0],    # 1 real position: no second score
                            [2.0, 6.0, 6.0, 6.0]]])
    src_mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    tgt_mask = torch.tensor([[True, False], [True, True]])
    sums = sc.score_sums(scores, src_mask, tgt_mask, within=2.0)
    assert sums["steps"] == 3
    assert sums["top-2 gap"] == pytest.approx(1.0 + 0.0 + 0.0)
    assert sums["within 2"] == pytest.approx(2 + 1 + 1)  # 4 and 3 are within 2 of 4; the lone positions
    assert sums["score std"] == pytest.approx(torch.tensor([4.0, 1.0, 3.0]).std(unbiased=False).item())


def test_a_checkpoint_gets_a_row_of_finite_means(tmp_path):
    """A tiny 1.5-entmax RNN trained 2 steps on the bundled sample, measured on its dev file."""
    cfg = yaml.safe_load((ROOT / "configs/examples/rnn-entmax15.yaml").read_text())
    cfg.update(save_data=str(tmp_path), src_vocab=str(tmp_path / "vocab.src"), tgt_vocab=str(tmp_path / "vocab.tgt"),
               save_model=str(tmp_path / "model"), train_steps=2, valid_steps=100, save_checkpoint_steps=2)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    for module in ("onmt.bin.build_vocab", "onmt.bin.train"):
        extra = ["-n_sample", "-1"] if module.endswith("vocab") else []
        proc = subprocess.run([sys.executable, "-m", module, "-config", str(config), *extra], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert proc.returncode == 0, proc.stderr[-2000:]
    out = subprocess.run([sys.executable, "scripts/reproduce/attention_scale.py", str(tmp_path / "model_step_2.pt"),
                          "--src", str(SAMPLE / "src-dev.txt"), "--tgt", str(SAMPLE / "tgt-dev.txt"), "--lines", "20"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.strip("|").split("|") for line in out.stdout.splitlines() if line.startswith("| ")]
    header, row = rows[0], rows[-1]
    assert [c.strip() for c in header[1:]] == [*sc.COLUMNS, "‖W‖"] and len(rows) == 2
    values = [float(c) for c in row[1:]]
    assert all(v == v and abs(v) < float("inf") for v in values) and min(values[3:5]) > 0, row


def test_a_missing_file_and_a_bad_line_count_are_refused_in_one_line(tmp_path):
    for args, message in ((["nope.pt", "--src", "a", "--tgt", "b"], "--src a: no such file"),
                          ([str(SAMPLE / "src-dev.txt"), "--src", str(SAMPLE / "src-dev.txt"),
                            "--tgt", str(SAMPLE / "tgt-dev.txt"), "--lines", "0"], "--lines 0: must be >= 1")):
        proc = subprocess.run([sys.executable, "scripts/reproduce/attention_scale.py", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr.strip().splitlines()[-1]
