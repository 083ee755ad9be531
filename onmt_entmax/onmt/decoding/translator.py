"""Translator hooks: certificates, analyses, n-best with fewer hypotheses, JSON report, summary.

Wrapped upstream functions (each keeps the original as ``__wrapped__``):
- ``Translator.from_opt``: resolves a DecodingConfig from the translate opt and the checkpoint.
- ``Translator._translate_batch_with_strategy``: attaches a BeamRecord (certificate tracker) to
  the beam, then runs the per-sentence analyses once the beam search of the batch is done.
- ``Inference._translate``: remembers each batch's bucket (to restore input order), then writes
  the JSON lines, the heatmap, and logs the summary.
- ``TranslationBuilder.from_batch``: accepts fewer than n_best hypotheses per sentence.
- ``BeamSearchBase.advance``: input-feed RNN decoders return attention time-first; turn it
  batch-first so -attn_debug / -replace_unk / coverage penalties index the right axis.
- ``PenaltyBuilder.coverage_wu``: log(min(coverage, 1)) is -inf for a source word with zero
  coverage (sparse attention, or padding); floor coverage at the dtype's tiny so the penalty is
  finite (values where upstream is finite are unchanged) and no inf - inf = NaN appears.
"""
from __future__ import annotations

import contextvars
import functools
import math

import torch

from onmt_entmax import ops
from onmt_entmax.analysis import (
    SparsityStats,
    attention_heatmap,
    empty_beats_beam,
    format_summary,
    summarize,
    support_sets,
    write_jsonl,
)
from onmt_entmax.decoding import CertificateTracker, SupportTooLarge, enumerate_support, exact_search

from ..model.surgery import has_sparse_transformation
from .beam import BeamRecord, _wrap
from .ensemble import LOG_PROBS_OUT, member_transformations
from .ensemble import apply as apply_ensemble
from .beam import apply as apply_beam
from .options import DecodingConfig, add_decoding_options
from .scorer import SentenceScorer, trim_eos

NEG_INF = float("-inf")


class _Run:
    """Per-``_translate`` state kept on the translator."""

    def __init__(self):
        self.bucket = 0
        self.records: list = []  # (order key, record, heatmap payload or None)
        self.stats = SparsityStats()


def _config(translator) -> DecodingConfig:
    cfg = getattr(translator, "_entmax_cfg", None)
    if cfg is None:
        cfg = translator._entmax_cfg = DecodingConfig()
    return cfg


# --- Translator.from_opt ---------------------------------------------------------------------------
def _from_opt(upstream):
    def wrapper(cls, model, vocabs, opt, model_opt, *args, **kwargs):
        cfg = DecodingConfig.from_opts(opt, member_transformations(model))  # bad options: fail before decoding
        translator = upstream.__func__(cls, model, vocabs, opt, model_opt, *args, **kwargs)
        translator._entmax_cfg = cfg
        warm_up_kernels_of(model)
        return translator

    return wrapper


def warm_up_kernels_of(model) -> bool:
    """With the model loaded, run the kernels' once-a-process set-up on its device (`ops.warm_up_kernels`:
    ~0.5 s on the GPU hosts, otherwise paid in the first beam step, inside onmt_translate's
    -report_time) when a module of the model has a sparse transformation (softmax's decoding runs no
    kernel of ours). On a GPU whose kernels Triton has not compiled yet, say so first: the first
    batches compile them. True when it ran."""
    if not has_sparse_transformation(model):
        return False
    param = next(model.parameters(), None)
    if param is None:
        return False
    cache = ops.cold_kernel_cache(param.device)
    if cache is not None:
        from onmt.utils.logging import logger

        logger.info("compiling the sparse kernels for this GPU as decoding first meets them (once: Triton "
                    "caches them in %s); the first batches take longer", cache)
    return ops.warm_up_kernels(param.device)


# --- per batch ------------------------------------------------------------------------------------
def _target_tokens(translator) -> list:
    """The target vocabulary as a list, built once per translator: pyonmttok's ``ids_to_tokens``
    builds a new list of every token at each access (0.5 ms a sentence on a 10k vocabulary, a third
    of a sparse model's decoding time on an H100 host before this)."""
    voc = getattr(translator, "_entmax_tgt_tokens", None)
    if voc is None:
        voc = translator._entmax_tgt_tokens = list(translator._tgt_vocab.ids_to_tokens)
    return voc


def _tokens(translator, ids) -> list:
    voc = _target_tokens(translator)
    return [voc[i] if i < len(voc) else str(i) for i in ids]


def _text(translator, ids) -> str:
    return " ".join(_tokens(translator, trim_eos(ids, translator._tgt_eos_idx)))


