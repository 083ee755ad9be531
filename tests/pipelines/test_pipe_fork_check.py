"""fork_check.py: the paper's 2019 fork run on current torch, and its model against ours.

The last test needs a checkout of deep-spin/OpenNMT-entmax (ONMT_ENTMAX_FORK), torchtext 0.4.0
(ONMT_ENTMAX_FORK_PYTHONPATH: the folder it is installed in) and the medium data under work/data;
it is skipped without them."""
import os
import subprocess
import sys

import pytest
import torch

from pipeline_helpers import ROOT, load_script

fc = load_script("scripts/reproduce/fork_check.py")


def test_attention_nonzeros_count_only_real_target_tokens():
    attn = torch.tensor([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]],   # step 0: 2 and 1 nonzero
                         [[0.2, 0.3, 0.5], [0.9, 0.1, 0.0]]])  # step 1: 3, and a pad target
    gold = torch.tensor([[7, 8], [9, 1]])  # padding index 1
    assert fc.attention_nonzeros(attn, gold, padding_idx=1) == (2 + 1 + 3, 3)


def test_the_forks_one_minus_mask_is_the_negated_mask():
    valid = torch.tensor([[True, True, False], [True, False, False]])
    mask = valid.as_subclass(fc.SubtractableMask).unsqueeze(1)  # as the fork uses it
    align = torch.zeros(2, 1, 3)
    align.masked_fill_(1 - mask, -float("inf"))  # the fork's line, refused for a plain bool tensor
    assert torch.equal(torch.isinf(align).squeeze(1), ~valid)
    with pytest.raises(RuntimeError):
        1 - valid  # (what the subclass works around)


def test_a_folder_that_is_not_the_fork_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        fc.main(["--fork", str(tmp_path), "run", "train.py"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"--fork {tmp_path}: not a checkout of deep-spin/OpenNMT-entmax" in err


def test_the_forks_options_come_from_our_config_and_other_models_are_refused():
    import yaml

    cfg = yaml.safe_load((ROOT / "configs/peters2019-sigmorphon/medium/out1-attn1.5.yaml").read_text())
    opts = fc.fork_model_options(cfg, "out1-attn1.5")
    pairs = dict(zip(opts[::2], opts[1::2]))
    assert pairs == {"-encoder_type": "brnn", "-rnn_type": "LSTM", "-layers": "2", "-rnn_size": "300",
                     "-word_vec_size": "300", "-input_feed": "1", "-global_attention": "general",
                     "-global_attention_function": "tsallis15"}
    with pytest.raises(ValueError, match="x.yaml: not an RNN config"):
        fc.fork_model_options({"decoder_type": "transformer"}, "x.yaml")
    with pytest.raises(ValueError, match="global_attention_function entmax_bisect has no counterpart"):
        fc.fork_model_options({"global_attention_function": "entmax_bisect"}, "x.yaml")


FORK = os.environ.get("ONMT_ENTMAX_FORK")
DATA = ROOT / "work" / "data" / "sigmorphon2018-medium"


@pytest.mark.skipif(not FORK or not DATA.is_dir(), reason="needs ONMT_ENTMAX_FORK and work/data/sigmorphon2018-medium")
def test_ours_computes_the_forks_model_for_sparse_attention(tmp_path):
    """The paper's 1/1.5 model: the same logits, attention and gradients in both toolkits."""
    base = [sys.executable, str(ROOT / "scripts/reproduce/fork_check.py"), "--fork", FORK]
    if os.environ.get("ONMT_ENTMAX_FORK_PYTHONPATH"):
        base += ["--pythonpath", os.environ["ONMT_ENTMAX_FORK_PYTHONPATH"]]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    pre = subprocess.run(base + ["run", "preprocess.py", "-train_src", str(DATA / "src-train.txt"),
                                 "-train_tgt", str(DATA / "tgt-train.txt"), "-valid_src", str(DATA / "src-dev.txt"),
                                 "-valid_tgt", str(DATA / "tgt-dev.txt"), "-save_data", str(tmp_path / "med")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert pre.returncode == 0, pre.stderr[-2000:]
    out = subprocess.run(base + ["model", "--fork-data", str(tmp_path / "med"), "--config",
                                 "configs/peters2019-sigmorphon/medium/out1-attn1.5.yaml"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "| attention | 0.0e+00 |" in out.stdout and "same function" in out.stdout
