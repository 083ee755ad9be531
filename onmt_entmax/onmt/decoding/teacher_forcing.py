"""Run a checkpoint teacher-forced over a source/target file; capture attention per head and the
output scores of every target step. Feeds the head-diversity and alpha-ReLU analyses.

The model is loaded as ``onmt_translate`` loads it (``load_test_model``, weights-only, with this
plugin's generator and normalizers). Every ``MultiHeadedAttention`` is put on the explicit
``scaled-dot`` path and sparse modules off the fused kernel (``fused_attention.eager_branch``: on
CUDA it computes the output without the probabilities), so its normalizer (``nn.Softmax`` or ours)
runs and a forward hook sees the (batch, heads, queries, keys) probabilities. Files are tokenized as
the model's training data (what ``onmt_translate -src`` takes). To look at *decoding* steps, as the
papers do, pass the model's own translations (``onmt_translate -output``) as the target file: the
teacher-forced steps are then exactly the steps that produced them.

Commands: ``onmt-entmax-head-diversity`` and ``onmt-entmax-alpha-relu-stats``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import torch
from torch import Tensor, nn

from onmt_entmax.analysis.alpha_relu_stats import StepStats, format_summary, plot_sums, plot_zero_shares
from onmt_entmax.analysis.alphas import attention_site, site_order
from onmt_entmax.analysis.command import refusals
from onmt_entmax.analysis.head_diversity import HeadDiversity, plot_head_diversity
from onmt_entmax.errors import EntmaxOptionError, NoAttention
from onmt_entmax.options.files import blank_lines

from ..files import check_out_dir
from ..model.fused_attention import eager_branch
from ..model.surgery import generator_log_probs


@dataclass
class ForcedBatch:
    """One batch: ``attn`` {(kind, layer): (B, H, T_q, T_k)}, masks (True = real token) of the source
    (B, S) and of the target steps (B, T), and the model's log-scores (B, T, V) if asked for."""

    attn: dict
    src_mask: Tensor
    tgt_mask: Tensor
    log_probs: Optional[Tensor]

    def query_mask(self, site) -> Tensor:
        return self.src_mask if site[0] == "enc_self" else self.tgt_mask


def load_model(checkpoint: str, gpu: int = -1):
    """(model in eval mode, vocabs) of an ``onmt_train`` checkpoint, built as ``onmt_translate`` does."""
    import onmt.model_builder
    import onmt.opts
    from onmt.utils.parse import ArgumentParser

    from .. import activate

    activate()
    if not os.path.exists(checkpoint):
        raise FileNotFoundError(f"-model: no such checkpoint {checkpoint}")
    parser = ArgumentParser(description="onmt-entmax teacher forcing")
    onmt.opts.translate_opts(parser)
    opt = parser.parse_args(["-model", checkpoint, "-src", "-", "-gpu", str(gpu)])
    vocabs, model, _ = onmt.model_builder.load_test_model(opt)
    model.eval()
    return model, vocabs


@contextmanager
def capture_attention(model: nn.Module) -> Iterator[dict]:
    """Yields a dict filled at each forward with {(kind, layer): attention probabilities}.

    Forces the explicit attention path (``self_attn_type = "scaled-dot"``, and upstream's eager branch
    for sparse modules, which on CUDA would run the fused kernel) while active.
    """
    from onmt.modules.multi_headed_attn import MultiHeadedAttention

    store: dict = {}
    handles, saved = [], []
    for name, module in model.named_modules():
        site = attention_site(name)
        if site is None or not isinstance(module, MultiHeadedAttention):
            continue
        saved.append((module, module.self_attn_type))
        module.self_attn_type = "scaled-dot"

        def hook(_mod, _inp, out, site=site):
            store[site] = out.detach()

        handles.append(module.softmax.register_forward_hook(hook))
    if not handles:
        raise NoAttention("the model has no Transformer attention to capture (encoder/decoder_type transformer)")
    try:
        with eager_branch():
            yield store
    finally:
        for h in handles:
            h.remove()
        for module, kind in saved:
            module.self_attn_type = kind


def _ids(vocab, tokens: list[str]) -> list[int]:
    return list(vocab(tokens))


