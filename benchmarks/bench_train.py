"""OpenNMT-py Transformer training speed: sparse variants as a ratio to softmax, same config otherwise.

Runs the stock `onmt_build_vocab` (once) and `onmt_train` (with this plugin active) once per variant on the
same data and reads the target tokens/s that OpenNMT-py reports, averaged over the report windows
after the first (warm-up: CUDA context, Triton compilation, allocator). This is a benchmark, not a
test. With --rounds N the variants are trained in turn N times (softmax, A, B, ..., softmax, A, ...)
and each is reported by its median run and by the median of its per-round ratios to softmax (runs
close in time compared): a 3-layer model on 4096-token batches is bound by the host (OpenNMT-py
batches in the training process), and a single run moves by 10-25% with the load of a shared
machine.

    # GPU, 32k synthetic target vocabulary and Multi30k (copy ../shared/data/multi30k into an
    # ignored folder first when the data has to travel to another machine):
    python benchmarks/bench_train.py --gpu --data synthetic --vocab 32000 --steps 300
    python benchmarks/bench_train.py --gpu --data multi30k --multi30k-dir ../shared/data/multi30k
    python benchmarks/bench_train.py --gpu --data multi30k --steps 150 --report-every 30 --rounds 3
    # the same variants built in this process, timed on the same batches in turn (less noise):
    python benchmarks/bench_train.py --gpu --data multi30k --in-process --steps 20 --rounds 12
    # CPU smoke run (tiny model), to check the script itself:
    python benchmarks/bench_train.py --tiny --steps 20
    # documents of 4,096 tokens (issue 62 item 5): a synthetic copy whose target holds the source's
    # sentences in reverse order (attention reaches across the document), or Multi30k captions
    # concatenated into documents; softmax (SDPA on a GPU) against 1.5-entmax and learned-alpha attention
    python benchmarks/bench_train.py --gpu --data long-copy --length 4096 --in-process --steps 10 --rounds 8
    python benchmarks/bench_train.py --gpu --data multi30k-docs --length 4096 --multi30k-dir ../shared/data/multi30k
    # a kernel change: every short-row kernel call of training against the float64 reference
    python benchmarks/bench_train.py --gpu --data multi30k --steps 100 --check-kernels runs/check
"""
from __future__ import annotations

import argparse
import gc
import gzip
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import result_rows  # (benchmarks/ is on sys.path when run as a script)
from paired_rounds import describe, median_interval

VARIANTS = {
    "softmax": {},
    "entmax15 (output + all attention)": {"generator_function": "entmax15", "attention_function": "entmax15"},
    "entmax15 (all attention)": {"attention_function": "entmax15"},
    "learned alpha (all attention)": {"attention_function": "entmax_bisect", "attention_alpha": 1.5,
                                      "learn_alpha": True},
    "1.5-ReLU output": {"generator_function": "alpha_relu", "generator_alpha": 1.5, "generator_tau": "auto"},
}

# the variants run unless --variants names others: sentence data keeps its four; on documents the attention
# is what is measured, so the output stays softmax
SENTENCE_VARIANTS = ["softmax", "entmax15 (output + all attention)", "learned alpha (all attention)",
                     "1.5-ReLU output"]
DOCUMENT_VARIANTS = ["softmax", "entmax15 (all attention)", "learned alpha (all attention)"]
DOCUMENTS = ("long-copy", "multi30k-docs")

STEP_LINE = re.compile(r"Step\s+(\d+)/\s*\d+;.*?(\d+)/\s*(\d+) tok/s")


def synthetic_corpus(folder: Path, vocab: int, sentences: int, seed: int = 0) -> tuple[Path, Path]:
    """Random token sequences over `vocab` types (a Zipf-like draw, so frequent types exist)."""
    rng = random.Random(seed)
    weights = [1.0 / (r + 10) for r in range(vocab)]
    src, tgt = folder / "train.src", folder / "train.tgt"
    with src.open("w") as fs, tgt.open("w") as ft:
        for _ in range(sentences):
            n = rng.randint(10, 40)
            words = rng.choices(range(vocab), weights, k=n)
            fs.write(" ".join(f"s{w}" for w in words) + "\n")
            ft.write(" ".join(f"t{w}" for w in reversed(words)) + "\n")
    return src, tgt


