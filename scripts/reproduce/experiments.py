"""Every experiment of the reproduction tables: its OpenNMT-py config, data and place in a table.

``make_configs.py`` writes ``configs/<family>/.../<name>.yaml`` from here; ``reproduce.py`` trains,
translates and scores them over seeds and prints the tables. Paths in the configs are relative to
the repository root (data under ``work/data/``, runs under ``runs/``; both git-ignored).

Hyper-parameters come from the papers (section named beside each); where a paper is silent the
value is ours and marked ``# not in the paper`` in the generated YAML (see docs/reproduce.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

DATA = "work/data"
RUNS = "runs"


@dataclass
class Experiment:
    family: str  # configs/<family>/
    name: str  # path below the family, without .yaml
    config: dict
    corpus: str  # work/data/<corpus>
    src: str  # language / side names for files and evaluation
    tgt: str
    table: str  # key of TABLES
    row: str
    column: str
    task: str  # "sigmorphon" or "mt"
    notes: list[str] = field(default_factory=list)  # the "not in the paper" choices, written as comments
    decode: tuple[str, ...] = ()  # onmt_translate options beside beam 5 (evaluate, analyze)

    @property
    def path(self) -> str:
        return f"configs/{self.family}/{self.name}.yaml"

    @property
    def run_dir(self) -> str:
        return f"{RUNS}/{self.family}/{self.name}"


def fn_options(prefix: str, alpha: float, tau: str | None = None) -> dict:
    """Options selecting the alpha-entmax with this alpha for ``prefix`` (generator / global_attention /
    attention): the exact mappings for 1, 1.5 and 2, bisection otherwise."""
    name = {1.0: "softmax", 1.5: "entmax15", 2.0: "sparsemax"}.get(float(alpha))
    if name is not None:
        return {f"{prefix}_function": name}
    return {f"{prefix}_function": "entmax_bisect", f"{prefix}_alpha": float(alpha)}


def alpha_tag(alpha: float) -> str:
    return f"{alpha:g}"


# ---------------------------------------------------------------- Peters et al. 2019 (RNN, §4)
def rnn(dim: int) -> dict:
    """§4: 2-layer biLSTM encoder and LSTM decoder with input feeding, dropout 0.3, Adam 1e-3,
    batch 64; Luong "general" attention is the s^T W h scoring of their §2."""
    return {
        "encoder_type": "brnn", "decoder_type": "rnn", "rnn_type": "LSTM",
        "enc_layers": 2, "dec_layers": 2, "word_vec_size": dim, "hidden_size": dim,
        "input_feed": 1, "global_attention": "general", "dropout": [0.3],
        "optim": "adam", "learning_rate": 0.001, "batch_type": "sents", "batch_size": 64,
        "valid_batch_size": 64,
    }


# "halved whenever the loss increases on the validation set": the plugin's valid_lr_halving option
# (OpenNMT-py 3.5.1 itself only halves on a step schedule).

# Decoding as in the paper's fork (OpenNMT-py 0.6's translate defaults): no length penalty, and no cap
# on the output length relative to the source. OpenNMT-py 3.5.1 defaults to length_penalty avg and to
# max_length_ratio 1.25: at most 1.25 x the batch's padded source length + 5 tokens, which cuts long
# forms from short lemmas (Haida, Quechua) and makes a sentence's output depend on its batch.
PAPER_DECODE = ("-max_length_ratio", "0", "-length_penalty", "none")

# Training data order as in the paper's fork: its torchtext iterator permuted the training set every
# epoch, cut it into pools of 100 batches, sorted each pool by length and shuffled the pool's batches.
# OpenNMT-py 3.5.1 reads the file in the same order every pass (so a length-sorted bucket gives much
# the same batches again: scripts/reproduce/batch_overlap.py); the plugin's shuffle_each_pass permutes
# every pass, and a bucket of 100 batches is the pool.
FORK_DATA_ORDER = {"shuffle_each_pass": True, "bucket_size": 100 * 64}


# SIGMORPHON 2018 task 1 sizes, measured on ../shared/data/sigmorphon2018-task1.tar.gz
# (scripts/data/prepare_sigmorphon2018.py; `wc -l src-train.txt`): medium 95,323 pairs, 102 languages;
# high 735,610 pairs, 86 languages. Steps per epoch at batch 64: medium 1,490, high 11,494.
# The paper validates high runs every epoch and medium runs every ten epochs (§4.1), and halves the
# learning rate when the validation loss rises (§4): here every run validates every epoch (its best
# checkpoint and its stop rule) and checks for a halving every "halve_every" validations, against the
# loss that many validations before (valid_lr_halving_every), i.e. on the paper's cadence.
# The stop rule (docs/reproduce.md; the paper gives no training length): stop when the validation
# accuracy has not improved for "patience" validations in a row (OpenNMT-py's early_stopping on
# accuracy; in medium one halving period, so the learning rate had a chance to halve), or after the
# "epochs" above at the latest.
SIGMORPHON = {
    "high": {"epoch": 11494, "epochs": 30, "halve_every": 1, "patience": 5},
    "medium": {"epoch": 1490, "epochs": 100, "halve_every": 10, "patience": 10},
}
# Validation is forward-only (sums over target tokens): the batch size changes its speed, not its
# numbers; batches of 4096 words take a third of the time of batches of 64 (docs/benchmarks.md).
SIGMORPHON_VALID_BATCH = 4096


def sigmorphon(setting: str, out_alpha: float, attn_alpha: float) -> Experiment:
    s = SIGMORPHON[setting]
    d = f"{DATA}/sigmorphon2018-{setting}"
    name = f"out{alpha_tag(out_alpha)}-attn{alpha_tag(attn_alpha)}"
    cfg = {
        "src_vocab": f"{d}/vocab.src", "tgt_vocab": f"{d}/vocab.tgt",
        "src_vocab_size": 100000, "tgt_vocab_size": 100000,
        "data": {"corpus_1": {"path_src": f"{d}/src-train.txt", "path_tgt": f"{d}/tgt-train.txt"},
                 "valid": {"path_src": f"{d}/src-dev.txt", "path_tgt": f"{d}/tgt-dev.txt"}},
        "save_model": f"{RUNS}/peters2019-sigmorphon/{setting}/{name}/model",
        **rnn(300), "valid_batch_size": SIGMORPHON_VALID_BATCH,
        **fn_options("generator", out_alpha), **fn_options("global_attention", attn_alpha),
        "train_steps": s["epoch"] * s["epochs"], "valid_steps": s["epoch"],
        "save_checkpoint_steps": s["epoch"], "keep_checkpoint": -1,
        "valid_lr_halving": True, "valid_lr_halving_every": s["halve_every"],
        "early_stopping": s["patience"], "early_stopping_criteria": ["accuracy"],
        **FORK_DATA_ORDER, "report_every": 500, "seed": 1,
        # on a GPU the decoder's steps replay CUDA graphs, which this host-bound model needs
        # (its steps/s: docs/benchmarks.md); the same loss, other dropout draws
        "rnn_cuda_graphs": True,
    }
    return Experiment("peters2019-sigmorphon", f"{setting}/{name}", cfg, f"sigmorphon2018-{setting}",
                      "src", "tgt", "peters2019-table1", name, setting, "sigmorphon",
                      notes=[f"stop rule: validate every epoch, stop after {s['patience']} validations without a "
                             f"validation accuracy gain, at {s['epochs']} epochs at the latest (the paper gives "
                             "no training length; docs/reproduce.md)",
                             "validation every epoch" + (f" (the paper: every {s['halve_every']}; the learning rate "
                                                         "is checked for a halving on the paper's validations)"
                                                         if s["halve_every"] > 1 else "")
                             + f", in batches of {SIGMORPHON_VALID_BATCH} (forward only: same numbers, faster)"],
                      decode=PAPER_DECODE)


# What the paper's code (its fork of OpenNMT-py 0.6) did where OpenNMT-py 3.5.1 does otherwise, besides
# the data order above: no dropout on an RNN's word embeddings (3.5.1: -dropout), no padding entries in
# the target vocabulary (3.5.1 pads it to a multiple of 8), Adam's epsilon 1e-9 (3.5.1: 1e-8). The
# table "peters2019-table1-fork" trains the rows furthest from the paper with them (docs/results.md).
FORK_SETTINGS = {"embeddings_dropout": 0.0, "vocab_size_multiple": 1, "adam_eps": 1e-9}
FORK_ROWS = ((1.0, 1.0), (1.0, 1.5), (1.0, 2.0))  # softmax output: -1.47 and -2.86 (sparse attention), +1.83


def sigmorphon_fork(setting: str, out_alpha: float, attn_alpha: float) -> Experiment:
    """A Table 1 run as ``sigmorphon`` trains it, with the fork's ``FORK_SETTINGS`` besides."""
    e = sigmorphon(setting, out_alpha, attn_alpha)
    e.name = f"{setting}-fork/{e.row}"
    e.table = "peters2019-table1-fork"
    e.config.update(save_model=f"{RUNS}/{e.family}/{e.name}/model", **FORK_SETTINGS)
    e.notes.append("embeddings_dropout 0, vocab_size_multiple 1, adam_eps 1e-9: the values of the paper's code "
                   "(its fork of OpenNMT-py 0.6), where OpenNMT-py 3.5.1 has -dropout, 8 and 1e-8")
    return e