def _certificate_fields(cert, cfg, scores) -> dict:
    """Peters et al.'s criterion; ``optimal`` only where summed log-probs bound completions."""
    optimal = None
    if cfg.plain_scores and not cfg.unnormalised:
        optimal = cert.optimal(scores[0]) if scores else cert.exhaustive
    return {"certified": cert.exhaustive, "pruned_steps": cert.pruned_steps, "max_candidates": cert.max_support,
            "optimal": optimal}


def _best_hypothesis_fields(translator, cfg, run, sc, batch, b, best):
    """Sparsity statistics, empty-string check and heatmap payload, from one forced pass over ``best``."""
    eos = translator._tgt_eos_idx
    tokens = best or [eos]
    lp, attn = sc.sequence(tokens, with_attn=True)
    rec: dict = {}
    if cfg.sparsity_stats:
        rec.update(run.stats.add(lp, attn))
    if cfg.empty_check:  # log p(EOS | BOS, x) against log p(beam hypothesis | x), no length penalty
        beam_lp = float(lp.gather(1, torch.tensor(tokens, device=lp.device).view(-1, 1)).sum()) if best else NEG_INF
        empty_lp = float(sc([()])[0, eos])
        rec.update(empty_log_prob=empty_lp, beam_log_prob=beam_lp, empty_wins=empty_beats_beam(empty_lp, beam_lp))
    heat = None
    if cfg.attn_heatmap and attn is not None:
        src_voc = translator.vocabs["src"].ids_to_tokens
        src_ids = batch["src"][b, : int(batch["srclen"][b]), 0].tolist()
        heat = (attn.cpu(), [src_voc[i] for i in src_ids], _tokens(translator, tokens))
    return rec, heat


def _forced_fields(translator, cfg, sc, batch, b) -> dict:
    """Forced decoding of the reference: the support at each step (Figure 2)."""
    gold = [t for t in batch["tgt"][b, 1:, 0].tolist() if t != translator._tgt_pad_idx]
    if not gold:
        return {}
    lp, _ = sc.sequence(gold, with_attn=False)
    steps = support_sets(lp, gold, _target_tokens(translator), max_support=cfg.forced_max_support)
    gold_lp = sum(math.log(s.gold_prob) if s.gold_prob > 0 else NEG_INF for s in steps)
    return {"forced": [s.to_dict() for s in steps], "gold_log_prob": float(gold_lp)}


def _enumeration_field(translator, cfg, sc, max_length) -> dict:
    try:
        sup = enumerate_support(sc, eos=translator._tgt_eos_idx, max_length=max_length, cap=cfg.enumerate_cap)
    except SupportTooLarge as err:
        return {"error": str(err)}
    return {"size": len(sup), "mass": sup.mass,
            "sequences": [{"text": _text(translator, list(t)), "prob": math.exp(s)} for t, s in sup.sequences]}


def _exact_field(translator, cfg, sc, max_length, best) -> dict:
    eos = translator._tgt_eos_idx
    try:
        found = exact_search(sc, eos=eos, max_length=max_length, max_expansions=cfg.exact_max_expansions)
    except ValueError as err:  # SupportTooLarge, or unnormalised scores
        return {"error": str(err)}
    tokens, score = found[0] if found else ((), NEG_INF)
    return {"text": _text(translator, list(tokens)), "score": score, "agrees": list(tokens) == trim_eos(best, eos)}


def _listed_predictions(predictions: list) -> list:
    """[sentence][hypothesis] token lists from upstream's per-hypothesis (GPU) tensors, read back
    in one transfer (one device sync per hypothesis otherwise)."""
    flat = [p for hyps in predictions for p in hyps]
    if not flat:
        return [[] for _ in predictions]
    values = torch.cat([p.reshape(-1) for p in flat]).tolist()
    out, start = [], 0
    for hyps in predictions:
        out.append([])
        for p in hyps:
            out[-1].append(values[start:start + p.numel()])
            start += p.numel()
    return out


def _sentence_record(translator, cfg, run, batch, b, results, beam_rec, max_length, preds):
    """Everything reported about sentence b of the batch once its beam search is over (``preds``:
    its hypotheses as token lists)."""
    scores = [float(s) for s in results["scores"][b]]
    rec: dict = {"n_best": translator.n_best, "n_hyps": len(preds),
                 "hypotheses": [{"text": _text(translator, p), "score": s} for p, s in zip(preds, scores)]}
    if beam_rec is not None and beam_rec.tracker is not None:
        rec.update(_certificate_fields(beam_rec.tracker[b], cfg, scores))
    if not cfg.needs_scorer:
        return rec, None
    sc = SentenceScorer(translator, batch, b)
    best = preds[0] if preds else []
    heat = None
    if cfg.sparsity_stats or cfg.empty_check or cfg.attn_heatmap:
        fields, heat = _best_hypothesis_fields(translator, cfg, run, sc, batch, b, best)
        rec.update(fields)
    if cfg.forced_support and "tgt" in batch:
        rec.update(_forced_fields(translator, cfg, sc, batch, b))
    if cfg.enumerate_support:
        rec["support"] = _enumeration_field(translator, cfg, sc, max_length)
    if cfg.exact_search:
        rec["exact"] = _exact_field(translator, cfg, sc, max_length, best)
    return rec, heat


