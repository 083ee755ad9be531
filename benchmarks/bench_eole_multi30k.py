"""Eole on Multi30k DE->EN: softmax against 1.5-entmax (output + all attention) and learned alpha, stock
``eole build_vocab`` / ``eole train`` / ``eole predict`` with this package active.

The same models as the OpenNMT-py rows of docs/results.md (configs/multi30k-transformer/de-en/: 3+3
layers, d 512, 8 heads, dropout 0.3, 4096-token batches, noam lr 2 with 2000 warm-up steps, no label
smoothing, joint BPE of 8,000 merges; 3,000 steps ~ 32 epochs), written as Eole configs. Each variant
trains alone on the GPU (one after the other), so the training speed is each run's own: target
tokens/s that Eole reports, averaged over the report windows after the first (warm-up), and its ratio
to softmax. Then ``eole predict`` decodes test_2016_flickr (beam 5; its wall time, model load
included, and the ratio to softmax) and SacreBLEU scores it (BPE removed, Moses-detokenized, against
the raw references), as ``scripts/reproduce/reproduce.py evaluate`` scores the OpenNMT-py models.

    # once, on the CPU VM (../shared/data/multi30k -> work/data/multi30k; carry it to the GPU machine):
    python3 scripts/reproduce/reproduce.py data multi30k-transformer --only 'de-en/*'
    # on the GPU machine (docs/eole.md lists the wheels it needs):
    python3 benchmarks/bench_eole_multi30k.py --data work/data/multi30k --gpu --out runs/eole-multi30k
    # CPU smoke run (the bundled SIGMORPHON sample, a tiny model), to check the script itself:
    python3 benchmarks/bench_eole_multi30k.py --tiny --out /tmp/eole-bench --steps 4

Prints one markdown table (and writes it with every number to OUT/results.json).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = {  # name -> the model options of configs/multi30k-transformer/de-en/<name>.yaml
    "softmax": {},
    "entmax15": {"generator_function": "entmax15", "attention_function": "entmax15"},
    "entmax_learned": {"generator_function": "entmax15", "attention_function": "entmax_bisect",
                       "attention_alpha": 1.5, "learn_alpha": True},
}
LABELS = {"softmax": "softmax", "entmax15": "1.5-entmax output + all attention",
          "entmax_learned": "learned alpha attention, 1.5-entmax output"}
STEP_LINE = re.compile(r"Step\s+(\d+)/\s*\d+;.*?(\d+)/\s*(\d+) tok/s")


def model_section(tiny: bool, options: dict) -> dict:
    size = dict(layers=1, heads=2, hidden_size=32, word_vec_size=32, transformer_ff=64) if tiny else \
        dict(layers=3, heads=8, hidden_size=512, word_vec_size=512, transformer_ff=2048)
    return {"architecture": "transformer", **size, "embeddings": {"position_encoding_type": "SinusoidalInterleaved"},
            **options}


def training_section(model_path: Path, steps: int, gpu: bool, tiny: bool) -> dict:
    batch = dict(batch_type="sents", batch_size=16, valid_batch_size=16) if tiny else \
        dict(batch_type="tokens", batch_size=4096, valid_batch_size=2048, normalization="tokens")
    return {"model_path": str(model_path), "train_steps": steps, "valid_steps": steps, "save_checkpoint_steps": steps,
            **batch, "bucket_size": 20000, "num_workers": 0, "optim": "adam", "adam_beta1": 0.9,
            "adam_beta2": 0.998, "decay_method": "noam", "learning_rate": 2.0, "warmup_steps": 2000,
            "max_grad_norm": 0.0, "param_init_method": "xavier_uniform", "label_smoothing": 0.0,
            "dropout": [0.3], "attention_dropout": [0.1], "accum_count": [1],
            **({"gpu_ranks": [0], "world_size": 1} if gpu else {})}


def data_files(args) -> dict:
    if args.tiny:
        d = ROOT / "data" / "sigmorphon2018-sample"
        return {"train": (d / "src-train.txt", d / "tgt-train.txt"), "dev": (d / "src-dev.txt", d / "tgt-dev.txt"),
                "test": d / "src-test.txt", "ref": d / "tgt-test.txt", "bpe": False}
    d = Path(args.data).resolve()  # eole runs in each variant's folder: paths must not be relative
    if not (d / "train.bpe.de").exists():
        raise SystemExit(f"bench_eole_multi30k: --data {args.data}: no train.bpe.de (prepare it with "
                         "`reproduce.py data multi30k-transformer --only 'de-en/*'`)")
    return {"train": (d / "train.bpe.de", d / "train.bpe.en"), "dev": (d / "dev.bpe.de", d / "dev.bpe.en"),
            "test": d / "test.bpe.de", "ref": d / "test.raw.en", "bpe": True}


def eole(*args, cwd: Path, log: Path) -> float:
    """``eole ARGS`` (this interpreter's console script), its output to ``log``; wall seconds."""
    script = Path(sys.executable).parent / "eole"
    cmd = ([str(script)] if script.exists() else [sys.executable, "-m", "eole.bin.main"]) + [str(a) for a in args]
    start = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}); see {log}")
    return seconds