# §4.2: KFTT, WMT'16 RO-EN, IWSLT'17 DE-EN, both directions; 500 dims; 100k steps (RO-EN 120k);
# validation every 5k (DE-EN) / 10k steps
MT_PAIRS = {
    "de-en": ("iwslt17-de-en", 100000, 5000), "en-de": ("iwslt17-de-en", 100000, 5000),
    "ja-en": ("kftt-ja-en", 100000, 10000), "en-ja": ("kftt-ja-en", 100000, 10000),
    "ro-en": ("wmt16-ro-en", 120000, 10000), "en-ro": ("wmt16-ro-en", 120000, 10000),
}
MT_FUNCTIONS = {"softmax": 1.0, "entmax15": 1.5, "sparsemax": 2.0}


def mt_data(corpus: str, src: str, tgt: str, shared_vocab: bool = False) -> dict:
    d = f"{DATA}/{corpus}"
    vocab = ({"share_vocab": True, "src_vocab": f"{d}/vocab.shared", "tgt_vocab": f"{d}/vocab.shared"}
             if shared_vocab else {"src_vocab": f"{d}/vocab.{src}", "tgt_vocab": f"{d}/vocab.{tgt}"})
    return {
        **vocab, "src_vocab_size": 100000, "tgt_vocab_size": 100000,
        "data": {"corpus_1": {"path_src": f"{d}/train.bpe.{src}", "path_tgt": f"{d}/train.bpe.{tgt}"},
                 "valid": {"path_src": f"{d}/dev.bpe.{src}", "path_tgt": f"{d}/dev.bpe.{tgt}"}},
    }


