"""Teacher-forced scoring of one source sentence with an Eole predictor, for the analyses."""
from __future__ import annotations

from typing import Sequence

import torch

from onmt_entmax.decoding.scoring import SteppedScorer


class EoleScorer(SteppedScorer):
    """log p(. | prefix, x) of one source sentence with an Eole ``Translator``: full-sequence decoder
    passes (``forced``), or one decoder step a depth from each row's parent state as the beam search
    steps (``start``/``advance``, for ``decoding.search``). Call it only after the beam search of the
    batch: it sets the decoder's state (and, stepping, its KV cache) to this sentence's.

    The source row keeps the batch's padding: Eole's RNN encoder does not pack sequences, so its states
    depend on the padding, and the analyses must score with the function the beam search used."""

    def __init__(self, translator, batch: dict, b: int):
        self.t = translator
        self.n = int(batch["srclen"][b])
        self.src = batch["src"][b : b + 1]
        self.srclen = batch["srclen"][b : b + 1]

    def _no_cache(self) -> None:
        """A full-sequence pass must not read the KV cache a stepped search left (the beam search
        disables its own at its end)."""
        disable = getattr(self.t.model.decoder, "_disable_cache", None)
        if disable is not None:
            disable()

    # --- one decoder step a depth (``decoding.scoring.SteppedScorer``), as Eole's beam search steps
    def _begin(self):
        _, enc_final_hs, enc_out, src_len = self.t._run_encoder({"src": self.src, "srclen": self.srclen})
        self.t.model.decoder.init_state(enc_out=enc_out, enc_final_hs=enc_final_hs)
        return enc_out, src_len

    def _select_state(self, idx):
        self.t.model.decoder.map_state(lambda state: state.index_select(0, idx))

    def _decode_step(self, tokens: Sequence[int]):
        dec_in = torch.tensor(list(tokens), dtype=torch.long, device=self.src.device).view(-1, 1)
        log_probs, _ = self.t._decode_and_generate(dec_in, self._enc_out, src_len=self._src_len, step=self._step)
        extend = getattr(self.t.model.decoder, "_extend_cache", None)
        if extend is not None:  # (as the beam search after each step; nothing unless the cache grows)
            extend()
        return log_probs

    @torch.no_grad()
    def forced(self, prefixes: Sequence[Sequence[int]], with_attn: bool = False):
        self._forced_begins()
        self._no_cache()
        n = len(prefixes)
        # (at least 2 positions: Eole's Transformer decoder takes a one-position input for a KV-cache
        # step; the padding after a prefix is never attended to, the decoder being causal)
        t_len = max(max(len(p) for p in prefixes) + 1, 2)
        pad, start = self.t._tgt_pad_idx, self.t._tgt_start_with
        dec_in = torch.full((n, t_len), pad, dtype=torch.long, device=self.src.device)
        for i, p in enumerate(prefixes):
            dec_in[i, : len(p) + 1] = torch.tensor([start, *p], dtype=torch.long)
        batch = {"src": self.src.expand(n, -1).contiguous(), "srclen": self.srclen.expand(n).contiguous()}
        _, enc_final_hs, enc_out, src_len = self.t._run_encoder(batch)
        self.t.model.decoder.init_state(enc_out=enc_out, enc_final_hs=enc_final_hs)
        log_probs, attn = self.t._decode_and_generate(dec_in, enc_out, src_len=src_len, return_attn=with_attn)
        log_probs = log_probs.view(n, t_len, -1)
        if attn is not None and with_attn:
            attn = attn[:, :, : self.n].float()
        return log_probs.float(), (attn if with_attn else None)