def train_speed(log: Path) -> float:
    """Mean target tokens/s over the report windows after the first (CUDA context, compilation)."""
    speeds = [float(m.group(3)) for m in STEP_LINE.finditer(log.read_text())]
    if not speeds:
        sys.exit(f"no training speed in {log}")
    return statistics.mean(speeds[1:] or speeds)


def bleu_of(pred: Path, files: dict) -> float:
    from onmt_entmax.evaluation import bleu

    hyps = pred.read_text(encoding="utf-8").splitlines()
    refs = Path(files["ref"]).read_text(encoding="utf-8").splitlines()[: len(hyps)]
    if files["bpe"]:
        hyps = bleu.moses_detokenize([bleu.remove_bpe(h) for h in hyps], "en")
    return bleu.sacrebleu_score(hyps, refs, "en")[0]


def run(args) -> list[dict]:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    files = data_files(args)
    base = {"save_data": str(out / "data"), "src_vocab": str(out / "vocab.src"), "tgt_vocab": str(out / "vocab.tgt"),
            "src_vocab_size": 100000, "tgt_vocab_size": 100000, "overwrite": True, "seed": 1,
            "report_every": args.report_every,
            "data": {"corpus_1": {"path_src": str(files["train"][0]), "path_tgt": str(files["train"][1])},
                     "valid": {"path_src": str(files["dev"][0]), "path_tgt": str(files["dev"][1])}}}
    test = out / "test.src"
    test.write_text("".join(Path(files["test"]).read_text(encoding="utf-8").splitlines(keepends=True)[: args.lines]))
    rows = []
    for name in args.variants:
        run_dir = out / name
        run_dir.mkdir(exist_ok=True)
        cfg = {**base, "model": model_section(args.tiny, VARIANTS[name]),
               "training": training_section(run_dir / "model", args.steps, args.gpu, args.tiny)}
        config = run_dir / "config.yaml"
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        if not (out / "vocab.tgt").exists():
            eole("build_vocab", "-c", config, "-n_sample", "-1", cwd=out, log=out / "build_vocab.log")
        train_seconds = eole("train", "-c", config, cwd=run_dir, log=run_dir / "train.log")
        pred = run_dir / "test.pred"
        gpu = ["-gpu_ranks", "0"] if args.gpu else []
        decode_seconds = eole("predict", "-model_path", run_dir / "model", "-src", test, "-output", pred,
                              "-beam_size", "5", "-batch_size", str(args.batch), "-max_length", "250",
                              "-report_time", *gpu, cwd=run_dir, log=run_dir / "predict.log")
        rows.append({"variant": name, "train_tok_s": train_speed(run_dir / "train.log"),
                     "train_seconds": train_seconds, "decode_seconds": decode_seconds,
                     "sacrebleu": bleu_of(pred, files), "steps": args.steps, "test_lines": args.lines})
        # after each variant, so that a run cut short (a lent machine's time limit) keeps what it measured
        (out / "results.json").write_text(json.dumps({"rows": rows}, indent=1))
    return rows


def table(rows: list[dict]) -> str:
    ref = next((r for r in rows if r["variant"] == "softmax"), rows[0])
    lines = ["| variant | SacreBLEU | training tgt tok/s | vs softmax | test decoding, s | vs softmax |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {LABELS[r['variant']]} | {r['sacrebleu']:.2f} | {r['train_tok_s']:.0f} | "
                     f"{r['train_tok_s'] / ref['train_tok_s']:.2f}x | {r['decode_seconds']:.1f} | "
                     f"{ref['decode_seconds'] / r['decode_seconds']:.2f}x |")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="work/data/multi30k", help="prepared Multi30k folder (reproduce.py data)")
    p.add_argument("--out", default="runs/eole-multi30k")
    p.add_argument("--gpu", action="store_true", help="train and decode on GPU 0")
    p.add_argument("--tiny", action="store_true", help="CPU smoke run on the bundled SIGMORPHON sample")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--report-every", type=int, default=100)
    p.add_argument("--lines", type=int, default=1000, help="test lines decoded (test_2016_flickr has 1,000)")
    p.add_argument("--batch", type=int, default=64, help="eole predict -batch_size")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = p.parse_args(argv)
    if args.tiny:
        args.report_every = max(1, min(args.report_every, args.steps // 2))
        args.lines = min(args.lines, 8)
    rows = run(args)
    text = table(rows)
    print(text)
    (Path(args.out) / "results.json").write_text(json.dumps({"rows": rows, "table": text}, indent=1))


if __name__ == "__main__":
    main()
