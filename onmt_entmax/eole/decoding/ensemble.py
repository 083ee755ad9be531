"""``eole predict -model_path A B ...``: ensembles that average raw probabilities, as ``onmt_translate``'s.

Upstream ``EnsembleGenerator`` averages the members' logits, or with ``avg_raw_probs`` returns
log(mean_m exp(logits_m)), which ``log_softmax`` then renormalises: neither is the average of the members'
probabilities, and for sparse members both give every token nonzero probability. With a sparse member,
or with ``avg_raw_probs``, the ensemble here returns log((1/M) sum_m p_m), p_m = member m's own mapping,
-inf where every member gives 0 (``onmt_entmax.decoding.ensemble``); the translator's log-prob hook
passes it through. Dense ensembles without ``avg_raw_probs`` keep Eole's behaviour. The members must
share the source and the target vocabulary: refused in one line naming ``model_path`` (upstream compares
the source vocabularies with an ``assert`` and never the target ones).

``EnsembleDecoder`` inherits ``DecoderBase``'s no-op ``_init_cache`` / ``_extend_cache`` /
``_disable_cache``, so a Transformer member's KV cache is never set up and Eole 0.6.4's first decoding
step of any ensemble with one fails (``cache_seqlens`` is None); the three are handed to every member.
"""
from __future__ import annotations

import json
import os
from typing import Callable

from onmt_entmax.decoding import check_same_vocab
from onmt_entmax.decoding.ensemble import average_raw_probs, averaging_forward
from onmt_entmax.errors import ConfigError

from ..model.loading import check_model_folder


def wrap_generator_forward(upstream: Callable) -> Callable:
    """``EnsembleGenerator.forward(hidden, attn, src_map)``: the average of the members' probabilities."""
    return averaging_forward(upstream, lambda message: ConfigError(f"model_path: {message}"))


def _vocabularies(model_path: str):
    """The (source, target) token lists of a model directory's ``vocab.json``, None where it has none."""
    path = os.path.join(model_path, "vocab.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        vocab = json.load(f)
    return vocab.get("src"), vocab.get("tgt")


def check_members(model_paths) -> None:
    """Every member's folder readable (``loading.check_model_folder``) and its source and target vocabulary
    the same, token for token; else a ``ConfigError``."""
    for path in model_paths:
        check_model_folder(str(path))
    found = [(str(p), _vocabularies(str(p))) for p in model_paths]
    found = [(p, v) for p, v in found if v is not None]
    for side, what in ((0, "source vocabulary"), (1, "target vocabulary")):
        members = [(p, v[side]) for p, v in found if v[side] is not None]
        try:
            check_same_vocab([v for _, v in members], names=[p for p, _ in members], what=what)
        except ValueError as err:
            raise ConfigError(f"model_path: {err}") from None


def wrap_for_inference(upstream: Callable) -> Callable:
    """``EnsembleModel.for_inference(config, device_id)`` (a classmethod): the members' vocabularies
    checked first; the ensemble's generator then averages raw probabilities when a member is sparse or
    ``avg_raw_probs`` is set."""

    def for_inference(cls, config, device_id=0, *args, **kwargs):
        check_members(config.model_path)
        model, vocabs, model_config = upstream(cls, config, device_id, *args, **kwargs)
        average_raw_probs(model, bool(getattr(config, "avg_raw_probs", False)))
        return model, vocabs, model_config

    return for_inference


def _member_inputs(value, i: int):
    """Member i's part of an ensemble input (a list or tuple a member: embeddings, encoder outputs)."""
    return value[i] if isinstance(value, (list, tuple)) else value


def init_members_cache(upstream: Callable) -> Callable:
    """``EnsembleDecoder._init_cache(emb, pad_mask, enc_out)``: each member's with its embeddings and
    encoder output."""

    def _init_cache(self, emb, pad_mask, enc_out=None):
        for i, decoder in enumerate(self.model_decoders):
            decoder._init_cache(_member_inputs(emb, i), pad_mask,
                                enc_out=None if enc_out is None else _member_inputs(enc_out, i))

    return _init_cache


def extend_members_cache(upstream: Callable) -> Callable:
    def _extend_cache(self, *args, **kwargs):
        for decoder in self.model_decoders:
            decoder._extend_cache(*args, **kwargs)

    return _extend_cache


def disable_members_cache(upstream: Callable) -> Callable:
    def _disable_cache(self):
        for decoder in self.model_decoders:
            decoder._disable_cache()

    return _disable_cache