def peters_mt(pair: str, out_alpha: float, attn_alpha: float, family: str = "peters2019-mt",
              name: str | None = None, table: str = "peters2019-table2", row: str | None = None) -> Experiment:
    corpus, steps, valid = MT_PAIRS[pair]
    src, tgt = pair.split("-")
    fn = {v: k for k, v in MT_FUNCTIONS.items()}.get(out_alpha, f"out{alpha_tag(out_alpha)}")
    name = name or f"{pair}/{fn}"
    cfg = {
        **mt_data(corpus, src, tgt),
        "save_model": f"{RUNS}/{family}/{name}/model",
        # not in the paper: OpenNMT-py 0.x's default length filter of the time (50 tokens)
        "transforms": ["filtertoolong"], "src_seq_length": 50, "tgt_seq_length": 50,
        **rnn(500),
        **fn_options("generator", out_alpha), **fn_options("global_attention", attn_alpha),
        "train_steps": steps, "valid_steps": valid, "save_checkpoint_steps": valid, "keep_checkpoint": -1,
        "valid_lr_halving": True,
        **FORK_DATA_ORDER, "report_every": 500, "seed": 1,
    }
    return Experiment(family, name, cfg, corpus, src, tgt, table, row or fn, pair, "mt",
                      notes=["filtertoolong 50/50: not in the paper (OpenNMT-py 0.x default)"], decode=PAPER_DECODE)


