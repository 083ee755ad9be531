"""Teacher-forced scoring of one source sentence: what enumeration, exact search and the analyses ask a model.

``PrefixScorer`` turns one method an adapter implements, ``forced(prefixes)`` = the model's next-token
log-probabilities at every position of a batch of target prefixes (one full-sequence decoder pass),
into the calls the algorithms make: ``scorer(prefixes)`` (the next step after each prefix, the
``NextLogProbs`` of ``decoding.search``), ``sequence(tokens)`` and ``score(tokens)``. ``SteppedScorer``
adds the beam search's way of scoring, one decoder step a prefix (``start``/``advance``).
"""
from __future__ import annotations

import weakref
from typing import Optional, Sequence

import torch
from torch import Tensor


class PrefixScorer:
    """Next-token log-probabilities log p(. | prefix, x) of one source sentence x (BOS excluded from prefixes)."""

    chunk = 64  # prefixes per decoder pass

    def forced(self, prefixes: Sequence[Sequence[int]], with_attn: bool = False) -> tuple[Tensor, Optional[Tensor]]:
        """(N, T, V) float log-probs for inputs [start] + prefix (right-padded), row i, position t being
        log p(. | prefix_i[:t], x), and (N, T, S) attention (or None)."""
        raise NotImplementedError

    def __call__(self, prefixes: Sequence[tuple]) -> Tensor:
        out = []
        for s in range(0, len(prefixes), self.chunk):
            part = list(prefixes[s : s + self.chunk])
            lp, _ = self.forced(part)
            idx = torch.tensor([len(p) for p in part], device=lp.device)
            out.append(lp[torch.arange(len(part), device=lp.device), idx])
        return torch.cat(out).cpu()

    def sequence(self, tokens: Sequence[int], with_attn: bool = True):
        """Teacher-forced pass over ``tokens`` (EOS included if it is there): (T, V) and (T, S)."""
        lp, attn = self.forced([tuple(tokens[:-1])] if tokens else [()], with_attn=with_attn)
        t = max(len(tokens), 1)
        return lp[0, :t], (attn[0, :t] if attn is not None else None)

    def score(self, tokens: Sequence[int]) -> float:
        """log p(tokens | x) = sum_t log p(y_t | y_<t, x), -inf if any factor is 0."""
        if not tokens:
            return 0.0
        lp, _ = self.sequence(tokens, with_attn=False)
        return float(lp.gather(1, torch.tensor(list(tokens), device=lp.device).view(-1, 1)).sum())


class SteppedScorer(PrefixScorer):
    """A ``PrefixScorer`` that also steps the decoder, one step a depth from each row's parent state, as the
    beam search steps (``start``/``advance``: what ``decoding.search.PrefixSteps`` returns). An adapter
    gives its translator as ``self.t`` and three hooks: ``_begin`` (encode this sentence, set the
    decoder's state to it: its encoder output and source lengths), ``_select_state(idx)`` (keep the
    decoder state's rows ``idx``) and ``_decode_step(tokens)`` ((N, V) log-probs of one step at
    ``self._step``).

    The decoder's state lives in the model, which every scorer of the translator shares: a teacher-forced
    pass (``forced`` calls ``_forced_begins``) or another scorer's ``start`` replaces it. The translator
    names the scorer whose steps its decoder holds, and ``advance`` refuses a state not its own."""

    t = None  # the adapter's translator (holds the model)

    def _begin(self) -> tuple:
        raise NotImplementedError

    def _select_state(self, idx: Tensor) -> None:
        raise NotImplementedError

    def _decode_step(self, tokens: Sequence[int]) -> Tensor:
        raise NotImplementedError

    @torch.no_grad()
    def start(self) -> Tensor:
        """(1, V): log p(. | BOS, x), the decoder's state set to this sentence alone."""
        self._enc_out, self._src_len = self._begin()
        self._step = 0
        self.t._entmax_stepping = weakref.ref(self)  # (weak: a finished search's scorer is not kept alive)
        return self._step_from([self.t._tgt_start_with])

    @torch.no_grad()
    def advance(self, parents: Sequence[int], tokens: Sequence[int]) -> Tensor:
        """(N, V): row i = log p(. | the last call's row ``parents[i]`` followed by ``tokens[i]``, x)."""
        holder = getattr(self.t, "_entmax_stepping", None)
        if holder is None or holder() is not self:
            raise RuntimeError("advance() needs the decoder state of this scorer's start(): a teacher-forced "
                               "pass or another scorer's start() has replaced it since; call start() again")
        idx = torch.tensor(list(parents), dtype=torch.long, device=self._src_len.device)
        self._select_state(idx)
        self._enc_out = (tuple(e.index_select(0, idx) for e in self._enc_out)  # an ensemble's: one a model
                         if isinstance(self._enc_out, tuple) else self._enc_out.index_select(0, idx))
        self._src_len = self._src_len.index_select(0, idx)
        return self._step_from(tokens)

    def _step_from(self, tokens: Sequence[int]) -> Tensor:
        log_probs = self._decode_step(tokens)
        self._step += 1
        return log_probs.view(len(tokens), -1).float()

    def _forced_begins(self) -> None:
        """A teacher-forced pass replaces the decoder's state: no scorer may step on from it."""
        self.t._entmax_stepping = None


def trim_eos(tokens: Sequence[int], eos: int) -> list:
    toks = list(tokens)
    return toks[:-1] if toks and toks[-1] == eos else toks
