"""Run the paper's own code (deep-spin/OpenNMT-entmax: OpenNMT-py 0.6 of 2019) on current torch, and
check that OpenNMT-py 3.5.1 with this plugin computes the same model.

    F=path/to/OpenNMT-entmax   # a checkout of github.com/deep-spin/OpenNMT-entmax
    pip install --target /tmp/torchtext04 --no-deps torchtext==0.4.0   # the fork's torchtext (pure Python)
    S="python3 scripts/reproduce/fork_check.py --fork $F --pythonpath /tmp/torchtext04"
    D=work/data/sigmorphon2018-medium
    $S run preprocess.py -train_src $D/src-train.txt -train_tgt $D/tgt-train.txt \\
        -valid_src $D/src-dev.txt -valid_tgt $D/tgt-dev.txt -save_data /tmp/fk/med
    $S run train.py -data /tmp/fk/med -save_model /tmp/fk/m [the fork's training options]
    $S model --fork-data /tmp/fk/med --config configs/peters2019-sigmorphon/medium/out1-attn1.5.yaml

``run`` starts one of the fork's scripts unchanged, with what torch 2.x needs of it: its datasets
(pickled torchtext objects) load with ``weights_only`` loading, three classes allowed by name; its
attention's ``1 - mask`` (a bool mask, refused by torch ≥ 1.2) means ``~mask``; and ``train.py``
logs ``attn nnz:``, the mean number of source positions with nonzero attention per non-pad target
token over each report window, as the plugin's ``onmt_train`` reports do.

``model`` builds the fork's model of an RNN config (sizes, layers, attention read from the YAML;
uniform(±0.1) initialisation, seed 1) and ours from the same YAML, copies the fork's weights into
ours token by token (the vocabularies' orders differ; the target entries only ours has, OpenNMT-py
3.5.1's padding of the vocabulary to a multiple of 8, are kept out of the softmax), and compares, on
the first 64 training pairs in eval mode: the logits, the attention and every parameter's gradient
of a summed cross-entropy. Exit status 1 if they differ by more than float32 rounding.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
PAIRS = 64  # training pairs compared
TOLERANCE = 1e-5  # relative: float32 rounding of the same computation in another order
IN_FORK = "ONMT_ENTMAX_FORK_CHECK_CHILD"  # set in the fork's interpreter only
FORK_ATTENTION = {"softmax": "softmax", "sparsemax": "sparsemax", "entmax15": "tsallis15"}
# the only classes in the fork's preprocessed files besides containers and tensors
FORK_PICKLED = ("torchtext.vocab.Vocab", "onmt.inputters.text_dataset.TextDataset", "torchtext.data.example.Example")


# --- inside the fork's interpreter (its onmt on sys.path, ours switched off) ------------------------

def _allow_fork_pickles() -> None:
    import importlib

    classes = []
    for name in FORK_PICKLED:
        module, _, attr = name.rpartition(".")
        classes.append(getattr(importlib.import_module(module), attr))
    torch.serialization.add_safe_globals(classes)


class SubtractableMask(torch.Tensor):
    """A bool mask whose ``1 - mask`` is ``~mask``, every other operation unchanged: the fork's
    GlobalAttention writes ``1 - mask``, which torch ≥ 1.2 refuses for bool tensors."""

    def __rsub__(self, other):
        if isinstance(other, int) and other == 1:
            return torch.logical_not(self.as_subclass(torch.Tensor))
        return super().__rsub__(other)


def _bool_mask_subtraction() -> None:
    import onmt.modules.global_attention as ga  # (the fork's: only ever called in its interpreter)

    upstream = ga.sequence_mask
    ga.sequence_mask = lambda lengths, max_len=None: upstream(lengths, max_len).as_subclass(SubtractableMask)


def attention_nonzeros(attn, target, padding_idx: int) -> tuple[int, int]:
    """(nonzero attention weights, target tokens) over the non-pad targets: ``attn`` is
    tgt_len × batch × src_len for the decoder inputs, ``target`` the gold tokens (tgt_len × batch)."""
    keep = target.ne(padding_idx)
    return int(((attn > 0).sum(-1))[keep].sum()), int(keep.sum())


def _log_attention_nonzeros() -> None:
    import onmt.utils.loss as loss
    import onmt.utils.report_manager as report

    sums = [0, 0]
    sharded = loss.LossComputeBase.sharded_compute_loss

    def sharded_compute_loss(self, batch, output, attns, cur_trunc, trunc_size, shard_size, normalization):
        gold = batch.tgt[cur_trunc + 1: cur_trunc + 1 + trunc_size]
        gold = gold[:, :, 0] if gold.dim() == 3 else gold
        nnz, tokens = attention_nonzeros(attns["std"].detach(), gold, self.padding_idx)
        sums[0] += nnz
        sums[1] += tokens
        return sharded(self, batch, output, attns, cur_trunc, trunc_size, shard_size, normalization)

    loss.LossComputeBase.sharded_compute_loss = sharded_compute_loss
    report_training = report.ReportMgr._report_training

    def _report_training(self, step, *args, **kwargs):
        if sums[1]:
            print(f"Step {step}: attn nnz: {sums[0] / sums[1]:.3f}", flush=True)
        sums[0] = sums[1] = 0
        return report_training(self, step, *args, **kwargs)

    report.ReportMgr._report_training = _report_training


def _fork_run(fork: Path, script: str, args: list[str]) -> None:
    import runpy

    _allow_fork_pickles()
    _bool_mask_subtraction()
    if script == "train.py":
        _log_attention_nonzeros()
    sys.argv = [str(fork / script), *args]
    runpy.run_path(str(fork / script), run_name="__main__")


def padded_pairs(data: Path, src_id, tgt_id) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The first ``PAIRS`` training pairs of ``data`` as ids (``src_id`` / ``tgt_id``: token -> id),
    batch-first and padded with <blank>, longest source first (the encoder packs): sources
    (batch × len × 1), targets with <s> … </s> (batch × len × 1) and source lengths."""
    with open(data / "src-train.txt", encoding="utf-8") as s, open(data / "tgt-train.txt", encoding="utf-8") as t:
        pairs = sorted(([next(s).split(), next(t).split()] for _ in range(PAIRS)), key=lambda p: -len(p[0]))
    src = torch.full((PAIRS, max(len(p[0]) for p in pairs), 1), src_id("<blank>"))
    tgt = torch.full((PAIRS, max(len(p[1]) for p in pairs) + 2, 1), tgt_id("<blank>"))
    for j, (words, form) in enumerate(pairs):
        src[j, :len(words), 0] = torch.tensor([src_id(w) for w in words])
        ids = [tgt_id("<s>"), *map(tgt_id, form), tgt_id("</s>")]
        tgt[j, :len(ids), 0] = torch.tensor(ids)
    return src, tgt, torch.tensor([len(p[0]) for p in pairs])