# Multi30k DE<->EN: Peters et al.'s RNN recipe on a real corpus small enough to train anywhere (ours,
# no paper numbers). 29,000 pairs = 453 steps an epoch at batch 64: 10k steps ~ 22 epochs.
def multi30k(pair: str, fn: str) -> Experiment:
    e = peters_mt("de-en" if pair == "de-en" else "en-de", MT_FUNCTIONS[fn], MT_FUNCTIONS[fn],
                  family="multi30k-rnn", name=f"{pair}/{fn}", table="multi30k-rnn", row=fn)
    src, tgt = pair.split("-")
    e.corpus, e.src, e.tgt = "multi30k", src, tgt
    e.config.update(mt_data("multi30k", src, tgt))
    e.config.update(train_steps=10000, valid_steps=1000, save_checkpoint_steps=1000)
    e.notes.append("Multi30k is our stand-in corpus: steps and schedule are ours")
    return e


# Figure 4: DE-EN, attention alpha (output 1.5) and output alpha (attention 1.5) from 1 to 2.5.
# The seed text gives the range, not the points: this grid is ours.
FIG4_GRID = (1.0, 1.1, 1.2, 1.25, 1.33, 1.4, 1.5, 1.6, 1.75, 2.0, 2.25, 2.5)


def fig4(which: str, alpha: float) -> Experiment:
    out_alpha, attn_alpha = (1.5, alpha) if which == "attention" else (alpha, 1.5)
    e = peters_mt("de-en", out_alpha, attn_alpha, family="peters2019-fig4",
                  name=f"{which}/alpha{alpha_tag(alpha)}", table=f"peters2019-fig4-{which}", row=alpha_tag(alpha))
    e.column = "dev accuracy"
    e.notes.append("alpha grid points: ours (the seed text gives the range 1 to 2.5)")
    return e


# ---------------------------------------------------------------- Transformers
def transformer(ff: int, dropout: float, attn_dropout: float, accum: int, warmup: int, average_decay: float = 0.0,
                share_embeddings: bool = False) -> dict:
    """Transformer base: 6+6 layers, d_model 512, 8 heads; Adam(0.9, 0.998), noam, lr 2, token batches 4096."""
    cfg = {
        "encoder_type": "transformer", "decoder_type": "transformer", "position_encoding": True,
        "enc_layers": 6, "dec_layers": 6, "heads": 8, "hidden_size": 512, "word_vec_size": 512,
        "transformer_ff": ff, "dropout": [dropout], "attention_dropout": [attn_dropout],
        "batch_type": "tokens", "batch_size": 4096, "valid_batch_size": 2048, "accum_count": [accum],
        "normalization": "tokens", "optim": "adam", "adam_beta1": 0.9, "adam_beta2": 0.998,
        "decay_method": "noam", "learning_rate": 2.0, "warmup_steps": warmup, "max_grad_norm": 0.0,
        "param_init": 0.0, "param_init_glorot": True, "label_smoothing": 0.0,
    }
    if share_embeddings:  # one embedding matrix for source, target and the output layer
        cfg.update(share_embeddings=True, share_decoder_embeddings=True)
    if average_decay:
        cfg["average_decay"] = average_decay
    return cfg


# Tezekbayev et al., appendix A
TEZEKBAYEV = {
    "iwslt14-de-en": ("de", "en", transformer(1024, 0.3, 0.1, 8, 4000), 50000),
    "wmt14-en-de": ("en", "de", transformer(2048, 0.1, 0.1, 4, 8000, 0.0005, share_embeddings=True), 200000),
    "wmt13-en-ru": ("en", "ru", transformer(2048, 0.3, 0.1, 4, 8000, 0.0005, share_embeddings=True), 200000),
}
TEZEKBAYEV_OUTPUTS = {
    "softmax": {"generator_function": "softmax"},
    "sparsemax": {"generator_function": "sparsemax"},
    "entmax15": {"generator_function": "entmax15"},
    # §3.1: tau = mean 1.5-entmax threshold of the untrained model on the first batch
    "relu15": {"generator_function": "alpha_relu", "generator_alpha": 1.5, "generator_tau": "auto"},
}


