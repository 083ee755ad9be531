"""``training.rnn_cuda_graphs`` in Eole: the input-feed RNN decoder's training steps as CUDA graphs.

As in the OpenNMT-py adapter, over Eole's loop ``InputFeedRNNDecoder._run_forward_pass(emb, enc_out,
src_pad_mask)`` (``onmt_entmax.training.cuda_graphs.DecoderGraphs`` says why the loss sees the same numbers):
the target embeddings (computed by the model, dropout included) are padded with zeros to a multiple
of 4 steps, the source to a multiple of 8 positions, the pad mask with True there (-inf scores: weight
exactly 0). Eole stacks attention as (B, T, S).
"""
from __future__ import annotations

import logging
from typing import Callable

import torch

from onmt_entmax.errors import ConfigError
from onmt_entmax.training.cuda_graphs import S_STEP, DecoderGraphs, attach, eager_loop, pad_to, unreplayable


def check(config) -> None:
    """A run with training.rnn_cuda_graphs: what its graphs cannot replay, refused by name."""
    training, model = getattr(config, "training", None), getattr(config, "model", None)
    if not getattr(training, "rnn_cuda_graphs", False) or model is None:  # no model section: nothing to replay here
        return
    decoder = getattr(model, "decoder", None)
    refusals = [
        (getattr(decoder, "decoder_type", None) != "rnn", f"model.decoder.decoder_type "
                                                          f"{getattr(decoder, 'decoder_type', None)}"),
        (not getattr(model, "input_feed", 1), "model.input_feed 0"),
        (getattr(decoder, "rnn_type", "LSTM") != "LSTM",
         f"model.decoder.rnn_type {getattr(decoder, 'rnn_type', None)}"),
        (bool(getattr(decoder, "coverage_attn", False)), "model.decoder.coverage_attn"),
        (getattr(decoder, "context_gate", None) is not None, f"model.decoder.context_gate "
                                                             f"{getattr(decoder, 'context_gate', None)}"),
        (any(int(a) != 1 for a in getattr(training, "accum_count", None) or [1]),
         "training.accum_count " + " ".join(str(a) for a in getattr(training, "accum_count", None) or [1])),
        (getattr(training, "compute_dtype", torch.float32) != torch.float32,
         f"training.compute_dtype {getattr(training, 'compute_dtype', None)}"),
    ]
    refusal = unreplayable("training.rnn_cuda_graphs", refusals)
    if refusal:
        raise ConfigError(refusal)


def install(model, config) -> bool:
    """Give the model's input-feed decoder its graphs (training.rnn_cuda_graphs). True when given."""
    from eole.decoders.rnn_decoder import InputFeedRNNDecoder

    decoder = getattr(model, "decoder", None)
    training = getattr(config, "training", None)
    if not getattr(training, "rnn_cuda_graphs", False) or not isinstance(decoder, InputFeedRNNDecoder):
        return False
    log = logging.getLogger("eole")
    attach(decoder, DecoderGraphs(decoder, eager_loop(decoder), "src_pad_mask", 1,
                                  lambda mask: pad_to(mask, -1, S_STEP, True), log=log), log)
    return True


def wrap_build_trainer(upstream: Callable) -> Callable:
    """``eole.trainer.build_trainer`` (training only, with the config and the model): install the graphs."""

    def build_trainer(config, device_id, model, vocabs, optim, model_saver=None):
        install(model, config)
        return upstream(config, device_id, model, vocabs, optim, model_saver=model_saver)

    return build_trainer
