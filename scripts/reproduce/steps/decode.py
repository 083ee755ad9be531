"""Decode a test (or validation) set with onmt_translate and score the predictions: what evaluate and
analyze decode with, and checkpoint_score.py."""
from __future__ import annotations

import json
from pathlib import Path

import experiments as E

from onmt_entmax.evaluation import bleu, sigmorphon

from . import common


def translate(models: list[str], src: Path, out: Path, gpu: int | None, extra: list[str] = (),
              cwd: Path | None = None) -> None:
    """Beam 5 (Peters et al. §4); several models: an ensemble averaging probabilities (-avg_raw_probs);
    ``extra``: the experiment's decoding options (``Experiment.decode``) and any others."""
    gpu_args = ["-gpu", "0"] if gpu is not None else []  # (the GPU itself: CUDA_VISIBLE_DEVICES)
    ens = ["-avg_raw_probs"] if len(models) > 1 else []
    common.run(["onmt_translate", "-model", *models, "-src", src, "-output", out, "-beam_size", "5",
                "-batch_size", str(common.TRANSLATE_BATCH), "-max_length", "250", *ens, *gpu_args, *extra], cwd=cwd,
               log=Path(out).with_suffix(".log"), gpu=gpu)


def score(e: E.Experiment, pred: Path, data: Path | None = None) -> dict:
    """Test-set scores of a prediction file (SIGMORPHON: averaged over languages; MT: both BLEUs)."""
    data = data or common.WORK / E.DATA / e.corpus
    hyp = common.read_lines(pred)
    if e.task == "sigmorphon":
        per = sigmorphon.score_multilingual(common.read_lines(data / "src-test.txt"), hyp,
                                            common.read_lines(data / "tgt-test.txt"))
        return {"accuracy": per["average"]["accuracy"], "levenshtein": per["average"]["levenshtein"],
                "per_language": per}
    prepared = json.loads((data / "prepare.json").read_text())
    lower = prepared["recipe"]["lowercase"]
    undo = bleu.remove_sentencepiece if prepared.get("subword") == "sentencepiece" else bleu.remove_bpe
    tok_hyp = [undo(h) for h in hyp]
    raw_ref = common.read_lines(data / f"test.raw.{e.tgt}")
    if lower:
        raw_ref = [r.lower() for r in raw_ref]
    out = {"tokenized_bleu": bleu.tokenized_bleu(tok_hyp, common.read_lines(data / f"test.tok.{e.tgt}"))}
    try:
        out["sacrebleu"], out["signature"] = bleu.sacrebleu_score(bleu.moses_detokenize(tok_hyp, e.tgt), raw_ref, e.tgt)
    except RuntimeError as err:  # e.g. Japanese without MeCab: keep the tokenized score
        out["sacrebleu_error"] = str(err)
    return out


def test_source(e: E.Experiment, split: str = "test") -> Path:
    d = common.WORK / E.DATA / e.corpus
    return d / (f"src-{split}.txt" if e.task == "sigmorphon" else f"{split}.bpe.{e.src}")
