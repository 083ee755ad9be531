"""Translator hooks: certificates, analyses, n-best with fewer hypotheses, JSON report, summary.

The wrappers of these upstream functions (rows of ``onmt_entmax.onmt.patches``, which installs them):
- ``Translator.from_opt``: resolves a DecodingConfig from the translate opt and the checkpoint.
- ``Translator._translate_batch_with_strategy``: attaches a BeamRecord (certificate tracker) to
  the beam, then runs the per-sentence analyses once the beam search of the batch is done.
- ``Inference._translate``: remembers each batch's bucket (to restore input order), then writes
  the JSON lines, the heatmap, and logs the summary.
- ``TranslationBuilder.from_batch``: accepts fewer than n_best hypotheses per sentence.
- ``BeamSearchBase.advance``: input-feed RNN decoders return attention time-first; turn it
  batch-first so -attn_debug / -replace_unk / coverage penalties index the right axis.
- ``onmt.opts.translate_opts``: the decoding options (``options.add_decoding_options``).

The model's own log-probabilities (raw-probability ensembles passed through) are
``decoding.log_probs_hook``'s, the -inf beam search and ``coverage_wu`` ``decoding.beam_hooks``' (both
toolkits share them).
"""
from __future__ import annotations

from onmt_entmax.analysis.heatmap import attention_name
from onmt_entmax.analysis.records import DecodingRun, Sentence, decode_file, target_tokens
from onmt_entmax.decoding.beam_hooks import attach_record, fewer_than_n_best
from onmt_entmax.modules.models import member_transformations
from onmt_entmax.modules.models import warm_up_kernels_of as shared_warm_up
from onmt_entmax.options.decoding import DecodingConfig

from ..options import add_decoding_options
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
        translator = upstream(cls, model, vocabs, opt, model_opt, *args, **kwargs)
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


# --- n-best with fewer hypotheses -----------------------------------------------------------------
def _eos(builder) -> int:
    from onmt.constants import DefaultTokens

    return builder.vocabs["tgt"].lookup_token(DefaultTokens.EOS)


_from_batch = fewer_than_n_best(_eos)


# --- attention layout -----------------------------------------------------------------------------
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
