"""``eole predict`` for sparse models: -inf-correct beam search, certificates, n-best, analyses, report.

- The beam search hooks of ``onmt_entmax.decoding.beam_hooks`` (shared with OpenNMT-py 3.5.1, whose
  ``BeamSearchBase`` Eole's is) write -inf, not -65504 / -1e20 / -10000, where upstream forbids a
  token, never revive finished beams, never store a zero-probability hypothesis, stop when nothing with
  nonzero probability is left, and track the certificate: rows of ``onmt_entmax.eole.patches``
  (``beam.ROWS``).
- ``Inference.__init__``: the decoding options (``onmt_entmax.options.decoding``, fields of
  ``PredictConfig``) resolved against the model's output layer; the kernels' once-a-process set-up.
- ``Translator._predict_batch_with_strategy``: a certificate tracker on the beam; once the batch is
  decoded, one record per sentence with the analyses asked for (``analysis.records``), each sentence
  keyed by its line in the input file.
- ``Inference._predict``: the run's records, JSON lines, heatmap and summary at the end of the file.
- ``Inference.report_results`` / ``PredictionBuilder.from_batch``: sentences with fewer than ``n_best``
  hypotheses of nonzero probability (none at all: one empty line of score -inf keeps the output
  aligned with the input).
"""
from __future__ import annotations

from typing import Callable

import torch

from onmt_entmax.analysis.heatmap import attention_name
from onmt_entmax.analysis.records import DecodingRun, Sentence, decode_file, target_tokens
from onmt_entmax.decoding.beam_hooks import attach_record, fewer_than_n_best
from onmt_entmax.errors import ConfigError, EntmaxOptionError
from onmt_entmax.modules.models import member_transformations, warm_up_kernels_of
from onmt_entmax.options.decoding import DecodingConfig
from onmt_entmax.options.files import check_positions

from .scorer import EoleScorer

NEG_INF = float("-inf")


def decoding_config(config, model) -> DecodingConfig:
    """The analyses asked for, checked against the model's output layers (an ensemble's: each member's);
    a one-line ``ConfigError`` otherwise."""
    try:
        return DecodingConfig.from_opts(config, member_transformations(model))
    except ValueError as err:
        raise ConfigError(str(err)) from None


def position_limit(model) -> int | None:
    """Positions the model's sinusoidal position tables cover (the fewest; None: no table, no limit)."""
    from eole.modules.embeddings import PositionalEncoding

    rows = [m.pe.size(0) for m in model.modules() if isinstance(m, PositionalEncoding)]
    return min(rows) if rows else None


def wrap_inference_init(upstream: Callable) -> Callable:
    """``Inference.__init__``: the decoding options checked first (-src lines and -max_length within the
    model's position encoding too: ``check_positions``); with the model loaded, the kernels' once-a-process
    set-up (and a line saying so where Triton compiles them for this GPU)."""

    def __init__(self, model, vocabs, config, model_config, *args, **kwargs):
        cfg = decoding_config(config, model)  # bad options: fail before decoding
        try:
            check_positions(getattr(config, "src", None), getattr(config, "max_length", None), position_limit(model),
                            toolkit="Eole")
        except EntmaxOptionError as err:
            raise ConfigError(str(err)) from None
        upstream(self, model, vocabs, config, model_config, *args, **kwargs)
        self._entmax_cfg = cfg
        from eole.utils.logging import logger

        warm_up_kernels_of(model, logger.info)

    return __init__


# --- per batch and per file ----------------------------------------------------------------------------
def _config(predictor) -> DecodingConfig:
    cfg = getattr(predictor, "_entmax_cfg", None)
    if cfg is None:
        cfg = predictor._entmax_cfg = DecodingConfig()
    return cfg


def _sentence(predictor, cfg, batch, b, results, beam_rec, preds) -> Sentence:
    """Sentence b of the batch as the records want it; the placeholder of a sentence without any
    hypothesis of nonzero probability (score -inf, ``wrap_report_results``) is not a hypothesis."""
    pairs = [(p, s) for p, s in zip(preds, results["scores"][b]) if float(s) != NEG_INF]
    tracker = beam_rec.tracker if beam_rec is not None else None
    s = Sentence((batch["cid_line_number"][b],), [p for p, _ in pairs], [x for _, x in pairs],
                 tracker[b] if tracker is not None else None)
    if cfg.needs_scorer:
        s.scorer = EoleScorer(predictor, batch, b)
        src_ids = batch["src"][b, : int(batch["srclen"][b])]
        s.source = lambda: [predictor.vocabs["src"].ids_to_tokens[i] for i in src_ids.tolist()]
        if cfg.forced_support and "tgt" in batch:
            s.gold = [t for t in batch["tgt"][b, 1:].tolist() if t != predictor._tgt_pad_idx]
    return s


def wrap_predict_batch_with_strategy(upstream: Callable) -> Callable:
    """``Translator._predict_batch_with_strategy``: certificate tracker on the beam, records after it."""

    def _predict_batch_with_strategy(self, batch, decode_strategy):
        from eole.predict.beam_search import BeamSearchBase

        cfg = _config(self)
        beam_rec = attach_record(decode_strategy, BeamSearchBase, cfg.certificate)
        results = upstream(self, batch, decode_strategy)
        run = getattr(self, "_entmax_run", None)
        # (no line numbers: the sub-sentences Eole re-decodes at its ｟newline｠ tokens, recorded already)
        if run is not None and run.reporting and "cid_line_number" in batch:
            run.add_batch(results["predictions"],
                          lambda b, preds: _sentence(self, cfg, batch, b, results, beam_rec, preds),
                          decode_strategy.max_length)
        return results

    return _predict_batch_with_strategy


def wrap_predict(upstream: Callable) -> Callable:
    """``Inference._predict`` (one input file): the run's records, report and summary at the end."""

    def _predict(self, infer_iter, *args, **kwargs):
        run = DecodingRun(_config(self), target_tokens(self), self._tgt_eos_idx[0], self.n_best, self._log,
                          attention=attention_of(self.model))
        return decode_file(self, run, lambda: upstream(self, infer_iter, *args, **kwargs))

    return _predict


def attention_of(model) -> str:
    """Which attention the heatmap and the attended-token count read: Eole's Transformer decoder returns
    head 1 of its last layer's context attention (``MultiHeadedAttention.heads`` of them), an RNN its global one."""
    layers = getattr(getattr(model, "decoder", None), "transformer_layers", None)
    if layers:
        return attention_name(len(layers), getattr(getattr(layers[-1], "context_attn", None), "heads", None))
    return attention_name()


def wrap_report_results(upstream: Callable) -> Callable:
    """``Inference.report_results``: upstream re-sorts each sentence's hypotheses and, meeting a sentence
    with none, replaces every list by the strategy's; a sentence whose support was emptied by the
    constraints gets one placeholder (EOS, score -inf) first."""

    def report_results(self, gold_score, gold_log_probs, batch, batch_size, decode_strategy, estim):
        eos = self._tgt_eos_idx[0]
        for b, preds in enumerate(decode_strategy.predictions):
            if not preds:
                decode_strategy.predictions[b].append(torch.tensor([eos]))
                decode_strategy.scores[b].append(torch.tensor(NEG_INF))
                decode_strategy.attention[b].append([])
                decode_strategy.n_text_tokens[b].append(0)
        return upstream(self, gold_score, gold_log_probs, batch, batch_size, decode_strategy, estim)

    return report_results


from_batch = fewer_than_n_best(lambda builder: builder.tgt_eos_idx[0])
