"""Ensembles that average raw probabilities with each member's own mapping (Peters et al. 2019).

Upstream ``EnsembleGenerator`` averages logits, or with ``-avg_raw_probs`` returns
log(mean exp(logits)) which the translator then renormalises: it never averages the members'
probabilities. Here, when ``-avg_raw_probs`` is given or any member has a sparse output layer,
the ensemble returns log((1/M) sum_m p_m) with p_m = the member's own mapping (sparsemax,
entmax, alpha-ReLU, softmax), -inf where every member gives 0; the translator's log-prob hook
passes it through unchanged. Dense ensembles without ``-avg_raw_probs`` keep stock behaviour.
Members must share the source and target vocabularies (checked with a clear message).

Upstream's ``EnsembleDecoder`` stacks the members' attention at every step to average it. OpenNMT-py
3.5.1's input-feed RNN decoder (``decoder_type rnn``, ``input_feed 1``: the default) returns it as
(target step, batch, source), the RNN decoder without input feed and the Transformer as (batch,
target step, source): an ensemble mixing the first with the others fails at its first step (``stack
expects each tensor to be equal size``), so it is refused as its members load (``ATTENTION_LAYOUTS``).
Each member runs its own encoder and decoder otherwise, so other architectures mix.
"""
from __future__ import annotations

import functools

from onmt_entmax.decoding import check_same_vocab
from onmt_entmax.decoding.ensemble import average_raw_probs, averaging_forward, check_same_attention_layout
from onmt_entmax.errors import EntmaxOptionError


def _ensemble_forward(upstream):
    return averaging_forward(upstream, ValueError)


def _vocab_tokens(vocab) -> list:
    return list(getattr(vocab, "ids_to_tokens", vocab))


ATTENTION_LAYOUTS = {"InputFeedRNNDecoder": "(target step, batch, source)",
                     "StdRNNDecoder": "(batch, target step, source)",
                     "TransformerDecoder": "(batch, target step, source)"}  # what each returns at a decoding step


def attention_layout(model) -> str | None:
    """The layout of the attention a loaded model's decoder returns; None for a decoder not in the table."""
    return ATTENTION_LAYOUTS.get(type(getattr(model, "decoder", None)).__name__)


def _load_test_model(upstream):
    """Check every member's vocabularies as it loads, then switch the generator to raw probs."""

    def wrapper(opt, device_id=0, *args, **kwargs):
        import onmt.model_builder as mb

        single = mb.load_test_model
        loaded: list = []

        @functools.wraps(single)
        def capture(opt_, device_id_=0, model_path=None):
            vocabs, model, model_opt = single(opt_, device_id_, model_path=model_path)
            loaded.append((model_path, vocabs, attention_layout(model), type(model.decoder).__name__))
            names = [p for p, _, _, _ in loaded]
            try:
                for side in ("src", "tgt"):
                    check_same_vocab([_vocab_tokens(v[side]) for _, v, _, _ in loaded], names=names,
                                     what=f"{'source' if side == 'src' else 'target'} vocabulary")
                check_same_attention_layout([layout for _, _, layout, _ in loaded],
                                            [f"{p}'s {decoder}" for p, _, _, decoder in loaded])
            except ValueError as err:
                raise EntmaxOptionError(f"-model: {err}") from None
            return vocabs, model, model_opt

        mb.load_test_model = capture
        try:
            vocabs, model, model_opt = upstream(opt, device_id, *args, **kwargs)
        finally:
            mb.load_test_model = single
        average_raw_probs(model, bool(getattr(opt, "avg_raw_probs", False)))
        return vocabs, model, model_opt

    return wrapper

