"""Smoke runs of every config family on real data: onmt_build_vocab, onmt_train (the family's options on
a tiny model, a few steps), best-validation checkpoint, onmt_translate, scores. Each takes 15-40 s on
2 CPU cores, so they are marked ``slow``: ``pytest -m slow tests/pipelines`` or ``scripts/reproduce.sh smoke``."""
import json
import math
import shutil
import sys

import pytest
import yaml

from pipeline_helpers import ROOT, SHARED, load_script

rep = load_script("scripts/reproduce/reproduce.py")
mk = load_script("scripts/reproduce/make_configs.py")
FAMILIES = sorted(mk.smoke_configs())

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("onmt_train") is None, reason="needs onmt_train")]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch root holding data/ (the bundled sample) and work/smoke/multi30k (real Multi30k, 100 lines a split)."""
    cwd = tmp_path_factory.mktemp("smoke")
    (cwd / "data").symlink_to(ROOT / "data")
    if (SHARED / "multi30k").exists():
        rep.smoke_data(cwd, lines=100, merges=300)
    return cwd


@pytest.mark.parametrize("family", FAMILIES)
def test_smoke_family_trains_translates_and_scores(family, workdir):
    e, _ = mk.smoke_configs()[family]
    config = ROOT / f"configs/smoke/{family}.yaml"
    cfg = yaml.safe_load(config.read_text())
    if e.task == "mt" and not (workdir / "work/smoke/multi30k").exists():
        pytest.skip("needs ../shared/data/multi30k")
    rep.build_vocab(cfg, config, cwd=workdir)
    log = workdir / f"{family}.train.log"
    rep.run(["onmt_train", "-config", config, "-seed", "1"], cwd=workdir, log=log)
    ckpt, dev_acc = rep.best_checkpoint(log.read_text(encoding="utf-8"))
    assert (workdir / ckpt).exists() and 0.0 <= dev_acc <= 100.0
    if e.task == "sigmorphon":
        data, src = workdir / "data/sigmorphon2018-sample", "src-test.txt"
    else:
        data, src = workdir / "work/smoke/multi30k", f"test.bpe.{e.src}"
    pred = workdir / f"{family}.pred.txt"
    # an untrained model rarely stops: cap the length so beam search ends quickly
    rep.translate([ckpt], data / src, pred, None, extra=["-max_length", "40"], cwd=workdir)
    scores = rep.score(e, pred, data=data)
    metric = "accuracy" if e.task == "sigmorphon" else "tokenized_bleu"
    assert 0.0 <= scores[metric] <= 100.0 and not math.isnan(scores[metric])
    if e.task == "mt":
        assert "sacrebleu" in scores and scores["signature"].startswith("nrefs:1")
    json.dumps(scores)  # what reproduce.py writes to scores.json
