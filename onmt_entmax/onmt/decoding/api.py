"""Python API over a checkpoint: forced-decoding support sets, next-word suggestions, support
enumeration and exact search for one tokenized sentence (Peters et al. 2019, Figures 1 and 2).

    from onmt_entmax.onmt.decoding.api import SparseDecoder
    dec = SparseDecoder("model.pt")
    dec.suggest("english V PTCP PST d r a w", prefix="d r a")     # [("w", 1.0)]
    dec.support_sets("english V PTCP PST d r a w", "d r a w n")    # one StepSupport per target token
    dec.enumerate("english V PTCP PST d r a w")                     # every output with p > 0

Text is whitespace-tokenized with the model's vocabularies (apply your subword / character
segmentation first); unknown tokens map to <unk>.
"""
from __future__ import annotations

import io
import os
from typing import Optional, Sequence, Union

import torch

from onmt_entmax.analysis import StepSupport, suggestions, support_sets
from onmt_entmax.decoding import Support, enumerate_support, exact_search
from onmt_entmax.errors import EntmaxOptionError

from .scorer import SentenceScorer, trim_eos


def _refuse(message: str):
    """``parser.error`` of a library call: an exception the caller can catch (never SystemExit)."""
    raise EntmaxOptionError(message)


class SparseDecoder:
    """One loaded model (or ensemble) and teacher-forced queries on it.

    A bad option or model raises ``EntmaxOptionError`` / ``CheckpointError`` (ValueError subclasses
    naming what is wrong), never SystemExit.
    """

    def __init__(self, model: Union[str, Sequence[str]], gpu: int = -1, options: Sequence[str] = ()):
        import onmt.opts
        from onmt.translate.translator import build_translator
        from onmt.utils.parse import ArgumentParser

        from .. import activate

        activate()
        paths = [model] if isinstance(model, str) else list(model)
        parser = ArgumentParser(description="onmt_entmax.SparseDecoder")
        onmt.opts.translate_opts(parser)
        parser.error = _refuse  # argparse (and the misspelling check) would print usage and exit the caller
        opt = parser.parse_args(["-model", *paths, "-src", "-", "-output", os.devnull, "-gpu", str(gpu), *options])
        try:
            ArgumentParser.validate_translate_opts(opt)
        except AssertionError as err:  # upstream checks its options with assert
            raise EntmaxOptionError(str(err)) from None
        self.translator = build_translator(opt, report_score=False, out_file=io.StringIO())
        self.translator.model.eval()
        self.max_length = opt.max_length
        self._device = torch.device("cuda", gpu) if gpu >= 0 else torch.device("cpu")

    # --- tokens ---------------------------------------------------------------------------------
    def _src_ids(self, text: str) -> list:
        voc = self.translator.vocabs["src"]
        ids = [voc.lookup_token(t) for t in text.split()]
        if not ids:
            raise ValueError("source sentence is empty")
        return ids

    def _tgt_ids(self, text: str) -> list:
        voc = self.translator._tgt_vocab
        return [voc.lookup_token(t) for t in text.split()]

    def _words(self, ids) -> str:
        voc = self.translator._tgt_vocab.ids_to_tokens
        return " ".join(voc[i] for i in trim_eos(ids, self.translator._tgt_eos_idx))

    def scorer(self, src: str) -> SentenceScorer:
        """next-token log-probabilities for ``src``: call it with prefixes (tuples of target ids)."""
        ids = self._src_ids(src)
        batch = {"src": torch.tensor(ids, device=self._device).view(1, -1, 1),
                 "srclen": torch.tensor([len(ids)], device=self._device)}
        return SentenceScorer(self.translator, batch, 0)

    # --- queries --------------------------------------------------------------------------------
    def support_sets(self, src: str, tgt: str, max_support: Optional[int] = None) -> list:
        """Forced decoding of ``tgt`` (EOS appended): per step the gold token and every token with p > 0."""
        gold = self._tgt_ids(tgt) + [self.translator._tgt_eos_idx]
        lp, _ = self.scorer(src).sequence(gold, with_attn=False)
        return support_sets(lp, gold, self.translator._tgt_vocab.ids_to_tokens, max_support=max_support)

    def suggest(self, src: str, prefix: str = "") -> list:
        """The next-word candidates after ``prefix``: exactly those with nonzero probability."""
        lp = self.scorer(src)([tuple(self._tgt_ids(prefix))])[0]
        return suggestions(lp, self.translator._tgt_vocab.ids_to_tokens)

    def log_prob(self, src: str, tgt: str) -> float:
        """log p(tgt + EOS | src); -inf when the model rules the output out."""
        return self.scorer(src).score(self._tgt_ids(tgt) + [self.translator._tgt_eos_idx])

    def enumerate(self, src: str, cap: int = 100, max_length: Optional[int] = None) -> list:
        """Every output with nonzero probability, most probable first: [(text, p)].

        Raises SupportTooLarge (a ValueError) when more than ``cap`` outputs have p > 0.
        """
        sup: Support = enumerate_support(self.scorer(src), eos=self.translator._tgt_eos_idx,
                                         max_length=max_length or self.max_length, cap=cap)
        return [(self._words(list(t)), float(torch.tensor(s).exp())) for t, s in sup.sequences]

    def exact(self, src: str, n_best: int = 1, max_expansions: int = 100_000) -> list:
        """The n_best most probable outputs, found by exact search (``decoding.exact_search``): [(text, log p)]."""
        found = exact_search(self.scorer(src), eos=self.translator._tgt_eos_idx, max_length=self.max_length,
                             n_best=n_best, max_expansions=max_expansions)
        return [(self._words(list(t)), s) for t, s in found]


__all__ = ["SparseDecoder", "StepSupport"]