def fork_model_options(config: dict, where: str) -> list[str]:
    """The fork's model options for one of our RNN configs (``where`` names it in errors)."""
    if config.get("decoder_type", "rnn") != "rnn" or config.get("encoder_type", "rnn") not in ("rnn", "brnn"):
        raise ValueError(f"{where}: not an RNN config (the check covers the fork's RNN models)")
    name = config.get("global_attention_function", "softmax")
    if name not in FORK_ATTENTION:
        raise ValueError(f"{where}: global_attention_function {name} has no counterpart in the fork "
                         f"(it has {', '.join(FORK_ATTENTION)})")
    layers = {config.get("enc_layers", config.get("layers", 2)), config.get("dec_layers", config.get("layers", 2))}
    if len(layers) != 1:
        raise ValueError(f"{where}: enc_layers and dec_layers differ (the fork's -layers sets both)")
    return ["-encoder_type", config.get("encoder_type", "rnn"), "-rnn_type", config.get("rnn_type", "LSTM"),
            "-layers", str(layers.pop()), "-rnn_size", str(config.get("hidden_size", 500)),
            "-word_vec_size", str(config.get("word_vec_size", 500)), "-input_feed", str(config.get("input_feed", 1)),
            "-global_attention", config.get("global_attention", "general"),
            "-global_attention_function", FORK_ATTENTION[name]]


