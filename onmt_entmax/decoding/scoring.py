"""Teacher-forced scoring of one source sentence: what enumeration, exact search and the analyses ask a model.

``PrefixScorer`` turns one method an adapter implements, ``forced(prefixes)`` = the model's next-token
log-probabilities at every position of a batch of target prefixes (one full-sequence decoder pass),
into the calls the algorithms make: ``scorer(prefixes)`` (the next step after each prefix, the
``NextLogProbs`` of ``decoding.search``), ``sequence(tokens)`` and ``score(tokens)``.
"""
from __future__ import annotations

import weakref
from typing import Optional, Sequence

import torch
from torch import Tensor


class PrefixScorer:
    """Next-token log-probabilities log p(. | prefix, x) of one source sentence x (BOS excluded from prefixes).

    An adapter's scorer may also step the decoder (``start``/``advance``, ``decoding.search.PrefixSteps``).
    The decoder's state is then the search's, kept in the model that every scorer of the same translator
    ``self.t`` shares: a teacher-forced pass, or another scorer's ``start``, replaces it. The translator
    therefore names the scorer whose steps its decoder holds (``_steps_begin``; ``_forced_begins`` clears
    it), and ``advance`` refuses to step a state that is not its own (``_check_steps``)."""

    chunk = 64  # prefixes per decoder pass
    t = None  # the adapter's translator (holds the model)

    def _steps_begin(self) -> None:
        self.t._entmax_stepping = weakref.ref(self)  # (weak: a finished search's scorer is not kept alive)

    def _forced_begins(self) -> None:
        self.t._entmax_stepping = None

    def _check_steps(self) -> None:
        holder = getattr(self.t, "_entmax_stepping", None)
        if holder is None or holder() is not self:
            raise RuntimeError("advance() needs the decoder state of this scorer's start(): a teacher-forced "
                               "pass or another scorer's start() has replaced it since; call start() again")

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


def trim_eos(tokens: Sequence[int], eos: int) -> list:
    toks = list(tokens)
    return toks[:-1] if toks and toks[-1] == eos else toks