def batches(vocabs, src_lines: Sequence[str], tgt_lines: Sequence[str], batch_size: int, device) -> Iterator:
    """(src (B, S, 1), tgt (B, T, 1) = <s> y </s>, src_len (B,)) padded with the vocab's pad id."""
    from onmt.constants import DefaultTokens

    if len(src_lines) != len(tgt_lines):
        raise ValueError(f"-src has {len(src_lines)} lines but -tgt has {len(tgt_lines)}")
    start = vocabs.get("decoder_start_token", DefaultTokens.BOS)
    src_pad = vocabs["src"].lookup_token(DefaultTokens.PAD)
    tgt_pad = vocabs["tgt"].lookup_token(DefaultTokens.PAD)
    for i in range(0, len(src_lines), batch_size):
        src = [_ids(vocabs["src"], s.split()) for s in src_lines[i:i + batch_size]]
        tgt = [_ids(vocabs["tgt"], [start] + t.split() + [DefaultTokens.EOS]) for t in tgt_lines[i:i + batch_size]]
        s_len, t_len = max(map(len, src)), max(map(len, tgt))
        src_t = torch.full((len(src), s_len, 1), src_pad, dtype=torch.long)
        tgt_t = torch.full((len(tgt), t_len, 1), tgt_pad, dtype=torch.long)
        for b, (s, t) in enumerate(zip(src, tgt)):
            src_t[b, : len(s), 0] = torch.tensor(s)
            tgt_t[b, : len(t), 0] = torch.tensor(t)
        yield src_t.to(device), tgt_t.to(device), torch.tensor([len(s) for s in src], device=device), tgt_pad


def _read(path: str, allow_empty: bool = False) -> list[str]:
    """Lines of a tokenized file. An empty target line is an empty translation (one step: </s>);
    an empty source line is refused (nothing to attend to)."""
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    empty = [i + 1 for i, line in enumerate(lines) if not line.split()]
    if empty and not allow_empty:
        raise ValueError(f"{path}: empty line(s) {empty[:5]}: every source sentence needs a token")
    return lines


def run(model: nn.Module, vocabs, src_path: str, tgt_path: str, on_batch: Callable[[ForcedBatch], None],
        batch_size: int = 32, attention: bool = True, outputs: bool = True) -> int:
    """Teacher-force every sentence pair; call ``on_batch`` per batch. Returns the number of sentences."""
    if batch_size < 1:
        raise ValueError(f"-batch_size must be >= 1, got {batch_size}")
    src_lines, tgt_lines = _read(src_path), _read(tgt_path, allow_empty=True)
    device = next(model.parameters()).device
    ctx = capture_attention(model) if attention else _null_capture()
    with ctx as store, torch.no_grad():
        for src, tgt, src_len, tgt_pad in batches(vocabs, src_lines, tgt_lines, batch_size, device):
            store.clear()
            dec_out, _ = model(src, tgt, src_len, with_align=False)
            log_probs = None
            if outputs:
                log_probs = generator_log_probs(model, model.generator(dec_out)).float()
            src_mask = torch.arange(src.size(1), device=device)[None, :] < src_len[:, None]
            tgt_mask = tgt[:, 1:, 0].ne(tgt_pad)
            on_batch(ForcedBatch(dict(store), src_mask, tgt_mask, log_probs))
    return len(src_lines)


@contextmanager
def _null_capture():
    yield {}


# --- commands --------------------------------------------------------------------------------
def check_pairs(src: str, tgt: str) -> None:
    """-src and -tgt there, UTF-8, line for line, no source line empty (nothing to attend to); before a
    model loads (``batches`` would stop after loading it)."""
    for option, path in (("src", src), ("tgt", tgt)):
        if not os.path.isfile(path):
            raise EntmaxOptionError(f"-{option} {path}: no such file")
    (n_src, blank), (n_tgt, _) = blank_lines(src, "src"), blank_lines(tgt, "tgt")
    if blank:
        raise EntmaxOptionError(f"-src {src}: empty line(s) {blank[:5]}: every source sentence needs a token")
    if n_tgt != n_src:
        raise EntmaxOptionError(f"-tgt {tgt} has {n_tgt} lines but -src {src} has {n_src}: give one target line "
                                "(a reference or the model's translation) per source line")


def _common_parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("-model", "--model", nargs="+", required=True, help="one or more onmt_train checkpoints")
    p.add_argument("-name", "--name", nargs="+", help="a label per model for the plots (default: file names)")
    p.add_argument("-src", "--src", required=True, help="tokenized source file")
    p.add_argument("-tgt", "--tgt", required=True,
                   help="tokenized target file: references, or the model's own translations for decoding steps")
    p.add_argument("-batch_size", "--batch_size", type=int, default=32, help="sentences per batch")
    p.add_argument("-gpu", "--gpu", type=int, default=-1)
    p.add_argument("-out_dir", "--out_dir", default=".", help="where PNGs and the JSON summary go")
    return p


