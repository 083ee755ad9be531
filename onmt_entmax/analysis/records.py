"""Per-sentence records of one decoding run and what is reported at its end (``onmt_translate``, ``eole predict``).

An adapter hands over each sentence once its beam search is done (``Sentence``: hypotheses as token
ids with their scores, the beam's certificate, and for the analyses a ``decoding.PrefixScorer``, the
source tokens and the reference); ``DecodingRun`` adds the certificate fields and the analyses the
``DecodingConfig`` asks for, and ``finish()`` puts the records in input order, writes the JSON lines
and the heatmap, and logs the summary. No toolkit is imported here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

from onmt_entmax.decoding import enumerate_support, exact_search
from onmt_entmax.decoding.scoring import PrefixScorer, trim_eos
from onmt_entmax.errors import SupportTooLarge
from onmt_entmax.options.decoding import DecodingConfig

from .empty import empty_beats_beam
from .forced import format_forced_record, support_sets
from .heatmap import attention_heatmap
from .report import format_summary, summarize, write_jsonl
from .sparsity import SparsityStats

NEG_INF = float("-inf")


@dataclass
class Sentence:
    """One source sentence after its beam search."""

    key: tuple  # sorts the sentences into input order
    preds: list  # hypotheses, best first, as lists of target ids (EOS may end them)
    scores: list  # their scores
    certificate: object = None  # decoding.SentenceCertificate of the beam, if tracked
    scorer: Optional[PrefixScorer] = None  # for the analyses that re-score (cfg.needs_scorer)
    source: Callable[[], list] = list  # the source tokens (asked for by the heatmap only)
    gold: Optional[list] = None  # reference target ids without BOS/EOS/padding (forced decoding)
    line: Optional[int] = None  # its line of the source file, 1-based (the record's id), if the adapter knows it
    gold_score: Optional[float] = None  # the toolkit's GOLD score of the reference (log p, -inf if ruled out)


@dataclass
class DecodingRun:
    """The records of one decoding run (a file), in the order sentences finish."""

    cfg: DecodingConfig
    tgt_tokens: Sequence[str]  # the target vocabulary, id -> token
    eos: int
    n_best: int
    log: Callable[[str], None] = print
    records: list = field(default_factory=list)  # (order key, record, heatmap payload or None, line or None)
    stats: SparsityStats = field(default_factory=SparsityStats)
    attention: str = ""  # which attention the heatmap and the attended-token count read (named in both)
    # the beam's length penalty as a function of a finished hypothesis' tokens (EOS excluded): its score is
    # log p / length_penalty(n); None without one
    length_penalty: Optional[Callable[[int], float]] = None
    coverage_penalty: bool = False  # its score also has a coverage term (not recomputed here)
    max_length: Optional[int] = None  # the search's, for the log lines of cut hypotheses

    @property
    def reporting(self) -> bool:
        """Whether this run keeps records: a sparse output (certificates), or an analysis asked for."""
        return self.cfg.active or self.cfg.sparse_output

    # --- tokens -----------------------------------------------------------------------------------
    def tokens(self, ids) -> list:
        voc = self.tgt_tokens
        return [voc[i] if i < len(voc) else str(i) for i in ids]

    def text(self, ids) -> str:
        return " ".join(self.tokens(trim_eos(ids, self.eos)))

    # --- one sentence -----------------------------------------------------------------------------
    def add(self, s: Sentence, max_length: int) -> dict:
        """Everything reported about sentence ``s``; kept for ``finish`` and returned."""
        cfg = self.cfg
        scores = [float(x) for x in s.scores]
        rec: dict = {"n_best": self.n_best, "n_hyps": len(s.preds),
                     "hypotheses": [{"text": self.text(p), "score": x, "cut": not p or p[-1] != self.eos}
                                    for p, x in zip(s.preds, scores)]}
        if s.gold_score is not None:
            rec["gold_score"] = float(s.gold_score)
        if s.certificate is not None:
            rec.update(self._certificate_fields(s.certificate, scores))
        heat = None
        if cfg.needs_scorer and s.scorer is not None:
            best = s.preds[0] if s.preds else []
            if cfg.sparsity_stats or cfg.empty_check or cfg.attn_heatmap:
                fields, heat = self._best_hypothesis_fields(s, best)
                rec.update(fields)
            if cfg.forced_support and s.gold is not None:
                rec.update(self._forced_fields(s.scorer, s.gold))
            if cfg.enumerate_support:
                rec["support"] = self._enumeration_field(s.scorer, max_length)
            if cfg.exact_search:
                rec["exact"] = self._exact_field(s.scorer, max_length, best)
        self.records.append((s.key, rec, heat, s.line))
        self.max_length = max_length
        return rec

    def _certificate_fields(self, cert, scores) -> dict:
        """Peters et al.'s criterion; ``optimal`` only where summed log-probs bound completions."""
        optimal = None
        if self.cfg.plain_scores and not self.cfg.unnormalised:
            optimal = cert.optimal(scores[0]) if scores else cert.exhaustive
        return {"certified": cert.exhaustive, "pruned_steps": cert.pruned_steps, "max_candidates": cert.max_support,
                "optimal": optimal}

    def _best_hypothesis_fields(self, s: Sentence, best):
        """Sparsity statistics, empty-string check and heatmap payload, from one forced pass over ``best``."""
        tokens = best or [self.eos]
        lp, attn = s.scorer.sequence(tokens, with_attn=True)
        rec: dict = {}
        if self.cfg.sparsity_stats:
            rec.update(self.stats.add(lp, attn))
        if self.cfg.empty_check:  # log p(EOS | BOS, x) against log p(beam hypothesis | x), no length penalty
            beam_lp = float(lp.gather(1, torch.tensor(tokens, device=lp.device).view(-1, 1)).sum()) \
                if best else NEG_INF
            empty_lp = float(s.scorer([()])[0, self.eos])
            rec.update(empty_log_prob=empty_lp, beam_log_prob=beam_lp, empty_wins=empty_beats_beam(empty_lp, beam_lp))
        heat = None
        if self.cfg.attn_heatmap and attn is not None:
            heat = (attn.cpu(), list(s.source()), self.tokens(tokens))
        return rec, heat

    def _forced_fields(self, scorer: PrefixScorer, gold: list) -> dict:
        """Forced decoding of the reference: the support at each step (Figure 2)."""
        if not gold:
            return {}
        lp, _ = scorer.sequence(gold, with_attn=False)
        steps = support_sets(lp, gold, self.tgt_tokens, max_support=self.cfg.forced_max_support)
        gold_lp = sum(math.log(st.gold_prob) if st.gold_prob > 0 else NEG_INF for st in steps)
        return {"forced": [st.to_dict() for st in steps], "gold_log_prob": float(gold_lp)}

    def _enumeration_field(self, scorer: PrefixScorer, max_length: int) -> dict:
        try:
            sup = enumerate_support(scorer, eos=self.eos, max_length=max_length, cap=self.cfg.enumerate_cap)
        except SupportTooLarge as err:
            return {"error": str(err)}
        return {"size": len(sup), "mass": sup.mass,
                "sequences": [{"text": self.text(list(t)), "prob": math.exp(x)} for t, x in sup.sequences]}

    def _penalised(self, log_prob: float, n_tokens: int) -> float:
        """A finished hypothesis' beam score without its coverage term: log p / length_penalty(n)."""
        return log_prob / self.length_penalty(n_tokens) if self.length_penalty is not None else log_prob

    def _exact_field(self, scorer: PrefixScorer, max_length: int, best) -> dict:
        """Exact search's best (the most probable complete output: max log p(y|x), no length penalty)
        against the beam's best, and why they differ: ``cut`` (the beam's best stopped at max_length
        before EOS), ``tie`` (equally probable), ``length_penalty`` (under the beam's own ranking, log p
        / length_penalty, its best scores at least as high as the exact one), ``search`` (the beam
        pruned a better output), ``unsplit`` (a coverage penalty: the beam's score of the exact output
        is not known here)."""
        beam = trim_eos(best, self.eos)
        finished = bool(best) and best[-1] == self.eos
        beam_lp = scorer.score(best) if finished else None
        try:  # (the beam's finished best, its log p known, is a first bound: prefixes below it are pruned)
            found = exact_search(scorer, eos=self.eos, max_length=max_length,
                                 max_expansions=self.cfg.exact_max_expansions,
                                 known=[(tuple(beam), beam_lp)] if finished else [])
        except ValueError as err:  # SupportTooLarge, or unnormalised scores
            return {"error": str(err)}
        tokens, score = found[0] if found else ((), NEG_INF)
        out = {"text": self.text(list(tokens)), "score": score, "agrees": list(tokens) == beam,
               "beam_log_prob": None, "cause": None}
        if out["agrees"] or not found:
            return out
        if not finished:
            out["cause"] = "cut"
            return out
        out["beam_log_prob"] = beam_lp
        if math.isclose(beam_lp, score, rel_tol=1e-6, abs_tol=1e-9):
            out["cause"] = "tie"
        elif self.coverage_penalty:
            out["cause"] = "unsplit"
        elif self.length_penalty is not None and \
                self._penalised(beam_lp, len(beam)) >= self._penalised(score, len(tokens)):
            out["cause"] = "length_penalty"
        else:
            out["cause"] = "search"
        return out

    def add_batch(self, predictions: list, sentence: Callable[[int, list], Sentence], max_length: int) -> None:
        """Every sentence of a decoded batch: ``predictions`` its hypotheses as the search left them
        (tensors), ``sentence(b, token_lists)`` the adapter's ``Sentence`` for sentence b."""
        with torch.no_grad():
            for b, preds in enumerate(listed_predictions(predictions)):
                self.add(sentence(b, preds), max_length)

    # --- the whole run ----------------------------------------------------------------------------
    def finish(self) -> list:
        """Records in input order, ``id`` the source line (1-based; the rank when the adapter gives no
        lines), with the report file, the heatmap and the summary."""
        cfg = self.cfg
        self.records.sort(key=lambda r: r[0])
        by_line = all(line is not None for _, _, _, line in self.records)
        which = f": {self.attention}" if self.attention else ""
        records, drawn = [], False
        for i, (_, rec, heat, line) in enumerate(self.records):
            sid = line if by_line else i + 1
            records.append({"id": sid, **rec})
            if cfg.attn_heatmap and sid == cfg.heatmap_sentence:
                drawn = True
                if heat is None:
                    self.log(f"[entmax] no attention available for sentence {sid}: heatmap not written")
                else:
                    attn, src, tgt = heat
                    attention_heatmap(attn, src, tgt, cfg.attn_heatmap, title=f"sentence {sid}{which}")
                    self.log(f"[entmax] attention heatmap of sentence {sid} ({self.attention or 'attention'}) "
                             f"written to {cfg.attn_heatmap}")
        if cfg.attn_heatmap and not drawn:
            self.log(f"[entmax] -heatmap_sentence {cfg.heatmap_sentence}: no such input line among "
                     f"{len(records)} sentences: no heatmap written")
        short = [r for r in records if r["n_hyps"] < r["n_best"]]
        for r in short[:10]:
            self.log(f"[entmax] sentence {r['id']}: {r['n_hyps']} of n_best={r['n_best']} hypotheses have "
                     "nonzero probability; only those are written")
        if len(short) > 10:
            self.log(f"[entmax] ... and {len(short) - 10} more sentences with fewer than n_best hypotheses "
                     "(see -entmax_report)")
        self._report_cuts(records)
        if cfg.forced_support:  # every reference's steps in the log; the report keeps -forced_max_support tokens
            for r in records:
                if r.get("forced"):
                    self.log(format_forced_record(r))
        if cfg.entmax_report:
            write_jsonl(records, cfg.entmax_report)
        self.log(format_summary(summarize(records), attention_of=self.attention or None,
                                length_penalty=cfg.length_penalty))
        return records

    def _report_cuts(self, records: list) -> None:
        cut = [(r["id"], k + 1) for r in records for k, h in enumerate(r["hypotheses"]) if h.get("cut")]
        for line, k in cut[:10]:
            self.log(f"[entmax] sentence {line}: hypothesis {k} reached -max_length {self.max_length} without "
                     "EOS: a cut prefix, not a complete output")
        if len(cut) > 10:
            self.log(f"[entmax] ... and {len(cut) - 10} more cut hypotheses ('cut' in -entmax_report)")


