"""Smoke runs of every config family on real data: onmt_build_vocab, onmt_train (the family's options on
a tiny model, a few steps), best-validation checkpoint, onmt_translate, scores. Each takes 35-140 s on
2 busy CPU cores, so they are marked ``slow``: ``pytest -m slow tests/pipelines`` or ``scripts/reproduce.sh smoke``."""
import json
import math
import re
import shutil
from collections import defaultdict

import pytest
import yaml

import experiments as E
from pieces import best_checkpoint
from pipeline_helpers import ROOT, load_script
from steps import analyze as analyze_step
from steps import common
from steps.analyze import analyze
from steps.common import run
from steps.decode import score, translate
from steps.evaluate import evaluate
from steps.smoke_data import smoke_data
from steps.train import build_vocab, train

mk = load_script("scripts/reproduce/make_configs.py")
FAMILIES = sorted(mk.smoke_configs())

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("onmt_train") is None, reason="needs onmt_train")]


def _macro_accuracy(src, hyp, ref) -> float:
    """SIGMORPHON's headline accuracy recomputed here: exact matches per language (the first source
    token), averaged over languages unweighted, in percent."""
    per = defaultdict(list)
    for s, h, r in zip(src, hyp, ref, strict=True):
        per[s.split()[0]].append(h.split() == r.split())
    return 100 * sum(sum(v) / len(v) for v in per.values()) / len(per)


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def _best_validation(log_text: str) -> float:
    """The best 'Validation accuracy' of a log (the configs save a checkpoint at every validation)."""
    return max(float(x) for x in re.findall(r"Validation accuracy: ([0-9.]+)", log_text))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch root holding data/ (the bundled samples) and work/smoke/multi30k (100 lines a split of the
    bundled Multi30k sample, the release's first lines): every family runs on a fresh clone."""
    cwd = tmp_path_factory.mktemp("smoke")
    (cwd / "data").symlink_to(ROOT / "data")
    smoke_data(cwd, lines=100, merges=300)
    return cwd


@pytest.mark.parametrize("family", FAMILIES)
def test_smoke_family_trains_translates_and_scores(family, workdir):
    e, _ = mk.smoke_configs()[family]
    config = ROOT / f"configs/smoke/{family}.yaml"
    cfg = yaml.safe_load(config.read_text())
    build_vocab(cfg, config, cwd=workdir)
    log = workdir / f"{family}.train.log"
    run(["onmt_train", "-config", config, "-seed", "1"], cwd=workdir, log=log)
    ckpt, dev_acc = best_checkpoint(log.read_text(encoding="utf-8"))
    assert (workdir / ckpt).exists() and dev_acc == _best_validation(log.read_text(encoding="utf-8"))
    if e.task == "sigmorphon":
        data, src = workdir / "data/sigmorphon2018-sample", "src-test.txt"
    else:
        data, src = workdir / "work/smoke/multi30k", f"test.bpe.{e.src}"
    pred = workdir / f"{family}.pred.txt"
    # an untrained model rarely stops: cap the length so beam search ends quickly
    translate([ckpt], data / src, pred, None, extra=["-max_length", "40"], cwd=workdir)
    scores = score(e, pred, data=data)
    if e.task == "sigmorphon":
        assert scores["accuracy"] == pytest.approx(_macro_accuracy(_lines(data / src), _lines(pred),
                                                                   _lines(data / "tgt-test.txt")))
    else:  # multi-bleu.perl's corpus BLEU of the BPE-joined hypotheses against the tokenized references
        from sacrebleu.metrics import BLEU

        hyps = [re.sub(r"(@@ )|(@@ ?$)", "", h) for h in _lines(pred)]
        want = BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(
            hyps, [_lines(data / f"test.tok.{e.tgt}")]).score
        assert scores["tokenized_bleu"] == pytest.approx(want) and not math.isnan(want)
    if e.task == "mt":
        assert "sacrebleu" in scores and scores["signature"].startswith("nrefs:1")
    json.dumps(scores)  # what reproduce.py writes to scores.json


def test_driver_trains_two_seeds_evaluates_and_ensembles(tmp_path, monkeypatch):
    """reproduce.py's own train / evaluate steps on the SIGMORPHON smoke config: two seeds, the best
    checkpoint of each, test scores, and the raw-probability ensemble of both (Table 1's "ens.")."""
    config = ROOT / "configs/smoke/peters2019-sigmorphon.yaml"
    cfg = yaml.safe_load(config.read_text())
    (tmp_path / "data").symlink_to(ROOT / "data")
    (tmp_path / "work/data").mkdir(parents=True)
    (tmp_path / "work/data/sigsample").symlink_to(ROOT / "data/sigmorphon2018-sample")
    monkeypatch.setattr(common, "WORK", tmp_path)
    e = E.Experiment("smoke", "peters2019-sigmorphon", cfg, "sigsample", "src", "tgt",
                     "peters2019-table1", "out1.5-attn1.5", "medium", "sigmorphon")
    build_vocab(cfg, config)
    for seed in (1, 2):
        train(e, seed, None)
    evaluate(e, [1, 2], None)
    runs = tmp_path / "runs/smoke/peters2019-sigmorphon"
    seeds = [json.loads((runs / f"seed{s}/scores.json").read_text()) for s in (1, 2)]
    data = ROOT / "data/sigmorphon2018-sample"
    src, ref = _lines(data / "src-test.txt"), _lines(data / "tgt-test.txt")
    for s, scores in zip((1, 2), seeds):
        assert scores["accuracy"] == pytest.approx(_macro_accuracy(src, _lines(runs / f"seed{s}/pred.test.txt"), ref))
        assert scores["checkpoint"].endswith("_step_6.pt")
    assert set(seeds[0]["per_language"]) == {"english", "hebrew", "slovak", "west-frisian", "average"}
    ens = json.loads((runs / "ensemble/scores.json").read_text())
    assert len(ens["checkpoints"]) == 2
    assert len(_lines(runs / "ensemble/pred.test.txt")) == 100
    assert ens["accuracy"] == pytest.approx(_macro_accuracy(src, _lines(runs / "ensemble/pred.test.txt"), ref))
    # §4.1 analysis of the same runs: certificates and support enumeration on the validation set
    monkeypatch.setattr(analyze_step, "analysis_runs", lambda name: [e])
    analyze("peters2019-sec4.1", [1], None)
    summary = json.loads((runs / "seed1/analysis-peters2019-sec4.1.json").read_text())
    recs = [json.loads(line) for line in _lines(runs / "seed1/analysis-peters2019-sec4.1.jsonl")]
    assert summary["sentences"] == len(recs) == 100
    assert summary["certified"] == sum(r["certified"] for r in recs)
    assert summary["certified_rate"] == summary["certified"] / 100
    assert summary["enumerated"] == sum("size" in r["support"] for r in recs)
    assert summary["enumerated"] + summary["enumeration_failed"] == 100
