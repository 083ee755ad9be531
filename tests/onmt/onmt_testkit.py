"""Helpers for the OpenNMT-py tests: tiny corpora and the real OpenNMT-py entry points.

Imported by name (``from onmt_testkit import train``), not from ``conftest``: a pytest run that collects
tests/onmt and tests/eole together imports both folders' conftest.py as ``conftest``, and a test module
would get the other folder's. The fixtures are in conftest.py beside it.

``train``/``translate``/``build_vocab`` run the stock ``onmt.bin.*`` code in this process (the
parser of the console script, then its function), which is what ``onmt_train`` etc. execute minus
the interpreter start-up; ``run_console`` starts a real new interpreter for the tests about
activation in fresh and spawned processes.
"""
from __future__ import annotations

import contextlib
import random
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("onmt")

import onmt_entmax.onmt as plugin  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from console import run_console  # noqa: E402,F401  (shared with the Eole tests)

plugin.activate()

REPO = Path(__file__).resolve().parents[2]
SYMBOLS = "abcdefgh"


def reversal_corpus(directory: Path, n_train: int = 600, n_test: int = 100, min_len: int = 3, max_len: int = 6,
                    seed: int = 0) -> Path:
    """src = random string over 8 symbols, tgt = the string reversed; train / valid / test files."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)

    def lines(n):
        out = []
        for _ in range(n):
            s = [rng.choice(SYMBOLS) for _ in range(rng.randint(min_len, max_len))]
            out.append((" ".join(s), " ".join(reversed(s))))
        return out

    for split, n in (("train", n_train), ("valid", n_test), ("test", n_test)):
        pairs = lines(n)
        (directory / f"src-{split}.txt").write_text("".join(s + "\n" for s, _ in pairs))
        (directory / f"tgt-{split}.txt").write_text("".join(t + "\n" for _, t in pairs))
    return directory


def yaml_config(directory: Path, model: dict, steps: int, name: str = "model", extra: str = "") -> Path:
    """A complete onmt_train YAML over the corpus in ``directory`` with ``model`` keys."""
    d = directory
    body = f"""save_data: {d}/run
src_vocab: {d}/run/vocab.src
tgt_vocab: {d}/run/vocab.tgt
share_vocab: true
overwrite: true
data:
  corpus_1: {{path_src: {d}/src-train.txt, path_tgt: {d}/tgt-train.txt}}
  valid: {{path_src: {d}/src-valid.txt, path_tgt: {d}/tgt-valid.txt}}
save_model: {d}/run/{name}
save_checkpoint_steps: {steps}
train_steps: {steps}
valid_steps: {steps}
report_every: {max(1, steps // 2)}
batch_size: 32
batch_type: sents
bucket_size: 1024
num_workers: 0
seed: 1
optim: adam
learning_rate: 0.005
"""
    body += "".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}\n" for k, v in model.items()) + extra
    path = d / f"{name}.yaml"
    path.write_text(body)
    return path


@contextlib.contextmanager
def one_thread():
    """Tiny models on a shared 2-core machine: one intra-op thread is several times faster."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def build_vocab(config: Path) -> None:
    from onmt.bin.build_vocab import _get_parser, build_vocab_main

    opt, _ = _get_parser().parse_known_args(["-config", str(config), "-n_sample", "-1"])
    build_vocab_main(opt)


def train(config: Path, *args: str) -> None:
    """``onmt_train -config CONFIG ARGS`` (the console script's parser and function)."""
    from onmt.bin.train import _get_parser
    from onmt.bin.train import train as train_fn

    opt, _ = _get_parser().parse_known_args(["-config", str(config), *args])
    with one_thread():
        train_fn(opt)


def translate(model: Path, src: Path, output: Path, *args: str) -> list[str]:
    """``onmt_translate -model MODEL -src SRC -output OUTPUT ARGS``; returns the output lines."""
    from onmt.bin.translate import _get_parser
    from onmt.bin.translate import translate as translate_fn

    opt = _get_parser().parse_args(["-model", str(model), "-src", str(src), "-output", str(output), *args])
    with one_thread():
        translate_fn(opt)
    return output.read_text().splitlines()


def exact_match(pred: list[str], ref: Path) -> float:
    gold = ref.read_text().splitlines()
    return sum(p.strip() == g.strip() for p, g in zip(pred, gold)) / len(gold)