def target_tokens(translator) -> list:
    """The target vocabulary as a list, built once per translator: pyonmttok's ``ids_to_tokens``
    builds a new list of every token at each access, a sizeable share of a sparse model's decoding
    time before this (docs/decoding.md)."""
    voc = getattr(translator, "_entmax_tgt_tokens", None)
    if voc is None:
        voc = translator._entmax_tgt_tokens = list(translator._tgt_vocab.ids_to_tokens)
    return voc


def decode_file(translator, run: DecodingRun, decode: Callable[[], object]):
    """``decode()`` (one input file) with ``translator._entmax_run = run``, then the run's records, report
    and summary (kept as ``translator._entmax_records``); returns what ``decode`` returned."""
    translator._entmax_run = run
    try:
        out = decode()
    finally:
        translator._entmax_run = None
    if run.records and run.reporting:
        translator._entmax_records = run.finish()
    return out


def listed_predictions(predictions: list) -> list:
    """[sentence][hypothesis] token lists from a search's per-hypothesis (GPU) tensors, read back
    in one transfer (one device sync per hypothesis otherwise)."""
    flat = [p for hyps in predictions for p in hyps]
    if not flat:
        return [[] for _ in predictions]
    values = torch.cat([p.reshape(-1) for p in flat]).tolist()
    out, start = [], 0
    for hyps in predictions:
        out.append([])
        for p in hyps:
            out[-1].append(values[start:start + p.numel()])
            start += p.numel()
    return out
