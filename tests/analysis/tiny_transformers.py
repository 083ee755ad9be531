"""Two tiny Transformers trained once per test session with the real ``onmt_train`` (plugin
activated by its import hook in the subprocess), on a synthetic "reverse and rename" task with a
304-word target vocabulary:

- ``learned``: alpha-entmax attention with one learned alpha per head and layer, alpha-ReLU output
  (alpha 1.5, ``generator_tau: auto``), 20 steps, report every 5 (-> ``learned_alphas.csv``);
- ``dense``: softmax attention, 1.5-entmax output, 10 steps.

2 layers, 4 heads, d_model 32, Glorot init (the setting of Tezekbayev et al.'s Lemma 3).
"""
from __future__ import annotations

import atexit
import functools
import os
import random
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
D_MODEL, HEADS, LAYERS, WORDS = 32, 4, 2, 300
SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]
DRIVER = f"""
import sys
sys.path.insert(0, {REPO!r})
from onmt_entmax.autoload import install_hook
install_hook()
import importlib
module = sys.argv[1]
sys.argv = [module] + sys.argv[2:]
importlib.import_module(module).main()
"""
CONFIG = """
src_vocab: vocab.src
tgt_vocab: vocab.tgt
src_words_min_frequency: 0
tgt_words_min_frequency: 0
overwrite: true
data:
  corpus_1: {{path_src: src-train.txt, path_tgt: tgt-train.txt}}
save_model: run/{name}
save_checkpoint_steps: {steps}
train_steps: {steps}
batch_size: 32
batch_type: sents
bucket_size: 1024
num_workers: 0
encoder_type: transformer
decoder_type: transformer
position_encoding: true
enc_layers: {layers}
dec_layers: {layers}
heads: {heads}
hidden_size: {d}
word_vec_size: {d}
transformer_ff: 64
dropout: [0.0]
attention_dropout: [0.0]
param_init: 0.0
param_init_glorot: true
optim: adam
learning_rate: 0.01
report_every: 5
seed: 1
"""
LEARNED = """attention_function: entmax_bisect
attention_alpha: 1.5
learn_alpha: true
generator_function: alpha_relu
generator_alpha: 1.5
generator_tau: auto
"""
DENSE = "generator_function: entmax15\n"


def _write_data(d: str) -> None:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(WORDS)]
    for name, n in (("train", 640), ("test", 24)):
        src = [[rng.choice(words) for _ in range(rng.randint(3, 8))] for _ in range(n)]
        with open(os.path.join(d, f"src-{name}.txt"), "w") as f:
            f.writelines(" ".join(s) + "\n" for s in src)
        with open(os.path.join(d, f"tgt-{name}.txt"), "w") as f:
            f.writelines(" ".join("v" + w[1:] for w in reversed(s)) + "\n" for s in src)
    # every word in the vocabulary (counts are irrelevant), so V = 300 + 4 specials exactly
    for side, prefix in (("src", "w"), ("tgt", "v")):
        with open(os.path.join(d, f"vocab.{side}"), "w") as f:
            f.writelines(f"{prefix}{i}\t1\n" for i in range(WORDS))


def start_module(workdir: str, module: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    env.pop("ONMT_ENTMAX_DISABLE", None)
    return subprocess.Popen([sys.executable, "driver.py", module, *args], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, what: str) -> str:
    """stderr of a finished subprocess; AssertionError with its tail if it failed."""
    _, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"{what} failed:\n{err[-3000:]}")
    return err


@functools.lru_cache(maxsize=None)
def trained() -> dict:
    """Paths of the session's tiny models and data (trained on first use, removed at exit)."""
    d = tempfile.mkdtemp(prefix="onmt_entmax_tiny_")
    atexit.register(shutil.rmtree, d, True)
    _write_data(d)
    with open(os.path.join(d, "driver.py"), "w") as f:
        f.write(DRIVER)
    procs = {}
    for name, extra, steps in (("learned", LEARNED, 20), ("dense", DENSE, 10)):
        with open(os.path.join(d, f"{name}.yaml"), "w") as f:
            f.write(CONFIG.format(name=name, steps=steps, layers=LAYERS, heads=HEADS, d=D_MODEL) + extra)
        procs[name] = start_module(d, "onmt.bin.train", "-config", f"{name}.yaml")  # both at once: 2 cores
    logs = {name: finish(p, f"onmt_train {name}") for name, p in procs.items()}
    return {
        "dir": d, "learned": os.path.join(d, "run", "learned_step_20.pt"),
        "dense": os.path.join(d, "run", "dense_step_10.pt"), "csv": os.path.join(d, "run", "learned_alphas.csv"),
        "src": os.path.join(d, "src-test.txt"), "tgt": os.path.join(d, "tgt-test.txt"), "logs": logs,
        "vocab": WORDS + len(SPECIALS),
    }
