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

from onmt_entmax.analysis.heatmap import attention_name
from onmt_entmax.analysis.records import DecodingRun, Sentence, decode_file, target_tokens
from onmt_entmax.decoding.beam_hooks import _coverage_wu, attach_record, fewer_than_n_best
from onmt_entmax.decoding.ensemble import returns_log_probs
from onmt_entmax.modules.models import member_transformations
from onmt_entmax.modules.models import warm_up_kernels_of as shared_warm_up

from .beam import _wrap
from .ensemble import apply as apply_ensemble
from .beam import apply as apply_beam
from .options import DecodingConfig, add_decoding_options
from .scorer import SentenceScorer

NEG_INF = float("-inf")


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
    """``modules.models.warm_up_kernels_of`` with OpenNMT-py's logger saying when the kernels compile."""
    from onmt.utils.logging import logger

    return shared_warm_up(model, logger.info)


# --- per batch ------------------------------------------------------------------------------------
_target_tokens = target_tokens


def _new_run(translator) -> DecodingRun:
    scorer = translator.global_scorer
    # upstream divides a finished hypothesis' log p by length_penalty(len(alive_seq) + 1) at the step it ends:
    # its step counter includes BOS, so n tokens and EOS give n + 2
    penalty = (lambda n: scorer.length_penalty(n + 2, alpha=scorer.alpha)) if scorer.has_len_pen else None
    return DecodingRun(_config(translator), _target_tokens(translator), translator._tgt_eos_idx, translator.n_best,
                       translator._log, attention=attention_of(translator.model), length_penalty=penalty,
                       coverage_penalty=bool(scorer.has_cov_pen))


def attention_of(model) -> str:
    """Which attention the heatmap and the attended-token count read: a Transformer returns one head
    (head 1, i.e. index 0) of its last decoder layer's context attention, an RNN its global attention."""
    layers = getattr(getattr(model, "decoder", None), "transformer_layers", None)
    if layers:
        return attention_name(len(layers), getattr(getattr(layers[-1], "context_attn", None), "head_count", None))
    return attention_name()


def _text(translator, ids) -> str:
    return DecodingRun(DecodingConfig(), _target_tokens(translator), translator._tgt_eos_idx, 1).text(ids)


def _sentence(translator, cfg, run, batch, b, results, beam_rec, preds) -> Sentence:
    """Sentence b of the batch as the records want it (``preds``: its hypotheses as token lists)."""
    tracker = beam_rec.tracker if beam_rec is not None else None
    s = Sentence((run.bucket, int(batch["ind_in_bucket"][b])), preds, results["scores"][b],
                 tracker[b] if tracker is not None else None)
    lines = batch.get("cid_line_number")  # upstream's own line numbers (0-based): the record ids
    s.line = None if lines is None else int(lines[b]) + 1
    if "tgt" in batch and results.get("gold_score") is not None:
        s.gold_score = float(results["gold_score"][b])
    if cfg.needs_scorer:
        s.scorer = SentenceScorer(translator, batch, b)
        src_ids = batch["src"][b, : int(batch["srclen"][b]), 0]
        s.source = lambda: [translator.vocabs["src"].ids_to_tokens[i] for i in src_ids.tolist()]
        if cfg.forced_support and "tgt" in batch:
            s.gold = [t for t in batch["tgt"][b, 1:, 0].tolist() if t != translator._tgt_pad_idx]
    return s


def _translate_batch_with_strategy(upstream):
    def wrapper(self, batch, decode_strategy, *args, **kwargs):
        cfg = _config(self)
        from onmt.translate.beam_search import BeamSearchBase

        beam_rec = attach_record(decode_strategy, BeamSearchBase, cfg.certificate)
        results = upstream(self, batch, decode_strategy, *args, **kwargs)
        run = getattr(self, "_entmax_run", None)
        if run is not None and run.reporting:
            run.add_batch(results["predictions"],
                          lambda b, preds: _sentence(self, cfg, run, batch, b, results, beam_rec, preds),
                          decode_strategy.max_length)
        return results

    return wrapper


# --- whole file -----------------------------------------------------------------------------------
def _translate(upstream):
    def wrapper(self, infer_iter, *args, **kwargs):
        run = _new_run(self)
        run.bucket = 0

        def tracked(it):
            for batch, bucket_idx in it:
                run.bucket = bucket_idx
                yield batch, bucket_idx

        source = infer_iter
        if not isinstance(infer_iter, list):
            source = _IterProxy(infer_iter, tracked(infer_iter))
        return decode_file(self, run, lambda: upstream(self, source, *args, **kwargs))

    return wrapper


class _IterProxy:
    """Iterate through ``gen`` while exposing the wrapped iterator's attributes (bucket_size)."""

    def __init__(self, inner, gen):
        self._inner, self._gen = inner, gen

    def __iter__(self):
        return self._gen

    def __getattr__(self, name):
        return getattr(self._inner, name)


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
        if generator is not None and returns_log_probs(generator) \
                and dim in (-1, input.dim() - 1) and not args and not kwargs:
            return input
        return current(input, dim, *args, **kwargs)

    return log_softmax


# --- n-best with fewer hypotheses -----------------------------------------------------------------
def _eos(builder) -> int:
    from onmt.constants import DefaultTokens

    return builder.vocabs["tgt"].lookup_token(DefaultTokens.EOS)


_from_batch = fewer_than_n_best(_eos)


# --- attention layout and coverage ----------------------------------------------------------------
def _advance(upstream):
    def wrapper(self, log_probs, attn):
        if attn is not None and attn.dim() == 3 and attn.size(0) != log_probs.size(0) \
                and attn.size(1) == log_probs.size(0):
            attn = attn.transpose(0, 1)  # (1, B*beam, S) time-first -> (B*beam, 1, S)
        return upstream(self, log_probs, attn)

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
    _wrap(penalties.PenaltyBuilder, "coverage_wu", _coverage_wu)  # (decoding.beam_hooks)
    up = translator.Inference.__dict__["from_opt"]
    if not getattr(up.__func__, "_onmt_entmax_decoding", False):
        new = functools.wraps(up.__func__)(_from_opt(up))
        new._onmt_entmax_decoding = True
        translator.Inference.from_opt = classmethod(new)
    _patch_module_function(onmt.opts, "translate_opts", _translate_opts)
    bin_translate = sys.modules.get("onmt.bin.translate")
    if bin_translate is not None:
        bin_translate.translate_opts = onmt.opts.translate_opts
