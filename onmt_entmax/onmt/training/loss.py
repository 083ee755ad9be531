"""Training-side hooks: the Fenchel-Young criterion, ``generator_tau: auto`` and sparsity statistics."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from onmt_entmax import ops
from onmt_entmax.modules import EntmaxGenerator, TransformationLoss

from ..model.surgery import learned_alphas


def _logger():
    """OpenNMT-py's logger, imported late: importing this module must not import ``onmt`` (the
    import hook would then activate the plugin while this module is half-initialised)."""
    from onmt.utils.logging import logger

    return logger



@dataclass
class StatsContext:
    """What ``LossCompute`` needs beyond upstream state to report sparsity (attached as ``_entmax``)."""

    attn_time_first: bool = False  # InputFeedRNNDecoder stacks attention (T, B, S)


# Learned alphas are read from the model at report time only (no per-step device sync), and not
# carried in Statistics: OpenNMT-py gathers those across GPUs in a 4096-byte buffer. Every rank
# holds the same parameters, so the reporting rank's model is the one to read.
_alpha_source: Callable[[], dict] = dict


def current_alphas() -> dict:
    """{attention layer: [alpha per head]} of the model being trained in this process."""
    return _alpha_source()


def criterion_for(generator: EntmaxGenerator, ignore_index: int, label_smoothing: float) -> nn.Module:
    """The summed FY loss of the generator's transformation (stock cross-entropy kept for softmax)."""
    if not generator.transformation.sparse:
        return nn.CrossEntropyLoss(ignore_index=ignore_index, reduction="sum", label_smoothing=label_smoothing)
    return TransformationLoss(generator, ignore_index, label_smoothing)


def label_smoothing_warning(generator: EntmaxGenerator, label_smoothing: float) -> Optional[str]:
    """Why label smoothing undoes a sparse output layer, or None where it does not apply.

    The Fenchel-Young loss against the smoothed target q = (1-eps) e_y + eps/V is minimised at p = q,
    which is nonzero everywhere: the output learns to keep every word in its support.
    """
    t = generator.transformation
    if not t.sparse or label_smoothing <= 0:
        return None
    return (f"label_smoothing {label_smoothing:g} with generator_function {t.name}: the smoothed target gives every "
            "word probability, so the output layer learns a dense distribution (Multi30k, docs/results.md: 259 "
            "nonzero words a step with 0.1, 7 without). Set label_smoothing 0 to keep the output sparse.")


def wrap_from_opts(upstream: Callable) -> Callable:
    """``LossCompute.from_opts``: criterion from the *model's* generator (so ``-train_from`` keeps it)."""

    def from_opts(cls, opt, model, vocab, train=True):
        compute = upstream(cls, opt, model, vocab, train)
        gen = getattr(model, "generator", None)
        if isinstance(gen, EntmaxGenerator) and not getattr(opt, "copy_attn", False):
            compute.criterion = criterion_for(gen, compute.criterion.ignore_index, float(opt.label_smoothing))
            if train and (warning := label_smoothing_warning(gen, float(opt.label_smoothing))):
                _logger().warning(warning)
        global _alpha_source
        decoder = getattr(model, "decoder", None)
        compute._entmax = StatsContext(attn_time_first=type(decoder).__name__ == "InputFeedRNNDecoder")
        _alpha_source = functools.partial(learned_alphas, model)
        return compute

    return from_opts


def resolve_auto_tau(compute, batch: dict, output: Tensor) -> float:
    """tau = mean over target positions of the 1.5-entmax threshold of the untrained model's logits.

    "Speeding Up Entmax" (Tezekbayev et al.): alpha-ReLU with this constant tau matches the scale
    of entmax at initialisation. Averaged over ranks in multi-GPU training so every rank agrees.
    """
    gen: EntmaxGenerator = compute.generator
    tgt = batch["tgt"][:, compute.tgt_shift_index:, 0]
    out = output[:, : tgt.size(1)]
    keep = tgt.reshape(-1).ne(compute.padding_idx)
    with torch.no_grad():
        logits = gen(out.reshape(-1, out.size(-1)))[keep].float()
        stats = torch.stack([ops.entmax_threshold(logits, alpha=1.5, dim=-1).sum(), logits.new_tensor(len(logits))])
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(stats)
    tau = float(stats[0] / stats[1].clamp(min=1))
    gen.set_tau(tau)
    _logger().info("generator_tau auto: tau = %.6g (mean 1.5-entmax threshold over %d target positions)",
                tau, int(stats[1]))
    return tau


