"""Teacher-forced scoring of one source sentence with an OpenNMT-py Translator.

Gives the pure algorithms of ``onmt_entmax.decoding`` / ``analysis`` the model they need: for
a list of target prefixes, log p(. | prefix, x) at every position, computed by the
translator's own ``_decode_and_generate`` (so the model's mapping, -inf for zeros, ensembles
included) in one full-sequence decoder pass; and, for enumeration and exact search, ``start`` /
``advance`` (``SteppedScorer``): one decoder step a depth from the decoder's state, as the beam search steps.
"""
from __future__ import annotations

from typing import Sequence

import torch

from onmt_entmax.decoding.scoring import SteppedScorer, trim_eos

__all__ = ["SentenceScorer", "trim_eos"]


class SentenceScorer(SteppedScorer):
    """next-token log-probabilities of one source sentence ``b`` of ``batch`` (``decoding.scoring.SteppedScorer``).

    Uses the translator's decoder state: call it only after the beam search of the batch.
    """

    def __init__(self, translator, batch: dict, b: int, chunk: int = 64):
        self.t = translator
        n = int(batch["srclen"][b])
        self.src = batch["src"][b : b + 1, :n]
        self.srclen = batch["srclen"][b : b + 1]
        self.chunk = chunk

    def _encode(self, n: int):
        src = self.src.expand(n, *self.src.shape[1:]).contiguous()
        src_len = self.srclen.expand(n).contiguous()
        src, enc_final_hs, enc_out, src_len = self.t._run_encoder({"src": src, "srclen": src_len})
        return src, enc_final_hs, enc_out, src_len

    @torch.no_grad()
    def forced(self, prefixes: Sequence[Sequence[int]], with_attn: bool = False):
        """(N, T, V) log-probs for inputs [start] + prefix (right-padded) and (N, T, S) attention.

        Row i, position t is log p(. | prefix_i[:t], x); positions past len(prefix_i) are padding.
        """
        self._forced_begins()
        n = len(prefixes)
        t_len = max(len(p) for p in prefixes) + 1
        if t_len == n:  # keep (N, T) and (T, N) layouts distinguishable (time-first RNN attention)
            t_len += 1
        pad, start = self.t._tgt_pad_idx, self.t._tgt_start_with
        dec_in = torch.full((n, t_len, 1), pad, dtype=torch.long, device=self.src.device)
        for i, p in enumerate(prefixes):
            dec_in[i, : len(p) + 1, 0] = torch.tensor([start, *p], dtype=torch.long)
        src, enc_final_hs, enc_out, src_len = self._encode(n)
        self.t.model.decoder.init_state(src, enc_out, enc_final_hs)
        log_probs, attn = self.t._decode_and_generate(
            dec_in, enc_out, {"srclen": src_len}, src_len=src_len, return_attn=with_attn
        )
        log_probs = log_probs.view(n, t_len, -1)
        if attn is not None and with_attn:
            if attn.shape[:2] == (t_len, n):  # input-feed RNN decoders stack attention time-first
                attn = attn.transpose(0, 1)
            attn = attn[:, :, : self.src.size(1)]
        return log_probs.float(), (attn.float() if (with_attn and attn is not None) else None)

    # --- one decoder step a depth (``decoding.scoring.SteppedScorer``): the beam search's own cache
    def _begin(self):
        src, enc_final_hs, enc_out, src_len = self._encode(1)
        self.t.model.decoder.init_state(src, enc_out, enc_final_hs)
        return enc_out, src_len

    def _select_state(self, idx):
        self.t.model.decoder.map_state(lambda state, dim: state.index_select(dim, idx))

    def _decode_step(self, tokens: Sequence[int]):
        dec_in = torch.tensor(list(tokens), dtype=torch.long, device=self.src.device).view(-1, 1, 1)
        log_probs, _ = self.t._decode_and_generate(dec_in, self._enc_out, {"srclen": self._src_len},
                                                  src_len=self._src_len, step=self._step)
        return log_probs