def tezekbayev(corpus: str, output: str) -> Experiment:
    src, tgt, arch, steps = TEZEKBAYEV[corpus]
    name = f"{corpus}/{output}"
    cfg = {
        **mt_data(corpus, src, tgt, shared_vocab=True),
        "save_model": f"{RUNS}/tezekbayev/{name}/model",
        **arch, **TEZEKBAYEV_OUTPUTS[output],
        "train_steps": steps, "valid_steps": 5000, "save_checkpoint_steps": 5000, "keep_checkpoint": -1,
        "report_every": 500, "seed": 1,
    }
    return Experiment("tezekbayev", name, cfg, corpus, src, tgt, "tezekbayev-table1", output,
                      f"{corpus.split('-')[0]} {src}-{tgt}", "mt",
                      notes=["train_steps / valid_steps: not in the paper (best checkpoint by validation BLEU)",
                             "attention_dropout 0.1 for IWSLT'14: not in the paper"])


# Correia et al. 2019: Transformer base, attention softmax / 1.5-entmax / learned alpha per head
CORREIA = {
    "de-en": ("iwslt17-de-en", "de", "en"), "ja-en": ("kftt-ja-en", "ja", "en"),
    "ro-en": ("wmt16-ro-en", "ro", "en"), "en-de": ("wmt14-en-de", "en", "de"),
}
CORREIA_ATTENTION = {
    "softmax": {"attention_function": "softmax"},
    "entmax15": {"attention_function": "entmax15"},
    "entmax_learned": {"attention_function": "entmax_bisect", "attention_alpha": 1.5, "learn_alpha": True},
}


def correia(pair: str, attention: str) -> Experiment:
    corpus, src, tgt = CORREIA[pair]
    name = f"{pair}/{attention}"
    cfg = {
        **mt_data(corpus, src, tgt, shared_vocab=True),
        "save_model": f"{RUNS}/correia2019/{name}/model",
        **transformer(2048, 0.1, 0.1, 2, 8000, share_embeddings=True),
        "label_smoothing": 0.1, **CORREIA_ATTENTION[attention],
        "train_steps": 200000, "valid_steps": 10000, "save_checkpoint_steps": 10000, "keep_checkpoint": -1,
        "report_every": 500, "seed": 1,
    }
    return Experiment("correia2019", name, cfg, corpus, src, tgt, "correia2019-bleu", attention, pair, "mt",
                      notes=["all training hyper-parameters: Transformer base as in OpenNMT-py's recipe; "
                             "the seed copy of the paper (abstract and slides) gives none"])


# Multi30k Transformer (ours, no paper numbers): the four variants of the GPU results issue on a real
# corpus small enough to train in minutes. 29,000 pairs at 4096-token batches: about 95 steps an epoch.
MULTI30K_TRANSFORMER = {
    "softmax": {},
    # the usual dense baseline: label smoothing helps softmax (and would make a sparse output dense:
    # docs/results.md), so the sparse variants are also compared with a smoothed softmax
    "softmax_ls0.1": {"label_smoothing": 0.1},
    "entmax15": {"generator_function": "entmax15", "attention_function": "entmax15"},
    "entmax_learned": {"generator_function": "entmax15", "attention_function": "entmax_bisect",
                       "attention_alpha": 1.5, "learn_alpha": True},
    "relu15": {"generator_function": "alpha_relu", "generator_alpha": 1.5, "generator_tau": "auto"},
}


def multi30k_transformer(pair: str, variant: str) -> Experiment:
    src, tgt = pair.split("-")
    name = f"{pair}/{variant}"
    cfg = {
        **mt_data("multi30k", src, tgt),
        "save_model": f"{RUNS}/multi30k-transformer/{name}/model",
        **transformer(2048, 0.3, 0.1, 1, 2000),
        "enc_layers": 3, "dec_layers": 3, **MULTI30K_TRANSFORMER[variant],
        # OpenNMT-py 3.5.1's default bucket (262,144 examples) would cycle this 29k corpus nine times a bucket
        "bucket_size": 20000,
        "train_steps": 3000, "valid_steps": 500, "save_checkpoint_steps": 500, "keep_checkpoint": -1,
        "report_every": 100, "seed": 1,
    }
    return Experiment("multi30k-transformer", name, cfg, "multi30k", src, tgt, "multi30k-transformer", variant,
                      pair, "mt", notes=["Multi30k Transformer: ours (3+3 layers, dropout 0.3, 3000 steps ~ 32 "
                                         "epochs, warmup 2000, no label smoothing); no paper trains it"])