def _fork_model(fork_data: str, data: Path, out: Path, options: list[str]) -> None:
    """The fork's model (``options``: ``fork_model_options``), its logits, attention and gradients of
    a summed cross-entropy on the first pairs, saved for ``model``."""
    import configargparse
    import onmt.opts as opts
    from onmt.inputters.inputter import load_fields_from_vocab
    from onmt.model_builder import build_base_model
    from onmt.train_single import training_opt_postprocessing

    _allow_fork_pickles()
    _bool_mask_subtraction()
    parser = configargparse.ArgumentParser()
    opts.model_opts(parser)
    opts.train_opts(parser)
    opt = parser.parse_args(["-data", fork_data, *options, "-seed", "1"])
    opt = training_opt_postprocessing(opt, -1)
    fields = load_fields_from_vocab(torch.load(fork_data + ".vocab.pt", weights_only=True))
    torch.manual_seed(1)
    model = build_base_model(opt, fields, False).eval()
    sv, tv = fields["src"].vocab, fields["tgt"].vocab
    s, t, lengths = padded_pairs(data, sv.stoi.__getitem__, tv.stoi.__getitem__)
    s, t = s.transpose(0, 1), t.transpose(0, 1)  # the fork is time-major
    out_, attns = model(s, t, lengths)
    logits = model.generator(out_)
    gold = t[1:, :, 0]
    torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), gold.reshape(-1),
                                      ignore_index=tv.stoi["<blank>"], reduction="sum").backward()
    torch.save({"state": {n: p.detach() for n, p in model.named_parameters()},
                "grads": {n: p.grad for n, p in model.named_parameters()},
                "src_itos": list(sv.itos), "tgt_itos": list(tv.itos),
                "logits": logits.detach().transpose(0, 1), "attn": attns["std"].detach().transpose(0, 1)}, out)


# --- in ours -----------------------------------------------------------------------------------------

def _fork_env(fork: Path, pythonpath: list[str]) -> dict:
    env = dict(os.environ, ONMT_ENTMAX_DISABLE="1", **{IN_FORK: "1"})  # the fork's interpreter: its onmt, not ours
    env["PYTHONPATH"] = os.pathsep.join([str(fork), *pythonpath])
    return env


def _child(fork: Path, pythonpath: list[str], *args: str) -> int:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--fork", str(fork), *args]
    return subprocess.run(cmd, env=_fork_env(fork, pythonpath)).returncode


