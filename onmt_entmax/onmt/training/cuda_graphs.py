"""``rnn_cuda_graphs``: the input-feed RNN decoder's training steps replayed as CUDA graphs.

OpenNMT-py's ``InputFeedRNNDecoder._run_forward_pass`` loops over the target steps; in training on a
GPU that loop, forward and backward, replays graphs (``onmt_entmax.cuda_graphs.ShapeGraphs``), one per
batch shape. A batch is padded to a shape bucket: its target steps T to a multiple of ``T_STEP`` (4),
its source positions S to a multiple of ``S_STEP`` (8). Nothing the loss sees changes:

* the outputs and attention of steps t < T do not depend on later steps, and are sliced back to T;
* padded source positions get zero vectors and are masked by the source lengths (-inf, weight
  exactly 0), as the batch's own padding already is;
* the padded steps' outputs are cut away, so their gradient is zero.

The decoder state left after a graphed forward is the state after the padded steps (the input feed,
read from the sliced outputs, is exact): OpenNMT-py reads it again only under truncated BPTT
(``truncated_decoder``), which the option refuses. Here: the loop as a module, the padding, the
option and its checks, and the two hooks: ``build_trainer`` gives the model's decoder its graphs,
``_run_forward_pass`` runs them.
"""
from __future__ import annotations

import logging
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from onmt_entmax.cuda_graphs import S_STEP, T_STEP, ShapeGraphs, lstm_loop_trains_on_cuda, pad_to

from ..validation import EntmaxOptionError

ATTR = "entmax_graphs"  # the decoder attribute holding its DecoderGraphs
_eager: list[Callable] = []  # upstream's _run_forward_pass, kept by wrap_run_forward_pass


def add_options(group) -> None:
    group.add("--rnn_cuda_graphs", "-rnn_cuda_graphs", action="store_true",
              help="Training on a GPU: run the input-feed RNN decoder's steps (decoder_type rnn, input_feed 1) "
                   "as CUDA graphs, one per shape of batch (targets padded to a multiple of 4 steps, sources "
                   "to 8 positions; the loss sees the same numbers). Takes the per-step kernel launches off "
                   "the host. Needs accum_count 1 and no truncated_decoder, copy_attn, coverage_attn or "
                   "fp16; on a CPU it changes nothing.")


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
    asked = [what for refused, what in refusals if refused]
    if asked:
        raise EntmaxOptionError(f"rnn_cuda_graphs replays the input-feed LSTM decoder (accum_count 1, fp32), "
                                f"but {', '.join(asked)} is set: remove rnn_cuda_graphs or that option")


class InputFeedSteps(nn.Module):
    """The decoder's loop over target steps as one call of tensors only (what a graph captures).

    forward(tgt (B, T, 1), enc_out (B, S, H), src_len (B,), h0, c0 (L, B, H), input_feed (B, H))
        -> (outputs (B, T, H), attention (T, B, S), h_T, c_T)
    runs upstream's own ``_run_forward_pass`` (passed in, not copied) from that state.
    """

    def __init__(self, decoder: nn.Module, run_forward_pass: Callable):
        super().__init__()
        self.decoder = decoder
        self._run = run_forward_pass

    def forward(self, tgt: Tensor, enc_out: Tensor, src_len: Tensor, h0: Tensor, c0: Tensor,
                input_feed: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        d = self.decoder
        kept = d.state
        d.state = {"hidden": (h0, c0), "input_feed": input_feed.unsqueeze(0), "coverage": None}
        try:
            (h, c), outs, attns = self._run(d, tgt, enc_out, src_len=src_len)
        finally:
            d.state = kept
        return torch.stack(outs, dim=1), torch.stack(attns["std"]), h, c


class DecoderGraphs:
    """One decoder's training steps through ``ShapeGraphs``, keyed by (batch, padded T, padded S).

    ``forward_pass`` stands in for ``_run_forward_pass`` in training on a GPU
    (``lstm_loop_trains_on_cuda``); elsewhere, and for shapes beyond the cap, upstream's loop runs."""

    def __init__(self, decoder: nn.Module, run_forward_pass: Callable, pad_index: int):
        self.run_eager = run_forward_pass
        self.pad_index = int(pad_index)
        self.shapes = ShapeGraphs(lambda: InputFeedSteps(decoder, run_forward_pass), name="rnn_cuda_graphs",
                                  log=logging.getLogger("onmt"))  # (OpenNMT-py's log: the training log)
        self.eager_batches = 0  # training batches that ran eagerly (shapes over the cap)

    def forward_pass(self, decoder: nn.Module, tgt: Tensor, enc_out: Tensor, src_len: Optional[Tensor]):
        """(final state, outputs (B, T, H), {"std": attention (T, B, S)}), as upstream's
        ``RNNDecoderBase.forward`` has them once stacked."""
        if src_len is None or not lstm_loop_trains_on_cuda(decoder, enc_out):
            return self.run_eager(decoder, tgt, enc_out, src_len=src_len)
        h0, c0 = decoder.state["hidden"]
        args = (pad_to(tgt, 1, T_STEP, self.pad_index), pad_to(enc_out, 1, S_STEP), src_len, h0, c0,
                decoder.state["input_feed"].squeeze(0))
        graphed = self.shapes.get(args)
        if graphed is None:
            self.eager_batches += 1
            return self.run_eager(decoder, tgt, enc_out, src_len=src_len)
        outs, attn, h, c = graphed(*args)
        return (h, c), outs[:, :tgt.size(1)], {"std": attn[:tgt.size(1), :, :enc_out.size(1)]}


def install(model, opt) -> bool:
    """Give the model's input-feed decoder its graphs (training, rnn_cuda_graphs). True when given."""
    from onmt.decoders.decoder import InputFeedRNNDecoder

    decoder = getattr(model, "decoder", None)
    if not getattr(opt, "rnn_cuda_graphs", False) or not isinstance(decoder, InputFeedRNNDecoder):
        return False
    setattr(decoder, ATTR, DecoderGraphs(decoder, _eager[0], decoder.embeddings.word_padding_idx))
    on_gpu = next(decoder.parameters()).is_cuda
    logging.getLogger("onmt").info("rnn_cuda_graphs: the decoder's training steps run as CUDA graphs%s",
                                   "" if on_gpu else " (on a GPU only: eager here)")
    return True


def wrap_build_trainer(upstream: Callable) -> Callable:
    """``onmt.trainer.build_trainer`` (training only, with the options and the model): install the graphs."""

    def build_trainer(opt, device_id, model, vocabs, optim, model_saver=None):
        install(model, opt)  # (before upstream: the trainer may wrap the model)
        return upstream(opt, device_id, model, vocabs, optim, model_saver)

    return build_trainer


def wrap_run_forward_pass(upstream: Callable) -> Callable:
    """``InputFeedRNNDecoder._run_forward_pass``: through the decoder's graphs when it has them."""
    _eager[:] = [upstream]

    def _run_forward_pass(self, tgt, enc_out, src_len=None):
        graphs = self.__dict__.get(ATTR)
        if graphs is None:
            return upstream(self, tgt, enc_out, src_len=src_len)
        return graphs.forward_pass(self, tgt, enc_out, src_len)

    return _run_forward_pass