def all_experiments() -> list[Experiment]:
    out = []
    for setting in ("high", "medium"):
        for a_out in (1.0, 1.5, 2.0):
            for a_att in (1.0, 1.5, 2.0):
                out.append(sigmorphon(setting, a_out, a_att))
    for a_out, a_att in FORK_ROWS:
        out.append(sigmorphon_fork("medium", a_out, a_att))
    for pair in MT_PAIRS:
        for fn, alpha in MT_FUNCTIONS.items():
            out.append(peters_mt(pair, alpha, alpha))
    for pair in ("de-en", "en-de"):
        for fn in MT_FUNCTIONS:
            out.append(multi30k(pair, fn))
    for pair in ("de-en", "en-de"):
        for variant in MULTI30K_TRANSFORMER:
            out.append(multi30k_transformer(pair, variant))
    for which in ("attention", "output"):
        for alpha in FIG4_GRID:
            out.append(fig4(which, alpha))
    for pair in CORREIA:
        for attention in CORREIA_ATTENTION:
            out.append(correia(pair, attention))
    for corpus in TEZEKBAYEV:
        for output in TEZEKBAYEV_OUTPUTS:
            out.append(tezekbayev(corpus, output))
    return out


# Tables: rows / columns in print order, metric, the paper key in paper_numbers.csv
@dataclass(frozen=True)
class Table:
    title: str
    paper: tuple[str, str]  # (paper, table) in paper_numbers.csv; ("", "") if none
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    metric: str  # key in a run's scores.json
    ensemble: bool = False  # columns ending in "-ens" are ensembles of the seeds


@dataclass(frozen=True)
class Analysis:
    """A table computed by decoding the *validation* set of another table's runs with the decoding
    analyses of onmt_translate (docs/decoding.md), one value per seed from its ``analysis.json``."""
    title: str
    paper: tuple[str, str]
    source: str  # the table whose runs are analysed
    flags: tuple[str, ...]  # onmt_translate analysis options
    columns: dict  # our column -> (summary key, scale)
    keep: str = ".*"  # regular expression the source experiments' names must match
    layout: str = "row"  # "row": rows = source rows, columns = `columns`; "transpose": rows = `columns`,
    # columns = the source's columns; "best": as transpose, only the run with the best validation accuracy
    # of each column; "by-column": rows = source rows, columns = source columns (one value per run)