def compare_model(config: str, fork_file: Path, data: Path) -> list[tuple[str, float]]:
    """Ours built from ``config`` with the fork's weights (``fork_file`` from ``_fork_model``): the
    largest relative difference of logits, attention and each gradient, in that order."""
    from onmt.bin.train import _get_parser
    from onmt.model_builder import build_model
    from onmt.train_single import _get_model_opts, _init_train
    from onmt.utils.parse import ArgumentParser

    opt = _get_parser().parse_args(["-config", config, "-save_model", str(fork_file.parent / "unused")])
    ArgumentParser.validate_train_opts(opt)
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    _, vocabs, _ = _init_train(opt)
    model = build_model(_get_model_opts(opt), opt, vocabs, None, -1).eval()
    fork = torch.load(fork_file, weights_only=True)
    sv, tv = vocabs["src"], vocabs["tgt"]
    src_rows = torch.tensor([fork["src_itos"].index(w) if w in fork["src_itos"] else 0 for w in sv.ids_to_tokens])
    tgt_rows = torch.tensor([fork["tgt_itos"].index(w) if w in fork["tgt_itos"] else 0 for w in tv.ids_to_tokens])
    shared_src = torch.tensor([w in fork["src_itos"] for w in sv.ids_to_tokens])
    shared_tgt = torch.tensor([w in fork["tgt_itos"] for w in tv.ids_to_tokens])
    rows = {"encoder.embeddings.make_embedding.emb_luts.0.weight": src_rows,
            "decoder.embeddings.make_embedding.emb_luts.0.weight": tgt_rows,
            "generator.weight": tgt_rows, "generator.bias": tgt_rows}
    renamed = {"generator.0.weight": "generator.weight", "generator.0.bias": "generator.bias"}
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in fork["state"].items():
            name = renamed.get(name, name)
            params[name].copy_(value[rows[name]] if name in rows else value)
        model.generator.weight[~shared_tgt] = 0  # entries only ours has: out of the softmax
        model.generator.bias[~shared_tgt] = -1e4
    s, t, lengths = padded_pairs(data, sv.lookup_token, tv.lookup_token)
    dec_out, attns = model(s, t, lengths)
    logits = model.generator(dec_out)[..., shared_tgt]  # (EntmaxGenerator: a Linear's logits)
    column = torch.cumsum(shared_tgt, 0) - 1  # a shared token's column among the shared ones
    gold = column[t[:, 1:, 0]]
    torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), gold.reshape(-1),
                                      ignore_index=int(column[tv.lookup_token("<blank>")]), reduction="sum").backward()

    def rel(a, b):
        return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()

    fork_logits = fork["logits"][..., tgt_rows[shared_tgt]]
    attn = attns["std"].detach().transpose(0, 1)  # (tgt, batch, src) as the fork's file: (batch, tgt, src)
    out = [("logits", rel(logits.detach(), fork_logits)), ("attention", rel(attn, fork["attn"]))]
    for name, grad in fork["grads"].items():
        name = renamed.get(name, name)
        ours = params[name].grad
        if name in rows:
            keep = shared_src if name.startswith("encoder") else shared_tgt  # rows both vocabularies have
            ours, grad = ours[keep], grad[rows[name]][keep]
        out.append((f"gradient {name}", rel(ours, grad)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fork", type=Path, required=True, help="a checkout of deep-spin/OpenNMT-entmax")
    ap.add_argument("--pythonpath", action="append", default=[], metavar="DIR",
                    help="a folder the fork needs on sys.path (torchtext 0.4.0); may be repeated")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="one of the fork's scripts (preprocess.py, train.py, translate.py)")
    run.add_argument("script")
    model = sub.add_parser("model", help="the fork's model and ours from one config: the same function?")
    model.add_argument("--fork-data", required=True, help="the fork's preprocessed data (-save_data of preprocess.py)")
    model.add_argument("--config", required=True, help="one of configs/peters2019-sigmorphon/*/*.yaml")
    model.add_argument("--data", type=Path, default=ROOT / "work/data/sigmorphon2018-medium",
                       help="the folder with src-train.txt / tgt-train.txt (default: %(default)s)")
    inner = sub.add_parser("_fork_model")  # (the fork's half of `model`, run in its interpreter)
    for name in ("fork_data", "data", "out"):
        inner.add_argument(name)
    a, rest = ap.parse_known_args(argv)
    if not (a.fork / "onmt" / "modules" / "global_attention.py").is_file():
        ap.error(f"--fork {a.fork}: not a checkout of deep-spin/OpenNMT-entmax (no onmt/modules/global_attention.py)")
    if a.command == "run":
        if IN_FORK not in os.environ:
            return _child(a.fork, a.pythonpath, "run", a.script, *rest)
        _fork_run(a.fork, a.script, rest)
        return 0
    if a.command == "_fork_model":
        _fork_model(a.fork_data, Path(a.data), Path(a.out), rest)
        return 0
    import yaml

    try:
        with open(a.config, encoding="utf-8") as f:
            options = fork_model_options(yaml.safe_load(f) or {}, f"--config {a.config}")
    except (OSError, ValueError) as e:
        ap.error(str(e) if isinstance(e, ValueError) else f"--config {a.config}: {e.strerror}")
    with tempfile.TemporaryDirectory() as tmp:
        fork_file = Path(tmp) / "fork.pt"
        if _child(a.fork, a.pythonpath, "_fork_model", a.fork_data, str(a.data), str(fork_file), *options):
            return 1
        diffs = compare_model(a.config, fork_file, a.data)
    print("| quantity | largest relative difference, ours against the fork |\n|---|---|")
    for what, d in diffs:
        print(f"| {what} | {d:.1e} |")
    worst = max(d for _, d in diffs)
    print(f"{'same' if worst <= TOLERANCE else 'NOT the same'} function: largest relative difference {worst:.1e} "
          f"(float32 rounding: up to {TOLERANCE:.0e})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
