"""checkpoint_score.py: any saved checkpoint of a run scored as evaluate scores the best one."""
import subprocess
import sys

import pytest

from pipeline_helpers import ROOT, load_script

cs = load_script("scripts/reproduce/checkpoint_score.py")
SCRIPT = str(ROOT / "scripts" / "reproduce" / "checkpoint_score.py")


def _experiment(name="medium/out1-attn1"):
    return next(e for e in cs.common.experiments("peters2019-table1") if e.name == name)


def test_a_checkpoint_is_placed_in_its_run_and_seed(tmp_path, monkeypatch):
    monkeypatch.setattr(cs.common, "WORK", tmp_path)
    e, other = _experiment(), _experiment("medium/out1-attn1.5")
    ckpt = tmp_path / e.run_dir / "seed3" / "model_step_87910.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"")
    assert cs.run_seed(e, ckpt) == 3
    with pytest.raises(ValueError, match="not a checkpoint of a run of medium/out1-attn1.5"):
        cs.run_seed(other, ckpt)
    with pytest.raises(ValueError, match="not a model_step_N.pt checkpoint"):
        cs.run_seed(e, ckpt.with_name("model_step_87910.pt.bak"))


def test_the_epoch_of_a_step_counts_the_validations_up_to_it():
    log = "".join(f"[..] Validation accuracy: {90 + k}.0\n[..] Saving checkpoint /r/model_step_{1490 * k}.pt\n"
                  for k in range(1, 6))
    assert cs.epoch_of(log, 1490 * 3) == 3.0
    assert cs.epoch_of(log, 1490 * 3 + 200) == 3.0  # (a checkpoint saved between validations)
    assert cs.epoch_of(log, 100) is None


def test_bad_arguments_get_one_line_naming_them(tmp_path):
    for args, said in [(["peters2019-table1", "medium/out9-attn9", "x.pt"], "no experiment 'medium/out9-attn9'"),
                       (["peters2019-table1", "medium/out1-attn1", str(tmp_path / "none.pt")], "none.pt: no such"),
                       (["peters2019-table1", "medium/out1-attn1", __file__], "not a checkpoint of a run")]:
        out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=ROOT)
        assert out.returncode != 0 and said in out.stderr and out.stderr.strip().count("\n") == 0, out.stderr