_T1_ROWS = tuple(f"out{alpha_tag(o)}-attn{alpha_tag(a)}" for o in (1.0, 1.5, 2.0) for a in (1.0, 1.5, 2.0))
TABLES = {
    "peters2019-table1": Table("Peters et al. 2019, Table 1: SIGMORPHON 2018 test accuracy, averaged over languages",
                               ("peters2019", "1"), _T1_ROWS, ("high-avg", "high-ens", "medium-avg", "medium-ens"),
                               "accuracy", ensemble=True),
    "peters2019-table1-fork": Table("Peters et al. 2019, Table 1 rows trained with the settings of the paper's code "
                                    "(no embedding dropout, no vocabulary padding, Adam's epsilon 1e-9)",
                                    ("peters2019", "1"), tuple(f"out{alpha_tag(o)}-attn{alpha_tag(a)}"
                                                               for o, a in FORK_ROWS),
                                    ("medium-avg", "medium-ens"), "accuracy", ensemble=True),
    "peters2019-table2": Table("Peters et al. 2019, Table 2: tokenized test BLEU", ("peters2019", "2"),
                               tuple(MT_FUNCTIONS), tuple(MT_PAIRS), "tokenized_bleu"),
    "multi30k-rnn": Table("Multi30k (our stand-in, no paper numbers): tokenized test BLEU, Peters et al.'s RNN recipe",
                          ("", ""), tuple(MT_FUNCTIONS), ("de-en", "en-de"), "tokenized_bleu"),
    "multi30k-transformer": Table("Multi30k (ours, no paper numbers): SacreBLEU on test_2016_flickr, Transformer",
                                  ("", ""), tuple(MULTI30K_TRANSFORMER), ("de-en", "en-de"), "sacrebleu"),
    "peters2019-fig4-attention": Table("Peters et al. 2019, Figure 4 (left): DE→EN validation accuracy, "
                                       "attention alpha",
                                       ("", ""), tuple(alpha_tag(a) for a in FIG4_GRID), ("dev accuracy",),
                                       "dev_accuracy"),
    "peters2019-fig4-output": Table("Peters et al. 2019, Figure 4 (right): DE→EN validation accuracy, output alpha",
                                    ("", ""), tuple(alpha_tag(a) for a in FIG4_GRID), ("dev accuracy",),
                                    "dev_accuracy"),
    "correia2019-bleu": Table("Correia et al. 2019 (slides): test BLEU", ("correia2019", "slides: BLEU Scores"),
                              tuple(CORREIA_ATTENTION), tuple(CORREIA), "sacrebleu"),
    "tezekbayev-table1": Table("Tezekbayev et al., Table 1: detokenized SacreBLEU", ("tezekbayev", "1"),
                               tuple(TEZEKBAYEV_OUTPUTS), ("iwslt14 de-en", "wmt14 en-de", "wmt13 en-ru"), "sacrebleu"),
}


ANALYSES = {
    # Table 3: nonzeros on the DE->EN validation set, the Table 2 models
    "peters2019-table3": Analysis("Peters et al. 2019, Table 3: nonzeros per target token, DE→EN validation",
                                  ("peters2019", "3"), "peters2019-table2", ("-sparsity_stats",),
                                  {"attended": ("mean_attended", 1.0), "target words": ("mean_output_support", 1.0)},
                                  keep=r"de-en/.*"),
    # §4.1: share of validation samples with one nonzero-probability sequence / a certified beam,
    # for the best (validation) sparse-output configuration of Table 1
    "peters2019-sec4.1": Analysis("Peters et al. 2019, §4.1: % of validation samples, best Table 1 configuration",
                                  ("peters2019", "4.1"), "peters2019-table1",
                                  ("-certificate", "-enumerate_support", "-enumerate_cap", "100"),
                                  {"single sequence": ("single_sequence_share", 100.0),
                                   "certified": ("certified_rate", 100.0)},
                                  keep=r".*/out(1\.5|2)-attn.*", layout="best"),
    # Tezekbayev et al. Table 2: empty string more probable than the beam hypothesis (development set)
    "tezekbayev-table2": Analysis("Tezekbayev et al., Table 2: % of validation sentences where the empty output wins",
                                  ("tezekbayev", "2"), "tezekbayev-table1", ("-empty_check",),
                                  {"%": ("empty_wins_rate", 100.0)}, layout="by-column"),
    # Multi30k Transformer, DE->EN validation: sparsity (Table 3 style), certificates, empty-string wins
    "multi30k-transformer-analysis": Analysis(
        "Multi30k Transformer, DE→EN validation: nonzeros per target token, certified beams, empty output wins",
        ("", ""), "multi30k-transformer", ("-sparsity_stats", "-certificate", "-empty_check"),
        {"target words": ("mean_output_support", 1.0), "attended": ("mean_attended", 1.0),
         "certified %": ("certified_rate", 100.0), "empty wins %": ("empty_wins_rate", 100.0)},
        keep=r"de-en/.*"),
    # Tezekbayev et al. Table 3: tau chosen on the first batch of the untrained model (generator_tau auto),
    # read from the training log (no decoding: empty flags)
    "tezekbayev-table3": Analysis("Tezekbayev et al., Table 3: tau of 1.5-ReLU from the untrained model",
                                  ("tezekbayev", "3"), "tezekbayev-table1", (),
                                  {"tau (untrained model)": ("tau", 1.0)}, keep=r".*/relu15", layout="transpose"),
}