def _translate_batch_with_strategy(upstream):
    def wrapper(self, batch, decode_strategy, *args, **kwargs):
        cfg = _config(self)
        from onmt.translate.beam_search import BeamSearchBase

        beam_rec = None
        if isinstance(decode_strategy, BeamSearchBase):
            tracker = CertificateTracker(decode_strategy.batch_size) if cfg.certificate else None
            beam_rec = BeamRecord(tracker, decode_strategy.n_best)
            decode_strategy._entmax = beam_rec
        results = upstream(self, batch, decode_strategy, *args, **kwargs)
        run = getattr(self, "_entmax_run", None)
        if run is None or not (cfg.active or cfg.sparse_output):
            return results
        max_length = decode_strategy.max_length
        with torch.no_grad():
            listed = _listed_predictions(results["predictions"])
            for b in range(len(batch["srclen"])):
                rec, heat = _sentence_record(self, cfg, run, batch, b, results, beam_rec, max_length, listed[b])
                key = (run.bucket, int(batch["ind_in_bucket"][b]))
                run.records.append((key, rec, heat))
        return results

    return wrapper


# --- whole file -----------------------------------------------------------------------------------
def _translate(upstream):
    def wrapper(self, infer_iter, *args, **kwargs):
        cfg = _config(self)
        run = self._entmax_run = _Run()

        def tracked(it):
            for batch, bucket_idx in it:
                run.bucket = bucket_idx
                yield batch, bucket_idx

        source = infer_iter
        if not isinstance(infer_iter, list):
            source = _IterProxy(infer_iter, tracked(infer_iter))
        try:
            out = upstream(self, source, *args, **kwargs)
        finally:
            self._entmax_run = None
        if run.records and (cfg.active or cfg.sparse_output):
            _finish(self, cfg, run)
        return out

    return wrapper


class _IterProxy:
    """Iterate through ``gen`` while exposing the wrapped iterator's attributes (bucket_size)."""

    def __init__(self, inner, gen):
        self._inner, self._gen = inner, gen

    def __iter__(self):
        return self._gen

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _finish(translator, cfg, run) -> None:
    run.records.sort(key=lambda r: r[0])
    records = []
    for i, (_, rec, heat) in enumerate(run.records):
        records.append({"id": i + 1, **rec})
        if cfg.attn_heatmap and i + 1 == cfg.heatmap_sentence:
            if heat is None:
                translator._log(f"[entmax] no attention available for sentence {i + 1}: heatmap not written")
            else:
                attn, src, tgt = heat
                attention_heatmap(attn, src, tgt, cfg.attn_heatmap, title=f"sentence {i + 1}")
                translator._log(f"[entmax] attention heatmap of sentence {i + 1} written to {cfg.attn_heatmap}")
    if cfg.attn_heatmap and cfg.heatmap_sentence > len(records):
        translator._log(f"[entmax] -heatmap_sentence {cfg.heatmap_sentence} > {len(records)} sentences: "
                        "no heatmap written")
    short = [r for r in records if r["n_hyps"] < r["n_best"]]
    for r in short[:10]:
        translator._log(f"[entmax] sentence {r['id']}: {r['n_hyps']} of n_best={r['n_best']} hypotheses have "
                        "nonzero probability; only those are written")
    if len(short) > 10:
        translator._log(f"[entmax] ... and {len(short) - 10} more sentences with fewer than n_best hypotheses "
                        "(see -entmax_report)")
    if cfg.entmax_report:
        write_jsonl(records, cfg.entmax_report)
    translator._entmax_records = records
    translator._log(format_summary(summarize(records)))
    if cfg.sparsity_stats and run.stats.tokens:
        s = run.stats.summary()
        translator._log(f"[entmax] per-step output probability sum: mean {s['prob_sum_mean']:.4f}, "
                        f"std {s['prob_sum_std']:.4f} over {s['target_tokens']} target tokens")


# --- raw-probability ensembles pass through the log-prob step -------------------------------------
_MODEL = contextvars.ContextVar("onmt_entmax_decoding_model", default=None)


def _decode_and_generate(upstream):
    """Make the model being decoded visible to the translator's ``log_softmax``."""

    def wrapper(self, *args, **kwargs):
        token = _MODEL.set(self.model)
        try:
            return upstream(self, *args, **kwargs)
        finally:
            _MODEL.reset(token)

    return wrapper


