"""-inf-correct beam search for the OpenNMT family's ``BeamSearchBase`` (OpenNMT-py 3.5.1, Eole 0.6).

Both toolkits share the beam search design and assume every token has p > 0, using finite stand-ins
for "forbidden": -65504 (min length, banned unk, finished beams), -10e20 (n-gram blocking), -10000
(target prefix). With a sparse output layer, log p = -inf is *lower* than these, so zero-probability
tokens and finished beams come back as junk hypotheses. The wrappers below let each upstream
routine decide *where* to forbid, then write -inf there (penalty_mask), and they keep hypotheses of
probability zero out of the n-best lists. For a dense model every candidate is finite, so the same K
candidates win as upstream and outputs are unchanged.

Nothing here imports a toolkit: ``rows(decode_strategy, beam_search, penalty_builder)`` names each hook, its
reason, the upstream method it wraps in the classes an adapter names, and its wrapper; each adapter lists
them among the rows of its patches (which install them). The two
toolkits differ where noted: Eole's ``eos`` is a list of ids, it finishes a sentence with ``num_hyp``
hypotheses (n_best) and may keep finished sentences in a static batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from onmt_entmax.ops import beam_topk

from .certificate import CertificateTracker
from .masking import penalty_mask

NEG_INF = float("-inf")


@dataclass
class BeamRecord:
    """What the patched beam search learns about one batch (attached as ``strategy._entmax``)."""

    tracker: Optional[CertificateTracker] = None
    n_best: int = 1
    found: dict = field(default_factory=dict)  # sentence -> number of nonzero hypotheses returned
    # sentences whose output is fixed (upstream's stopping rule) and whose search goes on only to
    # settle the certificate, while it can still hold
    settling: set = field(default_factory=set)


def attach_record(strategy, beam_search: type, certificate: bool) -> Optional[BeamRecord]:
    """A ``BeamRecord`` (with a certificate tracker if asked) on a decode strategy that is a beam search
    (``strategy._entmax``, which the hooks below read); None for other strategies (sampling)."""
    if not isinstance(strategy, beam_search):
        return None
    strategy._entmax = BeamRecord(CertificateTracker(strategy.batch_size) if certificate else None, strategy.n_best)
    return strategy._entmax


def _neg_inf_penalty(active: Callable) -> Callable[[Callable], Callable]:
    """Run an upstream in-place penalty on a zero probe and put -inf where it forbids."""

    def make(upstream):
        def wrapper(self, log_probs, *args):
            if not active(self):  # upstream would not touch anything: keep its fast path
                out = upstream(self, log_probs, *args)
                return log_probs if out is None else out
            mask = penalty_mask(lambda t: upstream(self, t, *args), log_probs)
            return log_probs.masked_fill_(mask, NEG_INF)

        return wrapper

    return make


def _pick(upstream):
    """Count the finite candidates at the top-k: more than beam_size means pruning.

    Upstream's ``_pick`` is its target prefix (a no-op without one), a reshape to (B, beam x V) and
    a top-k. With the certificate on and no target prefix, the wrapper makes that top-k itself with
    ``ops.beam_topk``, which also gives the certificate's statistics: one kernel pair on CUDA where
    torch.topk and the statistics were ~20 launches a step (their GPU time: docs/kernels.md). Among
    equal scores it keeps the lowest position first, where torch.topk's order is unspecified.
    """

    def wrapper(self, log_probs):
        rec = getattr(self, "_entmax", None)
        if rec is None or rec.tracker is None:
            return upstream(self, log_probs)
        if getattr(self, "parallel_gpu", 1) > 1:  # (Eole's tensor parallelism broadcasts rank 0's pick)
            out = upstream(self, log_probs)
            rows = log_probs.size(0) // self.beam_size
            rec.tracker.observe_step(self._batch_offset, log_probs.reshape(rows, -1), self.beam_size, kept=out[1])
            return out
        rows = log_probs.size(0) // self.beam_size
        if self.target_prefix is None:
            values, kept, stats = beam_topk(log_probs.reshape(rows, -1), self.beam_size)
            rec.tracker.observe_stats(self._batch_offset, stats, self.beam_size)
            return values, kept
        out = upstream(self, log_probs)  # log_probs is masked in place by target_prefixing
        kept = out[1] if isinstance(out, tuple) else None  # upstream's top-k positions in the same layout
        rec.tracker.observe_step(self._batch_offset, log_probs.reshape(rows, -1), self.beam_size, kept=kept)
        return out

    return wrapper


def _update_finished(upstream):
    """Finished beams get score -inf (not -65504) so they can never be revived."""

    def wrapper(self):
        finished = torch.tensor(self.is_finished_list, dtype=torch.bool).to(self.topk_log_probs.device,
                                                                             non_blocking=True)
        before = self._batch_offset.tolist()
        # the last token of every slot, read back once here for beams_non_finished (which asks, per
        # finished hypothesis, whether it ended with EOS: one device sync each otherwise)
        self._entmax_last = self.alive_seq[:, -1].view(-1, self.beam_size).tolist()
        try:
            upstream(self)
        finally:
            self._entmax_last = None
        if self.done:
            return
        row = {b: i for i, b in enumerate(before)}
        keep = [row[b] for b in self._batch_offset.tolist()]
        self.topk_log_probs.masked_fill_(finished[keep], NEG_INF)

    return wrapper


def _beams_non_finished(upstream):
    """Never store a zero-probability hypothesis; stop when nothing finite is left.

    Dead slots (score -inf) are not hypotheses even if their token is EOS. When every slot is
    finished or dead the sentence is exhausted: it ends with the (possibly fewer than n_best)
    hypotheses of nonzero probability. Upstream's own bookkeeping is reused by asking it to
    finish with n_best = the number of finite hypotheses (a dead slot 0 stored to trigger the
    finish has score -inf and sorts after all of them, so it is never returned).
    """

    def wrapper(self, i, topk_scores_list, predictions, attention, step):
        # upstream indexes the beam-tiled src_len (B*beam,) with the sentence index i: use one row
        # per sentence while it runs, so stored attention is cut at that sentence's own length
        tiled = self.src_len
        self.src_len = tiled.view(-1, self.beam_size)[:, 0]
        try:
            return _store_or_stop(upstream, self, i, topk_scores_list, predictions, attention, step)
        finally:
            self.src_len = tiled

    return wrapper


_STOP_ATTRS = ("n_best", "num_hyp", "ratio")


def _is_eos(self, token: int) -> bool:
    eos = self.eos  # OpenNMT-py: one id; Eole: a list of ids
    return token in eos if isinstance(eos, (list, tuple)) else token == eos


def _store_or_stop(upstream, self, i, topk_scores_list, predictions, attention, step):
    """Upstream's bookkeeping for sentence i of the batch; True while its search goes on.

    The certificate does not depend on -n_best: where upstream stops a sentence (its top beam
    finished and n_best hypotheses found) while hypotheses of nonzero probability are still live, its
    output is kept as upstream chose it, and the search goes on for that sentence until no live
    hypothesis is left (certified: the beam saw the whole support) or a step prunes one (not certified),
    so that every -n_best gets the certificate of the same search (Peters et al. 2019, §4.1). Eole's
    static batches (``dynamic_shapes: false``) keep finished sentences in the batch behind finite
    stand-ins: there the certificate is settled at upstream's stop."""
    static = getattr(self, "static_batch_size", False)
    if static and bool(self.batch_finished[i]):
        return upstream(self, i, topk_scores_list, predictions, attention, step)  # (Eole) stored already
    fin = self.is_finished_list[i]
    scores = topk_scores_list[i]
    for j, s in enumerate(scores):
        if s == NEG_INF or math.isnan(s):
            fin[j] = False
    b = int(self._batch_offset[i])
    live = [s for f, s in zip(fin, scores) if not f and s != NEG_INF]
    finished_now = [j for j, f in enumerate(fin) if f]
    last = getattr(self, "_entmax_last", None)
    last = last[i] if last is not None else predictions[i, :, -1].tolist()
    truncated = sum(not _is_eos(self, last[j]) for j in finished_now)
    rec = getattr(self, "_entmax", None)
    if rec is not None and b in rec.settling:  # the output is fixed: only the certificate is open
        if live and _still_certifiable(rec, b):
            return True
        rec.settling.discard(b)
        rec.tracker.observe_stop(b, live, truncated=truncated)
        return False
    if live:
        n_before = len(self.hypotheses[b])
        going = upstream(self, i, topk_scores_list, predictions, attention, step)
        if not going:
            _entmax_answered(self, b, rec, n_before + len(finished_now))
            if not static and rec is not None and rec.tracker is not None and _still_certifiable(rec, b):
                rec.settling.add(b)  # (the next steps, until settled, see the branch above)
                return True
            _entmax_done(self, b, rec, live, truncated)
        return going
    n_found = sum(h[0] != NEG_INF for h in self.hypotheses[b]) + len(finished_now)
    saved = {k: getattr(self, k) for k in _STOP_ATTRS if hasattr(self, k)}
    for k in saved:  # how many hypotheses upstream waits for (Eole: num_hyp), and no early stop by ratio
        setattr(self, k, 0.0 if k == "ratio" else min(saved[k], n_found))
    fin[0] = True  # finish now; a dead slot 0 scores -inf and is cut by n_best above
    try:
        going = upstream(self, i, topk_scores_list, predictions, attention, step)
    finally:
        for k, v in saved.items():
            setattr(self, k, v)
    assert not going
    _entmax_answered(self, b, rec, n_found)
    _entmax_done(self, b, rec, [], truncated)
    return False


