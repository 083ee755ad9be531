"""Eole on documents of --length tokens (issue 62 item 5): softmax (SDPA on a GPU) against 1.5-entmax and
learned-alpha attention, stock ``eole build_vocab`` / ``eole train`` / ``eole predict`` with this package active.

The documents are bench_train.py's (``--data long-copy``: exactly L source tokens, the target the source's
sentences in reverse order; ``--data multi30k-docs``: Multi30k caption pairs joined into documents of at
most L tokens a side), written by its functions; the model is bench_eole_multi30k.py's (3+3 layers, d 512,
8 heads) with a softmax output, so the attention is what differs. What in Eole 0.6.4 could drop, cut or
stop a document: ``filtertoolong`` (192 tokens a side by default) filters only where a config lists it,
and only after a tokenizer transform (it asserts token lists), so these configs list no transform: every
document passes whole (the writers bound them at L; Eole truncates nothing in training); token batches of
two documents (``--batch-tokens``, default 2 x (L + 2), at least one document with its <s> and </s>); the
sinusoidal position table (5,000 rows, no option: L + 2 must fit); ``eole predict``'s ``max_length``
(default 250, and at most twice the source + 5: given as L).

Each variant trains alone (``--rounds N``: the variants in turn N times, each reported by its median run
and by the median of its per-round ratios to softmax): target tokens/s that Eole reports, averaged over the
report windows after the first (warm-up), and the ratio to softmax. Every window's target tokens a
document (report_every x the ``bsz`` target tokens a batch / the window's ``sents``, </s> included) must
lie within the corpus's shortest and longest document + 1 (on long-copy: exactly L + 1; half a token of
margin for Eole's rounding), else the run stops: a filtered or cut document shows there.
Then ``eole predict`` decodes one whole document with each ``--decode`` model (default 1.5-entmax; greedy,
exactly L steps: </s> forbidden before, the hypothesis cut at L): its wall time, model loading included.

    # on the GPU machine (docs/eole.md lists the wheels Eole needs there):
    python3 benchmarks/bench_eole_long.py --gpu --data long-copy --length 4096 --steps 60 --report-every 10
    python3 benchmarks/bench_eole_long.py --gpu --data multi30k-docs --multi30k-dir ../shared/data/multi30k
    # CPU smoke run (tiny model, documents of 64 tokens), to check the script itself:
    python3 benchmarks/bench_eole_long.py --tiny --length 64 --documents 12 --steps 4 --report-every 2

Prints a training table and a decoding table; ``--csv DIR`` appends their rows to DIR/training.csv and
DIR/decoding.csv (modes ``eole train``, ``eole predict``), as bench_train.py and bench_translate.py do.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

import result_rows  # (benchmarks/ is on sys.path when run as a script)
from bench_eole_multi30k import eole, model_section, training_section
from bench_train import (
    DOCUMENT_BUCKET,
    DOCUMENT_VARIANTS,
    STEP_LINE,
    VARIANTS,
    data_label,
    long_copy_corpus,
    multi30k_documents,
    training_row,
)
from paired_rounds import describe

# Eole's report line: "...; sents: N; bsz: SRC/TGT/SENTS; SRC/TGT tok/s; ...": the window's documents, then
# per batch (rounded) its source tokens, target tokens (</s> included) and documents
BATCH_LINE = re.compile(r"sents:\s*(\d+); bsz:\s*(\d+)/\s*(\d+)/")


def position_rows() -> int:
    """Rows of Eole's sinusoidal position table: the default of PositionalEncoding's max_len, which no option
    changes (the plugin's ``eole predict`` refuses a longer source or max_length). Read from the module's
    source, not imported: importing Eole takes seconds, and every ``eole`` process imports it again."""
    source = Path(importlib.util.find_spec("eole").origin).parent / "modules" / "embeddings.py"
    cls = next(n for n in ast.parse(source.read_text()).body if getattr(n, "name", "") == "PositionalEncoding")
    init = next(n for n in cls.body if getattr(n, "name", "") == "__init__").args
    defaults = dict(zip([a.arg for a in init.args][-len(init.defaults):], init.defaults))
    return ast.literal_eval(defaults["max_len"])


def config(args: argparse.Namespace, work: Path, run_dir: Path, src: Path, tgt: Path, options: dict) -> dict:
    """One variant's Eole config: the document data with no transform (nothing filtered), the model with the
    variant's attention options, token batches of --batch-tokens."""
    training = training_section(run_dir / "model", args.steps, args.gpu, args.tiny)
    training.update(batch_type="tokens", batch_size=args.batch_tokens, valid_batch_size=args.batch_tokens,
                    normalization="tokens", bucket_size=DOCUMENT_BUCKET)
    if args.gpu and args.dtype != "fp32":  # (Eole's default use_amp: the model in float32 under autocast)
        training.update(compute_dtype=args.dtype)
    return {"save_data": str(work / "data"), "src_vocab": str(work / "vocab.src"), "tgt_vocab": str(work / "vocab.tgt"),
            "src_vocab_size": args.vocab + 100, "tgt_vocab_size": args.vocab + 100, "overwrite": True, "seed": 1,
            "report_every": args.report_every,
            "data": {"corpus_1": {"path_src": str(src), "path_tgt": str(tgt)}},
            "transforms": [],
            "model": model_section(args.tiny, options), "training": training}


def windows(log: Path, report_every: int) -> list[tuple[float, float]]:
    """(target tok/s, target tokens a document) of each report window of an ``eole train`` log: a window's N
    documents came in report_every batches (one a step, accum_count 1) of TGT target tokens each on average,
    so report_every x TGT / N a document (TGT rounded: within report_every / 2N of it)."""
    text = log.read_text()
    rates = [float(m.group(3)) for m in STEP_LINE.finditer(text)]
    sizes = [report_every * float(m.group(3)) / int(m.group(1)) for m in BATCH_LINE.finditer(text)]
    if len(rates) < 2 or len(sizes) != len(rates):
        sys.exit(f"bench_eole_long: fewer than two report windows in {log} (more --steps, or a lower --report-every)")
    return list(zip(rates, sizes))


def document_sizes(tgt: Path) -> tuple[int, int]:
    """(shortest, longest) target document of the corpus, in tokens with its </s>."""
    lengths = [len(line.split()) + 1 for line in tgt.read_text(encoding="utf-8").splitlines()]
    return min(lengths), max(lengths)


def train(args: argparse.Namespace, work: Path, src: Path, tgt: Path) -> tuple[dict, dict]:
    """({variant: [(mean target tok/s of a run's windows after the first, windows used) for each round]},
    {variant: (fewest, most) target tokens a document of its windows}); every window checked to hold whole
    documents."""
    shortest, longest = document_sizes(tgt)
    runs: dict[str, list] = {name: [] for name in args.variants}
    sizes: dict[str, list] = {name: [] for name in args.variants}  # (every window's, then their range)
    for r in range(args.rounds):
        for name in args.variants:
            run_dir = work / re.sub(r"\W+", "_", name) / f"round{r}"
            run_dir.mkdir(parents=True, exist_ok=True)
            path = run_dir / "config.yaml"
            path.write_text(yaml.safe_dump(config(args, work, run_dir, src, tgt, VARIANTS[name]), sort_keys=False))
            if not (work / "vocab.tgt").exists():  # the vocabularies depend on the data alone: built once
                eole("build_vocab", "-c", path, "-n_sample", "-1", cwd=work, log=work / "build_vocab.log")
            eole("train", "-c", path, cwd=run_dir, log=run_dir / "train.log")
            seen = windows(run_dir / "train.log", args.report_every)
            cut = [size for _, size in seen if not shortest - 0.5 <= size <= longest + 0.5]
            if cut:
                sys.exit(f"bench_eole_long: {run_dir / 'train.log'}: report windows of {cut[0]:.1f} target tokens "
                         f"a document, outside the corpus's {shortest}-{longest}: documents were filtered or cut")
            runs[name].append((statistics.mean(rate for rate, _ in seen[1:]), len(seen) - 1))
            sizes[name] += [size for _, size in seen]
    return runs, {name: (min(s), max(s)) for name, s in sizes.items()}


def decode(args: argparse.Namespace, work: Path, src: Path) -> dict[str, tuple[float, int]]:
    """{variant: (wall seconds of ``eole predict`` on the corpus's first document, output tokens)}: greedy,
    exactly --length steps, with round 0's model."""
    doc = work / "document.src"
    doc.write_text(src.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    out = {}
    for name in args.decode:
        run_dir = work / re.sub(r"\W+", "_", name) / "round0"
        pred = run_dir / "document.pred"
        seconds = eole("predict", "-model_path", run_dir / "model", "-src", doc, "-output", pred, "-beam_size", "1",
                       "-batch_size", "1", "-min_length", args.length, "-max_length", args.length,
                       *(["-gpu_ranks", "0"] if args.gpu else []), cwd=run_dir, log=run_dir / "predict.log")
        lines = pred.read_text(encoding="utf-8").splitlines()
        if len(lines) != 1:
            sys.exit(f"bench_eole_long: {pred}: {len(lines)} lines for one document")
        out[name] = (seconds, len(lines[0].split()))
    return out


def report(args: argparse.Namespace, runs: dict, sizes: dict, decoded: dict) -> tuple[list[dict], list[dict]]:
    """Print the training and decoding tables; their training.csv and decoding.csv rows."""
    rates = {name: statistics.median(rate for rate, _ in rs) for name, rs in runs.items()}
    base = rates.get("softmax")
    model = f"{'tiny' if args.tiny else '3-layer'} Transformer, {args.dtype if args.gpu else 'fp32'}"
    print(f"\neole train tokens/s ({data_label(args)}, {args.steps} steps, batch {args.batch_tokens} tokens, {model}"
          f"{f', median of {args.rounds} rounds' if args.rounds > 1 else ''})")
    print("| variant | target tok/s | vs softmax | median of round ratios (95% interval) | windows | runs (tok/s) "
          "| target tokens a document |")
    print("|---|---|---|---|---|---|---|")
    train_rows = []
    for name, rs in runs.items():
        paired = [x / s for (x, _), (s, _) in zip(rs, runs["softmax"])] if "softmax" in runs else []
        print(f"| {name} | {rates[name]:.0f} | {f'{rates[name] / base:.2f}x' if base else 'n/a'} | {describe(paired)} "
              f"| {rs[0][1]} | {', '.join(f'{x:.0f}' for x, _ in rs)} | {'{:g}-{:g}'.format(*sizes[name])} |")
        train_rows.append({**training_row(args, name, rates[name], base, rs[0][1], rs, paired), "mode": "eole train"})
    setup = f"greedy, 1 document, exactly {args.length} steps, whole eole predict process (model loading included)"
    print(f"\neole predict of one document ({setup})")
    print("| variant | seconds | documents/s | output tokens |")
    print("|---|---|---|---|")
    soft = decoded.get("softmax", (None,))[0]
    decode_rows = []
    for name, (seconds, tokens) in decoded.items():
        print(f"| {name} | {seconds:.1f} | {1 / seconds:.4f} | {tokens} |")
        decode_rows.append({"case": name, "ours": f"{1 / seconds:.4f}", "baseline": f"{1 / soft:.4f}" if soft else "",
                            "ratio": f"{soft / seconds:.2f}" if soft else "", "data": data_label(args),
                            "mode": "eole predict", "setup": setup, "output_words": str(tokens),
                            "whole_runs_s": f"{seconds:.2f}"})
    return train_rows, decode_rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=["long-copy", "multi30k-docs"], default="long-copy")
    ap.add_argument("--length", type=int, default=4096,
                    help="tokens a document (long-copy: exactly; multi30k-docs: at most, captions kept whole)")
    ap.add_argument("--multi30k-dir", type=Path, default=Path("../shared/data/multi30k"))
    ap.add_argument("--langs", nargs=2, default=["de", "en"])
    ap.add_argument("--vocab", type=int, default=32000, help="long-copy vocabulary size (and vocab cap)")
    ap.add_argument("--documents", type=int, default=256, help="long-copy documents")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=1, help="train every variant this many times, in turn")
    ap.add_argument("--report-every", type=int, default=10)
    ap.add_argument("--batch-tokens", type=int, default=None, help="tokens a batch (default 2 x (--length + 2))")
    ap.add_argument("--gpu", action="store_true", help="train and decode on GPU 0")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"],
                    help="Eole's compute_dtype on GPU (16-bit: mixed precision, torch.amp)")
    ap.add_argument("--tiny", action="store_true", help="a tiny model and vocabulary (CPU check of the script)")
    ap.add_argument("--variants", nargs="+", default=DOCUMENT_VARIANTS, choices=list(VARIANTS), metavar="VARIANT",
                    help=f"default: {', '.join(DOCUMENT_VARIANTS)}")
    ap.add_argument("--decode", nargs="*", default=None, metavar="VARIANT",
                    help="variants whose model decodes one document (default: entmax15 (all attention) where "
                         "trained; none: no decoding)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--csv", type=Path, default=None, metavar="DIR",
                    help="append the rows to DIR/training.csv and DIR/decoding.csv (benchmarks/results)")
    args = ap.parse_args(argv)
    if args.tiny:
        args.vocab = min(args.vocab, 500)
    args.batch_tokens = args.batch_tokens or 2 * (args.length + 2)
    rows = position_rows()  # a target document with its <s> and </s> takes --length + 2 positions
    if not 1 <= args.length <= rows - 2:
        sys.exit(f"--length {args.length}: a target document with its <s> and </s> takes --length + 2 positions and "
                 f"Eole's sinusoidal position table has {rows} (no option changes it); give --length 1 to {rows - 2}")
    if args.batch_tokens < args.length + 2:
        sys.exit(f"--batch-tokens {args.batch_tokens}: a batch must hold one document of --length {args.length} "
                 f"tokens and its <s> and </s>; give --batch-tokens {args.length + 2} or more")
    if args.decode is None:
        args.decode = [name for name in ["entmax15 (all attention)"] if name in args.variants]
    unknown = [name for name in args.decode if name not in args.variants]
    if unknown:
        sys.exit(f"--decode {unknown[0]!r}: not a trained variant (--variants {', '.join(args.variants)})")
    # (data_label's and training_row's fields, as bench_train.py has them)
    args.layers, args.in_process, args.sentences = 3, False, args.documents
    work = (args.workdir or Path(tempfile.mkdtemp(prefix="bench_eole_long_"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.data == "long-copy":
        src, tgt = long_copy_corpus(work, args.vocab, args.documents, args.length)
    else:
        src, tgt = multi30k_documents(work, args.multi30k_dir, *args.langs, args.length)
    runs, sizes = train(args, work, src, tgt)
    decoded = decode(args, work, src)
    train_rows, decode_rows = report(args, runs, sizes, decoded)
    if args.csv:
        result_rows.append(args.csv, "training", train_rows, gpu=args.gpu)
        if decode_rows:
            result_rows.append(args.csv, "decoding", decode_rows, gpu=args.gpu)
    if args.json:
        args.json.write_text(json.dumps({"data": data_label(args), "runs": runs, "decoded": decoded}, indent=1))


if __name__ == "__main__":
    main()