def long_copy_corpus(folder: Path, vocab: int, documents: int, length: int, seed: int = 0) -> tuple[Path, Path]:
    """Documents of exactly `length` source tokens: sentences of 10-40 Zipf-drawn types, each ended by
    `s.` (the last one cut to fit); the target holds the same sentences (types `t*`, end `t.`) in reverse
    order, so its first words attend to the end of the source and its last to the start."""
    rng = random.Random(seed)
    weights = [1.0 / (r + 10) for r in range(vocab)]
    src, tgt = folder / "train.src", folder / "train.tgt"
    with src.open("w") as fs, tgt.open("w") as ft:
        for _ in range(documents):
            sentences, n = [], 0
            while n < length:
                k = min(rng.randint(10, 40), length - n)
                sentences.append([f"s{w}" for w in rng.choices(range(vocab), weights, k=k - 1)] + ["s."])
                n += k
            fs.write(" ".join(w for s in sentences for w in s) + "\n")
            ft.write(" ".join("t" + w[1:] for s in reversed(sentences) for w in s) + "\n")
    return src, tgt


def multi30k_corpus(folder: Path, source_dir: Path, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """Multi30k train, lowercased and split on whitespace (speed, not BLEU, is measured here)."""
    out = []
    for lang in (src_lang, tgt_lang):
        dest = folder / f"train.{lang}"
        with gzip.open(source_dir / f"train.{lang}.gz", "rt", encoding="utf-8") as f, dest.open("w") as g:
            for line in f:  # str.split: any Unicode space (a token that is one breaks the vocab file)
                g.write(" ".join(line.lower().split()) + "\n")
        out.append(dest)
    return out[0], out[1]


def multi30k_documents(folder: Path, source_dir: Path, src_lang: str, tgt_lang: str,
                       length: int) -> tuple[Path, Path]:
    """Multi30k train as documents: consecutive caption pairs (lowercased, split on whitespace) joined
    while neither side passes `length` tokens; the target document translates the source document
    caption by caption. The last, shorter document is dropped (every document ~`length` tokens)."""
    pairs = []
    for lang in (src_lang, tgt_lang):
        with gzip.open(source_dir / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            pairs.append([line.lower().split() for line in f])
    src, tgt = folder / f"train.{src_lang}", folder / f"train.{tgt_lang}"
    with src.open("w") as fs, tgt.open("w") as ft:
        doc_s, doc_t = [], []
        for s, t in zip(*pairs):
            if not s or not t or len(s) > length or len(t) > length:  # (no empty line, no document too long)
                continue
            if len(doc_s) + len(s) > length or len(doc_t) + len(t) > length:
                fs.write(" ".join(doc_s) + "\n")
                ft.write(" ".join(doc_t) + "\n")
                doc_s, doc_t = [], []
            doc_s += s
            doc_t += t
    return src, tgt


def position_rows() -> int:
    """Rows of OpenNMT-py's sinusoidal position table (`position_encoding: true`): the default of
    PositionalEncoding's max_len, which no option changes."""
    import inspect

    from onmt.modules.embeddings import PositionalEncoding
    return inspect.signature(PositionalEncoding.__init__).parameters["max_len"].default


def data_label(args: argparse.Namespace) -> str:
    """The data column of the tables and CSV rows."""
    if args.data == "multi30k":
        return "multi30k"
    if args.data == "multi30k-docs":
        return f"multi30k documents of {args.length} tokens"
    if args.data == "long-copy":
        return f"long copy {args.length} tokens, synthetic {args.vocab // 1000}k"
    return f"synthetic {args.vocab // 1000}k"


DOCUMENT_BUCKET = 64  # documents a bucket (two a batch)


def bucket_size(args: argparse.Namespace) -> int:
    """Examples the trainer reads into a bucket before its first batch: 20000 sentences, or DOCUMENT_BUCKET
    documents (a bucket of 20000 documents of 4,096 tokens is 82M tokens: over 11 GB of host memory and
    minutes of tokenizing before the first step)."""
    return DOCUMENT_BUCKET if args.data in DOCUMENTS else 20000


def write_config(path: Path, src: Path, tgt: Path, work: Path, args: argparse.Namespace, extra: dict) -> None:
    size = {"layers": 1, "hidden": 64, "ff": 128, "heads": 4} if args.tiny else \
        {"layers": args.layers, "hidden": 512, "ff": 2048, "heads": 8}
    lines = [
        f"save_data: {work}/data", f"src_vocab: {work}/vocab.src", f"tgt_vocab: {work}/vocab.tgt",
        f"src_vocab_size: {args.vocab + 100}", f"tgt_vocab_size: {args.vocab + 100}",
        "overwrite: true",
        "data:", "  corpus_1:", f"    path_src: {src}", f"    path_tgt: {tgt}",
        f"save_model: {work}/model", "save_checkpoint_steps: 1000000",
        f"train_steps: {args.steps}", "valid_steps: 1000000", f"report_every: {args.report_every}",
        "batch_type: tokens", f"batch_size: {args.batch_tokens}", f"bucket_size: {bucket_size(args)}",
        "encoder_type: transformer", "decoder_type: transformer", "position_encoding: true",
        *([] if args.data not in DOCUMENTS else [  # every document passes; a longer line is dropped, not a traceback
            "transforms: [filtertoolong]", f"src_seq_length: {args.length}", f"tgt_seq_length: {args.length + 2}"]),
        f"enc_layers: {size['layers']}", f"dec_layers: {size['layers']}", f"heads: {size['heads']}",
        f"hidden_size: {size['hidden']}", f"word_vec_size: {size['hidden']}", f"transformer_ff: {size['ff']}",
        "dropout: [0.1]", "attention_dropout: [0.1]",
        "optim: adam", "adam_beta2: 0.998", "learning_rate: 2", "decay_method: noam", "warmup_steps: 4000",
        "param_init: 0", "param_init_glorot: true", "seed: 1234", "num_workers: 0",
    ]
    if args.gpu:
        lines += ["world_size: 1", "gpu_ranks: [0]", f"model_dtype: {args.dtype}"]
    for key, value in extra.items():
        lines.append(f"{key}: {json.dumps(value) if isinstance(value, bool) else value}")
    path.write_text("\n".join(lines) + "\n")


def run(cmd: list[str], log: Path) -> str:
    t0 = time.time()
    with log.open("w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)
    text = log.read_text()
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}) after {time.time() - t0:.0f}s:\n{text[-3000:]}")
    return text


def train_command(cfg: Path, check_dir: Path | None) -> list[str]:
    """onmt_train, or (check_dir) the same entry point with the kernel watch installed first."""
    if check_dir is None:
        return ["onmt_train", "-config", str(cfg)]
    code = ("import onmt_entmax.onmt as o; o.activate(); from onmt_entmax.ops.triton import check; "
            f"check.watch({str(check_dir.resolve())!r}); from onmt.bin.train import main; main()")
    return [sys.executable, "-c", code, "-config", str(cfg)]


def tokens_per_second(log: str) -> tuple[float, int]:
    """Mean target tok/s over the report windows after the first one, and how many were used."""
    rates = [float(m.group(3)) for m in STEP_LINE.finditer(log)]
    if len(rates) < 2:
        sys.exit(f"fewer than two report lines in the training log:\n{log[-2000:]}")
    return statistics.mean(rates[1:]), len(rates) - 1


def in_process_trainers(cfgs: dict[str, Path], n_batches: int, device_id: int) -> dict[str, tuple]:
    """{variant: (trainer, batches)}: each variant's model, optimizer and loss built as onmt_train
    builds them (this plugin active), and its first n_batches training batches, already on the GPU
    (the same batches for every variant: same data, seed and batching)."""
    import onmt_entmax.onmt as plugin
    plugin.activate()
    from onmt.bin.train import _get_parser
    from onmt.constants import CorpusTask
    from onmt.inputters.dynamic_iterator import build_dynamic_dataset_iter
    from onmt.model_builder import build_model
    from onmt.train_single import _get_model_opts, _init_train, configure_process
    from onmt.trainer import build_trainer
    from onmt.utils.optimizers import Optimizer
    from onmt.utils.parse import ArgumentParser

    out = {}
    for name, cfg in cfgs.items():
        opt = _get_parser().parse_args(["-config", str(cfg)])
        ArgumentParser.validate_train_opts(opt)
        ArgumentParser.update_model_opts(opt)
        ArgumentParser.validate_model_opts(opt)
        configure_process(opt, device_id)  # (seeds: every variant starts from the same state)
        _, vocabs, transforms_cls = _init_train(opt)
        model = build_model(_get_model_opts(opt), opt, vocabs, None, device_id)
        trainer = build_trainer(opt, device_id, model, vocabs, Optimizer.from_opt(model, opt), model_saver=None)
        it = build_dynamic_dataset_iter(opt, transforms_cls, vocabs, task=CorpusTask.TRAIN, copy=False,
                                        device_id=device_id)
        batches = []
        for accum in trainer._accum_batches(it):
            batches.append(accum)
            if len(batches) == n_batches:
                break
        out[name] = (trainer, batches)
    return out


def in_process_rounds(trainers: dict[str, tuple], rounds: int, steps: int) -> dict[str, list[float]]:
    """Target tokens/s of `steps` training steps (forward, loss, backward, optimizer: OpenNMT-py's
    `Trainer._gradient_accumulation`) per variant and round, the variants in turn in every round:
    batching excluded (the same for every variant), host drift shared by the variants of a round."""
    import onmt.utils
    import torch

    def run(trainer, batches, n):
        stats = onmt.utils.Statistics()
        for i in range(n):
            accum, norm = batches[i % len(batches)]
            trainer._gradient_accumulation(accum, norm, stats, onmt.utils.Statistics())
        return stats.n_words

    for trainer, batches in trainers.values():  # warm-up: Triton compilation, allocator, cuBLAS plans
        run(trainer, batches, len(batches))
    rates = {name: [] for name in trainers}
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for r in range(rounds):
        for name, (trainer, batches) in trainers.items():
            gc.collect()  # untimed: a full collection (~0.2 s on the H100 hosts) would land in some variant's window
            sync()
            t0 = time.perf_counter()
            words = run(trainer, batches, steps)
            sync()
            rates[name].append(words / (time.perf_counter() - t0))
    return rates


def training_row(args: argparse.Namespace, name: str, rate: float, base: float | None, windows: int,
                 runs: list, paired: list, check: str = "") -> dict:
    """One variant's row of benchmarks/results/training.csv (the printed table's cells; check: what the
    kernel check found)."""
    mid, (lo, hi) = median_interval(paired) if paired else (None, (None, None))
    mode = "in one process" if args.in_process else "onmt_train, kernels checked" if check else "onmt_train"
    model = f"{'tiny' if args.tiny else f'{args.layers}-layer'} Transformer, {args.dtype if args.gpu else 'fp32'}"
    return {"case": name, "ours": f"{rate:.0f}", "baseline": f"{base:.0f}" if base else "",
            "ratio": f"{rate / base:.2f}" if base else "",
            "data": data_label(args), "mode": mode,
            "setup": f"{args.steps} steps, batch {args.batch_tokens} tokens, {model}"
                     + (f", median of {args.rounds} rounds" if args.rounds > 1 else ""),
            "median_ratio": f"{mid:.2f}" if mid is not None else "",
            "median_low": f"{lo:.2f}" if lo is not None else "", "median_high": f"{hi:.2f}" if hi is not None else "",
            "rounds": str(args.rounds) if args.in_process else "", "windows": "" if args.in_process else str(windows),
            "steps": str(args.steps), "check": check, "runs": " ".join(f"{x:.0f}" for x, _ in runs),
            "round_ratios": " ".join(f"{r:.2f}" for r in paired)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=["synthetic", "multi30k", *DOCUMENTS], default="synthetic")
    ap.add_argument("--length", type=int, default=4096,
                    help="tokens a document (long-copy: exactly; multi30k-docs: at most, captions kept whole)")
    ap.add_argument("--multi30k-dir", type=Path, default=Path("../shared/data/multi30k"))
    ap.add_argument("--langs", nargs=2, default=["de", "en"])
    ap.add_argument("--vocab", type=int, default=32000, help="synthetic vocabulary size (and vocab cap)")
    ap.add_argument("--sentences", type=int, default=None,
                    help="synthetic sentences (default 60000), or long-copy documents (default 256)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=1, help="train every variant this many times, in turn")
    ap.add_argument("--report-every", type=int, default=50)
    ap.add_argument("--batch-tokens", type=int, default=None,
                    help="tokens a batch (default 4096; on documents two documents, 2 x (--length + 2))")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dtype", default="fp32", help="model_dtype on GPU (fp32 or fp16)")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="a tiny model and corpus (CPU check of the script)")
    ap.add_argument("--variants", nargs="+", default=None, choices=list(VARIANTS), metavar="VARIANT",
                    help=f"default: {', '.join(SENTENCE_VARIANTS)}; on documents {', '.join(DOCUMENT_VARIANTS)}")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--csv", type=Path, default=None, metavar="DIR",
                    help="append the table's rows to DIR/training.csv (benchmarks/results)")
    ap.add_argument("--in-process", action="store_true",
                    help="time training steps in this process instead of onmt_train runs: every variant "
                         "built as onmt_train builds it, --rounds rounds of --steps steps each, the variants "
                         "in turn within a round (batching excluded)")
    ap.add_argument("--in-process-batches", type=int, default=40, help="distinct batches cycled through")
    ap.add_argument("--check-kernels", type=Path, default=None, metavar="DIR",
                    help="compare every short-row kernel call of onmt_train with the float64 reference "
                         "(onmt_entmax.ops.triton.check), wrong programs saved to DIR, exit status 1 if "
                         "any; tokens/s are then not a measurement")
    args = ap.parse_args()
    documents = args.data in DOCUMENTS
    args.variants = args.variants or (DOCUMENT_VARIANTS if documents else SENTENCE_VARIANTS)
    args.sentences = args.sentences or (256 if documents else 60000)
    if args.tiny:
        args.vocab, args.sentences = min(args.vocab, 500), min(args.sentences, 400)
        args.report_every = min(args.report_every, 5)
    args.batch_tokens = args.batch_tokens or (2 * (args.length + 2) if documents else 512 if args.tiny else 4096)
    if documents:
        rows = position_rows()  # a target document with its <s> and </s> takes --length + 2 positions
        if args.length < 1 or args.length + 2 > rows:
            sys.exit(f"--length {args.length}: a target document with its <s> and </s> takes --length + 2 positions "
                     f"and OpenNMT-py's sinusoidal position table has {rows} (no option changes it); give --length "
                     f"1 to {rows - 2}")
        if args.batch_tokens < args.length + 2:
            sys.exit(f"--batch-tokens {args.batch_tokens}: a batch must hold one document of --length {args.length} "
                     f"tokens and its <s> and </s>; give --batch-tokens {args.length + 2} or more")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_train_"))
    work.mkdir(parents=True, exist_ok=True)
    if args.data == "synthetic":
        src, tgt = synthetic_corpus(work, args.vocab, args.sentences)
    elif args.data == "long-copy":
        src, tgt = long_copy_corpus(work, args.vocab, args.sentences, args.length)
    elif args.data == "multi30k-docs":
        src, tgt = multi30k_documents(work, args.multi30k_dir, *args.langs, args.length)
    else:
        src, tgt = multi30k_corpus(work, args.multi30k_dir, *args.langs)
    device = "cpu"
    if args.gpu:
        import torch
        device = torch.cuda.get_device_name()
    runs, wrong, checked, cfgs = {name: [] for name in args.variants}, {}, {}, {}
    for name in args.variants:
        vdir = work / re.sub(r"\W+", "_", name)
        vdir.mkdir(exist_ok=True)
        cfgs[name] = vdir / "config.yaml"
        write_config(cfgs[name], src, tgt, vdir, args, VARIANTS[name])
        if name == args.variants[0]:
            run(["onmt_build_vocab", "-config", str(cfgs[name]), "-n_sample", "-1"], vdir / "vocab.log")
            first = vdir
        else:  # the vocabularies depend on the data alone: built once, the same files for every variant
            for side in ("src", "tgt"):
                shutil.copyfile(first / f"vocab.{side}", vdir / f"vocab.{side}")
    if args.in_process:
        trainers = in_process_trainers(cfgs, args.in_process_batches, 0 if args.gpu else -1)
        for name, rates in in_process_rounds(trainers, args.rounds, args.steps).items():
            runs[name] = [(rate, args.steps) for rate in rates]
    for r in range(0 if args.in_process else args.rounds):
        for name, cfg in cfgs.items():
            log = run(train_command(cfg, args.check_kernels), cfg.parent / f"train{r}.log")
            runs[name].append(tokens_per_second(log))
            if args.check_kernels:
                from onmt_entmax.ops.triton.check import WRONG
                wrong[name] = wrong.get(name, 0) + log.count(WRONG)
                done = re.findall(r"\[kernel check\] (\d+) calls checked", log)
                checked[name] = checked.get(name, 0) + sum(map(int, done))
    results = {name: (statistics.median(rate for rate, _ in rs), rs[0][1]) for name, rs in runs.items()}
    base = results.get("softmax", (None, 0))[0]
    what = "training steps in one process (batching excluded)" if args.in_process else "onmt_train"
    print(f"\n{what} tokens/s ({data_label(args)}, {device}, {args.steps} steps, batch {args.batch_tokens} tokens, "
          f"{'tiny' if args.tiny else f'{args.layers}-layer'} Transformer, {args.dtype if args.gpu else 'fp32'}"
          f"{f', median of {args.rounds} rounds' if args.rounds > 1 else ''})")
    print(f"| variant | target tok/s | vs softmax | median of round ratios (95% interval) | "
          f"{'steps' if args.in_process else 'windows'} "
          "| runs (tok/s, vs softmax of the round) |")
    print("|---|---|---|---|---|---|")
    rows = []
    for name, (rate, windows) in results.items():
        ratio = f"{rate / base:.2f}x" if base else "n/a"
        # paired: each run against the softmax run of its round (the machine's load drifts between rounds)
        paired = [x / s for (x, _), (s, _) in zip(runs[name], runs["softmax"])] if "softmax" in runs else []
        each = ", ".join(f"{x:.0f} ({r:.2f}x)" for (x, _), r in zip(runs[name], paired)) \
            if paired else ", ".join(f"{x:.0f}" for x, _ in runs[name])
        rounds = describe(paired)
        print(f"| {name} | {rate:.0f} | {ratio} | {rounds} | {windows} | {each} |")
        check = "" if not args.check_kernels else \
            f"{checked.get(name, 0)} short-row kernel calls agreed with the float64 reference" if not wrong.get(name) \
            else f"{wrong[name]} of {checked.get(name, 0)} short-row kernel calls gave wrong rows"
        rows.append(training_row(args, name, rate, base, windows, runs[name], paired, check))
    if args.csv:
        result_rows.append(args.csv, "training", rows, gpu=args.gpu)
    if args.check_kernels:
        print(f"\nkernel check (tokens/s above include the reference computations): calls checked per variant "
              f"{checked}, calls with wrong rows {wrong}; wrong programs in {args.check_kernels}")
        if any(wrong.values()):
            sys.exit("kernel check failed: a kernel returned wrong rows during training")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "data": args.data, "results": results, "runs": runs},
                                        indent=1))


if __name__ == "__main__":
    main()