def _still_certifiable(rec: BeamRecord, b: int) -> bool:
    """No step of sentence b pruned a hypothesis of nonzero probability so far (reads the tracker's
    pending steps back: one transfer, at steps where a sentence is stopped or settling)."""
    cert = rec.tracker[b]
    return cert.pruned_steps == 0 and cert.truncated == 0


def _entmax_answered(self, b, rec, n_found):
    """Sentence b's output is fixed: scores become 0-dim tensors (``-with_score`` calls ``.item()``
    on them: upstream issue #2583) and the number of nonzero hypotheses returned is kept."""
    self.scores[b] = [s if torch.is_tensor(s) else torch.tensor(float(s)) for s in self.scores[b]]
    if rec is not None:
        rec.found[b] = min(n_found, self.n_best)


def _entmax_done(self, b, rec, live, truncated):
    """Sentence b's search ends: the live hypotheses left unexplored and those cut at max_length
    go to its certificate."""
    if rec is not None and rec.tracker is not None:
        rec.tracker.observe_stop(b, live, truncated=truncated)


def _coverage_wu(upstream):
    """``PenaltyBuilder.coverage_wu``: log(min(coverage, 1)) is -inf for a source word with zero coverage
    (sparse attention, or padding); coverage floored at the dtype's tiny keeps the penalty finite (values
    where upstream is finite are unchanged) and no inf - inf = NaN appears."""

    def wrapper(self, cov, beta=0.0):
        return upstream(self, cov.clamp_min(torch.finfo(cov.dtype).tiny), beta)

    return wrapper