def _attention_counts(attn: Tensor, keep: Tensor, time_first: bool) -> Optional[tuple[Tensor, Tensor]]:
    """(number of nonzero weights, rows) over the rows of non-pad target positions, as device
    counts (no boolean indexing: that would synchronise the host), or None if the shapes differ."""
    if time_first:
        attn = attn.transpose(0, 1)
    attn = attn.reshape(-1, attn.size(-1))
    if attn.size(0) != keep.numel():
        return None
    return ((attn > 0) & keep[:, None]).sum(), keep.sum()


def _output_nonzeros(criterion, gen: EntmaxGenerator, scores: Tensor, target: Tensor, keep: Tensor,
                     padding_idx: int) -> Tensor:
    """Nonzero output probabilities over the non-pad rows: the support sizes the loss just computed
    for this target, else (another criterion) counted from pi(scores)."""
    support = criterion.support_of(target) if isinstance(criterion, TransformationLoss) \
        and criterion.ignore_index == padding_idx else None
    if support is not None:
        return support.sum()
    return ((gen.probs(scores.detach().float()) > 0) & keep[:, None]).sum()


def _settle(sums: dict) -> None:
    """The counts this batch left on the device, read back in one transfer (one host sync a step,
    not one a count)."""
    pending = {k: v for k, v in sums.items() if isinstance(v, Tensor)}
    if pending:
        values = torch.stack([v.to(torch.float64) for v in pending.values()]).tolist()
        for name, value in zip(pending, values):
            sums[name] = value


def wrap_forward(upstream: Callable) -> Callable:
    """``LossCompute.forward``: resolve ``generator_tau: auto`` first; count attended source tokens."""

    def forward(self, batch, output, attns, trunc_start=0, trunc_size=None):
        gen = self.generator
        if isinstance(gen, EntmaxGenerator) and gen.tau_pending():
            resolve_auto_tau(self, batch, output)
        loss, stats = upstream(self, batch, output, attns, trunc_start, trunc_size)
        ctx: Optional[StatsContext] = getattr(self, "_entmax", None)
        attn = attns.get("std") if isinstance(attns, dict) else None
        if ctx is not None and isinstance(attn, Tensor):
            start = trunc_start + self.tgt_shift_index
            stop = trunc_start + (trunc_size if trunc_size is not None else batch["tgt"].size(1) - trunc_start)
            keep = batch["tgt"][:, start:stop, 0].reshape(-1).ne(self.padding_idx)
            with torch.no_grad():
                counts = _attention_counts(attn.detach(), keep, ctx.attn_time_first)
            if counts is not None:
                sums = stats.__dict__.setdefault("entmax_sums", {})
                sums["attn_nnz"] = sums.get("attn_nnz", 0.0) + counts[0]
                sums["attn_rows"] = sums.get("attn_rows", 0) + counts[1]
        _settle(getattr(stats, "entmax_sums", {}))  # (with the output counts of _stats)
        return loss, stats

    return forward


def wrap_stats(upstream: Callable) -> Callable:
    """``LossCompute._stats``: name the loss; count nonzero output probabilities of sparse generators."""

    def _stats(self, bsz, loss, scores, target):
        stats = upstream(self, bsz, loss, scores, target)
        gen = self.generator
        if isinstance(gen, EntmaxGenerator) and not self.copy_attn:
            t = gen.transformation
            stats.entmax_loss_name = t.loss_name
            if t.sparse:  # device counts, read back with the attention counts (wrap_forward's _settle)
                keep = target.ne(self.padding_idx)
                with torch.no_grad():
                    nnz = _output_nonzeros(self.criterion, gen, scores, target, keep, self.padding_idx)
                sums = stats.__dict__.setdefault("entmax_sums", {})
                sums["out_nnz"] = sums.get("out_nnz", 0.0) + nnz
                sums["out_rows"] = sums.get("out_rows", 0) + keep.sum()
        return stats

    return _stats