def _parse_models(prog: str, doc: str, argv: Optional[Sequence[str]], outputs: Sequence[str]):
    """The tools' shared start: parse, check -name against -model, -out_dir against the inputs
    (``outputs``: the files written there) and -tgt line for line with -src (each refusal an
    ``EntmaxOptionError``), make -out_dir; returns the arguments and a generator of (name, model, vocabs),
    each checkpoint loaded when reached."""
    parser = _common_parser(prog, doc)
    args = parser.parse_args(argv)
    names = args.name or [os.path.splitext(os.path.basename(m))[0] for m in args.model]
    if len(names) != len(args.model):
        raise EntmaxOptionError(f"-name: {len(names)} names for {len(args.model)} models")
    if args.batch_size < 1:
        raise EntmaxOptionError(f"-batch_size must be >= 1, got {args.batch_size}")
    for path in args.model:
        if not os.path.isfile(path):
            raise EntmaxOptionError(f"-model {path}: no such checkpoint")
    check_out_dir("out_dir", args.out_dir, outputs, {"model": args.model, "src": args.src, "tgt": args.tgt})
    check_pairs(args.src, args.tgt)
    os.makedirs(args.out_dir, exist_ok=True)
    return args, ((name, *load_model(ckpt, args.gpu)) for name, ckpt in zip(names, args.model))


def head_diversity_main(argv: Optional[Sequence[str]] = None) -> int:
    """``onmt-entmax-head-diversity``: mean JS between heads per layer, for each model; PNG + JSON."""
    with refusals("onmt-entmax-head-diversity"):
        return _head_diversity(argv)


def _head_diversity(argv: Optional[Sequence[str]]) -> int:
    args, models = _parse_models("onmt-entmax-head-diversity", head_diversity_main.__doc__, argv,
                                 ("head_diversity.png", "head_diversity.json"))
    results = {}
    for (name, model, vocabs), path in zip(models, args.model):
        acc = HeadDiversity()

        def add(fb: ForcedBatch, acc=acc):
            for site, attn in fb.attn.items():
                acc.add(site, attn, fb.query_mask(site))

        try:
            run(model, vocabs, args.src, args.tgt, add, batch_size=args.batch_size, outputs=False)
        except NoAttention as err:
            raise EntmaxOptionError(f"-model {path}: {err}; head diversity compares Transformer heads") from None
        results[name] = acc.result()
        for (kind, layer), js in results[name].items():
            print(f"{name}\t{kind}\tlayer {layer + 1}\tJS {js:.4f}")
    png = plot_head_diversity(results, os.path.join(args.out_dir, "head_diversity.png"))
    out = os.path.join(args.out_dir, "head_diversity.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({n: [{"kind": k, "layer": layer + 1, "js": v}
                       for (k, layer), v in sorted(r.items(), key=lambda kv: site_order(kv[0]))]
                   for n, r in results.items()}, f, indent=1)
    print(f"wrote {png}\nwrote {out}")
    return 0


def alpha_relu_stats_main(argv: Optional[Sequence[str]] = None) -> int:
    """``onmt-entmax-alpha-relu-stats``: per-step output sum (self-normalization) and zeros per step."""
    with refusals("onmt-entmax-alpha-relu-stats"):
        return _alpha_relu_stats(argv)


def _alpha_relu_stats(argv: Optional[Sequence[str]]) -> int:
    args, models = _parse_models("onmt-entmax-alpha-relu-stats", alpha_relu_stats_main.__doc__, argv,
                                 ("output_sums.png", "zero_shares.png", "alpha_relu_stats.json"))
    stats = {}
    for name, model, vocabs in models:
        st = StepStats()
        run(model, vocabs, args.src, args.tgt, lambda fb, st=st: st.add(fb.log_probs, fb.tgt_mask),
            batch_size=args.batch_size, attention=False)
        stats[name] = st
        print(format_summary(name, st.summary()))
    sums_png = plot_sums({n: s.sums for n, s in stats.items()}, os.path.join(args.out_dir, "output_sums.png"))
    zeros_png = plot_zero_shares(stats, os.path.join(args.out_dir, "zero_shares.png"))
    out = os.path.join(args.out_dir, "alpha_relu_stats.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({n: s.summary() for n, s in stats.items()}, f, indent=1)
    print(f"wrote {sums_png}\nwrote {zeros_png}\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit({"head_diversity": head_diversity_main, "alpha_relu_stats": alpha_relu_stats_main}[sys.argv.pop(1)]())
