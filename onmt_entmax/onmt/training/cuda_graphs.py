"""``rnn_cuda_graphs``: the input-feed RNN decoder's training steps replayed as CUDA graphs.

OpenNMT-py's ``InputFeedRNNDecoder._run_forward_pass`` loops over the target steps; in training on a
GPU that loop, forward and backward, replays graphs, one per batch shape, its targets padded to a
multiple of 4 steps and its sources to 8 positions (``onmt_entmax.training.cuda_graphs.DecoderGraphs`` says
why the loss sees the same numbers). The decoder state left after a graphed forward is the state
after the padded steps; OpenNMT-py reads it again only under truncated BPTT (``truncated_decoder``),
which the option refuses. Here: the option's checks (the option itself is a row of ``options.training``)
and the two hooks: ``build_trainer`` gives the model's decoder its graphs, ``_run_forward_pass`` runs them.
"""
from __future__ import annotations

import logging
from typing import Callable

from onmt_entmax.errors import EntmaxOptionError
from onmt_entmax.training.cuda_graphs import DecoderGraphs, attach, eager_loop, unreplayable


def check_train_opts(opt) -> None:
    """What the graphs cannot replay: anything but the input-feed LSTM decoder with global attention,
    several forwards before one backward, a decoder state carried between pieces of a batch, autocast."""
    if not getattr(opt, "rnn_cuda_graphs", False):
        return
    refusals = [
        (getattr(opt, "decoder_type", "rnn") != "rnn", f"decoder_type {getattr(opt, 'decoder_type', None)}"),
        (not getattr(opt, "input_feed", 1), "input_feed 0"),
        (getattr(opt, "rnn_type", "LSTM") != "LSTM", f"rnn_type {getattr(opt, 'rnn_type', None)}"),
        (any(int(a) != 1 for a in (getattr(opt, "accum_count", None) or [1])),
         "accum_count " + " ".join(str(a) for a in getattr(opt, "accum_count", None) or [1])),
        (bool(getattr(opt, "truncated_decoder", 0)), f"truncated_decoder {getattr(opt, 'truncated_decoder', 0)}"),
        (bool(getattr(opt, "copy_attn", False)), "copy_attn"),
        (bool(getattr(opt, "coverage_attn", False)), "coverage_attn"),
        (bool(getattr(opt, "context_gate", None)), f"context_gate {getattr(opt, 'context_gate', None)}"),
        (getattr(opt, "model_dtype", "fp32") != "fp32", f"model_dtype {getattr(opt, 'model_dtype', None)}"),
    ]
    refusal = unreplayable("rnn_cuda_graphs", refusals)
    if refusal:
        raise EntmaxOptionError(refusal)


def install(model, opt) -> bool:
    """Give the model's input-feed decoder its graphs (training, rnn_cuda_graphs). True when given."""
    from onmt.decoders.decoder import InputFeedRNNDecoder

    decoder = getattr(model, "decoder", None)
    if not getattr(opt, "rnn_cuda_graphs", False) or not isinstance(decoder, InputFeedRNNDecoder):
        return False
    # OpenNMT-py's loop takes target ids (padded with the padding index) and src_len, stacks (T, B, S)
    log = logging.getLogger("onmt")
    attach(decoder, DecoderGraphs(decoder, eager_loop(decoder), "src_len", 0, lambda src_len: src_len,
                                  x_pad=decoder.embeddings.word_padding_idx, log=log), log)
    return True


def wrap_build_trainer(upstream: Callable) -> Callable:
    """``onmt.trainer.build_trainer`` (training only, with the options and the model): install the graphs."""

    def build_trainer(opt, device_id, model, vocabs, optim, model_saver=None):
        install(model, opt)  # (before upstream: the trainer may wrap the model)
        return upstream(opt, device_id, model, vocabs, optim, model_saver)

    return build_trainer
