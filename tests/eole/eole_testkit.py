"""Helpers for the Eole tests: the adapter active in this process, tiny configs over the bundled data, and
Eole's own console script (``eole build_vocab | train | predict``) in fresh interpreters.

Imported by name (``from eole_testkit import build``), not from ``conftest`` (tests/onmt/onmt_testkit.py
says why); the fixtures are in conftest.py beside it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import yaml

pytest.importorskip("eole")

from eole.config.models import build_model_config  # noqa: E402
from eole.config.training import TrainingConfig  # noqa: E402
from eole.inputters.inputter import dict_to_vocabs  # noqa: E402
from eole.models.model import get_model_class  # noqa: E402

import onmt_entmax.eole as adapter  # noqa: E402
from onmt_entmax.modules import AttentionNormalizer  # noqa: E402

adapter.activate()

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from console import REPO, run_console  # noqa: E402

DATA = REPO / "data" / "sigmorphon2018-sample"
CONFIGS = REPO / "configs" / "eole"


def eole_command() -> list[str]:
    """This interpreter's ``eole`` console script (what ``scripts/test.sh`` puts first on PATH)."""
    script = Path(sys.executable).parent / "eole"
    return [str(script)] if script.exists() else [sys.executable, "-m", "eole.bin.main"]


def run_eole(args: list[str], cwd: Path, timeout: int = 300, env: dict | None = None, check: bool = True):
    """``eole ARGS`` in a fresh interpreter (the adapter activated by its import hook); the process."""
    proc = run_console(eole_command() + [str(a) for a in args], cwd=cwd, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"eole {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def small_config(example: str, directory: Path, steps: int, **training) -> Path:
    """``configs/eole/<example>.yaml`` with paths under ``directory``, the bundled data, ``steps`` training
    steps and one checkpoint at the end: the example as a user runs it, only shorter."""
    cfg = yaml.safe_load((CONFIGS / f"{example}.yaml").read_text())
    cfg["save_data"] = str(directory / "run")
    cfg["src_vocab"] = str(directory / "run" / "vocab.src")
    cfg["tgt_vocab"] = str(directory / "run" / "vocab.tgt")
    for name, corpus in cfg["data"].items():
        split = "train" if name != "valid" else "dev"
        corpus["path_src"] = str(DATA / f"src-{split}.txt")
        corpus["path_tgt"] = str(DATA / f"tgt-{split}.txt")
    cfg.pop("tensorboard", None), cfg.pop("tensorboard_log_dir", None)
    cfg["report_every"] = max(1, steps // 2)
    cfg["training"].update(model_path=str(directory / "model"), train_steps=steps, valid_steps=steps,
                           save_checkpoint_steps=steps, **training)
    path = directory / f"{example}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def sample_vocabs(directory: Path) -> None:
    """``directory/run/vocab.{src,tgt}`` with every token of the bundled training sample (what
    ``small_config`` points at), without running ``eole build_vocab``."""
    (directory / "run").mkdir(exist_ok=True)
    for side in ("src", "tgt"):
        tokens = sorted({t for line in (DATA / f"{side}-train.txt").read_text().splitlines() for t in line.split()})
        (directory / "run" / f"vocab.{side}").write_text("".join(f"{t}\t1\n" for t in tokens))


TOKENS = ["<unk>", "<blank>", "<s>", "</s>"] + list("abcdefgh")
TRANSFORMER = {"architecture": "transformer", "layers": 1, "heads": 2, "hidden_size": 16, "word_vec_size": 16,
               "transformer_ff": 32, "embeddings": {"position_encoding_type": "SinusoidalInterleaved"}}
RNN = {"architecture": "rnn", "layers": 1, "hidden_size": 16, "word_vec_size": 8}
SPECIALS = {"bos_token": "<s>", "pad_token": "<blank>", "eos_token": "</s>", "unk_token": "<unk>"}


def build(model: dict, **training):
    """A tiny new model as ``eole train`` builds it (weights drawn by ``init_weights``), with its config."""
    torch.manual_seed(0)
    config = build_model_config(model)
    running = TrainingConfig(**{"param_init_method": "uniform", **training})
    vocabs = dict_to_vocabs({"src": TOKENS, "tgt": TOKENS, "specials": SPECIALS})
    net = get_model_class(config).build(config, vocabs, running)
    net.init_weights(running)
    return net, config, vocabs


def normalizers(net):
    return {m.kind: m for m in net.modules() if isinstance(m, AttentionNormalizer) and hasattr(m, "kind")}