def _ensemble_passthrough(current):
    """Wrap the translator's ``log_softmax`` (the integration's model-own log-probs, or stock):
    a raw-probability ensemble already returns log((1/M) sum_m p_m), which must not be mapped
    again (log_softmax would renormalise alpha-ReLU scores; entmax(log p) is not log p)."""

    def log_softmax(input, dim=-1, *args, **kwargs):  # noqa: A002 (upstream signature)
        model = _MODEL.get()
        # (the generator's own __dict__: a getattr with a default raises inside nn.Module, every step)
        children = getattr(model, "_modules", None)
        generator = children.get("generator") if children is not None else getattr(model, "generator", None)
        if generator is not None and vars(generator).get(LOG_PROBS_OUT, False) \
                and dim in (-1, input.dim() - 1) and not args and not kwargs:
            return input
        return current(input, dim, *args, **kwargs)

    return log_softmax


# --- n-best with fewer hypotheses -----------------------------------------------------------------
def _from_batch(upstream):
    """Sentences with fewer than n_best nonzero hypotheses: build with placeholders, then trim.

    A sentence with none at all keeps one empty hypothesis of score -inf, so that the output file
    stays line-aligned with the input (the summary and the JSON report say n_hyps = 0).
    """

    def wrapper(self, translation_batch):
        preds, scores, attn = (translation_batch[k] for k in ("predictions", "scores", "attention"))
        counts = [len(p) for p in preds]
        if all(c >= self.n_best for c in counts):
            return upstream(self, translation_batch)
        from onmt.constants import DefaultTokens

        eos = self.vocabs["tgt"].lookup_token(DefaultTokens.EOS)
        for b, c in enumerate(counts):
            for _ in range(self.n_best - c):
                preds[b].append(torch.tensor([eos]))
                scores[b].append(torch.tensor(NEG_INF))
                attn[b].append(torch.zeros(1, int(translation_batch["batch"]["srclen"][b])))  # one EOS step
            if translation_batch.get("alignment") and translation_batch["alignment"][b]:
                translation_batch["alignment"][b] += [None] * (self.n_best - c)
        out = upstream(self, translation_batch)
        for t, c in zip(out, counts):
            keep = max(c, 1)
            t.pred_sents, t.pred_scores = t.pred_sents[:keep], t.pred_scores[:keep]
            if isinstance(t.attns, list):
                t.attns = t.attns[:keep]
        return out

    return wrapper


# --- attention layout and coverage ----------------------------------------------------------------
def _advance(upstream):
    def wrapper(self, log_probs, attn):
        if attn is not None and attn.dim() == 3 and attn.size(0) != log_probs.size(0) \
                and attn.size(1) == log_probs.size(0):
            attn = attn.transpose(0, 1)  # (1, B*beam, S) time-first -> (B*beam, 1, S)
        return upstream(self, log_probs, attn)

    return wrapper


def _coverage_wu(upstream):
    def wrapper(self, cov, beta=0.0):
        return upstream(self, cov.clamp_min(torch.finfo(cov.dtype).tiny), beta)

    return wrapper


def _translate_opts(upstream):
    def wrapper(parser, *args, **kwargs):
        out = upstream(parser, *args, **kwargs)
        add_decoding_options(parser)
        return out

    return wrapper


def _patch_module_function(module, name: str, make) -> None:
    fn = getattr(module, name)
    if getattr(fn, "_onmt_entmax_decoding", False):
        return
    wrapper = functools.wraps(fn)(make(fn))
    wrapper._onmt_entmax_decoding = True
    setattr(module, name, wrapper)


def apply() -> None:
    """Install every decoding hook (idempotent)."""
    import sys

    import onmt.opts
    from onmt.translate import beam_search, penalties, translation, translator

    apply_beam()
    apply_ensemble()
    _wrap(translator.Inference, "_decode_and_generate", _decode_and_generate)
    _patch_module_function(translator, "log_softmax", _ensemble_passthrough)
    _wrap(translator.Translator, "_translate_batch_with_strategy", _translate_batch_with_strategy)
    _wrap(translator.Inference, "_translate", _translate)
    _wrap(translation.TranslationBuilder, "from_batch", _from_batch)
    _wrap(beam_search.BeamSearchBase, "advance", _advance)
    _wrap(penalties.PenaltyBuilder, "coverage_wu", _coverage_wu)
    up = translator.Inference.__dict__["from_opt"]
    if not getattr(up.__func__, "_onmt_entmax_decoding", False):
        new = functools.wraps(up.__func__)(_from_opt(up))
        new._onmt_entmax_decoding = True
        translator.Inference.from_opt = classmethod(new)
    _patch_module_function(onmt.opts, "translate_opts", _translate_opts)
    bin_translate = sys.modules.get("onmt.bin.translate")
    if bin_translate is not None:
        bin_translate.translate_opts = onmt.opts.translate_opts