def fewer_than_n_best(eos_of: Callable) -> Callable[[Callable], Callable]:
    """Wrapper factory for a result builder's ``from_batch`` (OpenNMT-py ``TranslationBuilder``, Eole
    ``PredictionBuilder``): sentences with fewer than n_best nonzero hypotheses are built with
    placeholders, then trimmed. ``eos_of(builder)``: the EOS id a placeholder consists of.

    A sentence with none at all keeps one empty hypothesis of score -inf, so that the output file
    stays line-aligned with the input (the summary and the JSON report say n_hyps = 0).
    """

    def make(upstream):
        def wrapper(self, batch_results):
            preds, scores, attn = (batch_results[k] for k in ("predictions", "scores", "attention"))
            counts = [len(p) for p in preds]
            if all(c >= self.n_best for c in counts):
                return upstream(self, batch_results)
            eos = eos_of(self)
            estim = batch_results.get("estim")  # (Eole: one quality estimate per hypothesis)
            for b, c in enumerate(counts):
                for _ in range(self.n_best - c):
                    preds[b].append(torch.tensor([eos]))
                    scores[b].append(torch.tensor(NEG_INF))
                    attn[b].append(torch.zeros(1, int(batch_results["batch"]["srclen"][b])))  # one EOS step
                    if estim is not None:
                        estim[b].append(float("nan"))
                if batch_results.get("alignment") and batch_results["alignment"][b]:
                    batch_results["alignment"][b] += [None] * (self.n_best - c)
            out = upstream(self, batch_results)
            for r, c in zip(out, counts):
                keep = max(c, 1)
                r.pred_sents, r.pred_scores = r.pred_sents[:keep], r.pred_scores[:keep]
                if isinstance(r.attns, list):
                    r.attns = r.attns[:keep]
                if isinstance(getattr(r, "estim", None), list):
                    r.estim = r.estim[:keep]
            return out

        return wrapper

    return make


Row = tuple[str, str, str, Callable[[Callable], Callable]]  # (name, reason, "module:Class.method", wrapper)


def rows(decode_strategy: str, beam_search: str, penalty_builder: str) -> list[Row]:
    """The hooks as patch rows, for a toolkit whose ``DecodeStrategy``, ``BeamSearchBase`` and
    ``PenaltyBuilder`` are at these ``"module:Class"`` paths."""
    ds, bs = decode_strategy, beam_search
    return [
        ("beam_min_length", "EOS before min_length gets -inf, not -65504 (below which a sparse model's zeros lie)",
         f"{ds}.ensure_min_length", _neg_inf_penalty(lambda s: len(s) <= s.min_length)),
        ("beam_ban_unk", "ban_unk_token: unk gets -inf, not -65504",
         f"{ds}.ensure_unk_removed", _neg_inf_penalty(lambda s: bool(s.ban_unk_token))),
        ("beam_block_ngrams", "a blocked n-gram repeat gets -inf, not -10e20",
         f"{ds}.block_ngram_repeats", _neg_inf_penalty(
             lambda s: s.block_ngram_repeat > 0 and len(s) >= s.block_ngram_repeat)),
        ("beam_target_prefix", "a token off the target prefix gets -inf, not -10000",
         f"{ds}.target_prefixing", _neg_inf_penalty(
             lambda s: s.target_prefix is not None and len(s) <= s.target_prefix.size(1))),
        ("beam_pick", "the beam's top-k counts the finite candidates it prunes (the certificate)",
         f"{bs}._pick", _pick),
        ("beam_finished_dead", "finished beams score -inf (not -65504): never revived",
         f"{bs}.update_finished", _update_finished),
        ("beam_nonzero_hypotheses", "no zero-probability hypothesis stored; a sentence with nothing finite left "
         "ends with fewer than n_best; the certificate settles", f"{bs}.beams_non_finished", _beams_non_finished),
        ("coverage_penalty", "coverage floored at the dtype's tiny: a finite penalty where sparse attention gives "
         "a source word zero coverage (upstream: -inf, then NaN)", f"{penalty_builder}.coverage_wu", _coverage_wu),
    ]
