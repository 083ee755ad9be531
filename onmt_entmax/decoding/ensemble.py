"""Ensembles that average raw probabilities (Peters et al. 2019, Sec. 4.1).

p_ens(v) = (1/M) sum_m p_m(v). With sparse members, p_ens(v) = 0 iff every member gives v
probability zero, so the ensemble support is the union of the members' supports. Computed in
log space as logsumexp_m(log p_m) - log M, which keeps -inf for tokens all members rule out
(never NaN: torch.logsumexp of an all -inf slice is -inf).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import Tensor, nn

from onmt_entmax.modules.models import generator_log_probs, member_transformations

# set on an ensemble's generator whose forward returns log((1/M) sum_m p_m): the translators' log-prob
# hook passes it through instead of mapping it again (log_softmax would renormalise alpha-ReLU scores;
# entmax(log p) is not log p)
LOG_PROBS_OUT = "_entmax_log_probs_out"


def average_probs(log_probs: Sequence[Tensor] | Tensor, weights: Sequence[float] | None = None) -> Tensor:
    """log( sum_m w_m p_m ) from member log-probabilities (stacked on dim 0 or a list).

    ``weights`` default to 1/M; they must be positive and are normalised to sum to 1.
    Computed in float32 (or float64 if given) and returned in the members' dtype.
    """
    stacked = log_probs if isinstance(log_probs, Tensor) else torch.stack(list(log_probs))
    if stacked.dim() < 2 or stacked.size(0) == 0:
        raise ValueError(
            f"average_probs expects M >= 1 member log-prob tensors stacked on dim 0, got shape {tuple(stacked.shape)}"
        )
    dtype = stacked.dtype
    work = stacked.float() if dtype in (torch.float16, torch.bfloat16) else stacked
    m = work.size(0)
    if weights is None:
        return (torch.logsumexp(work, dim=0) - math.log(m)).to(dtype)
    if len(weights) != m or any(w <= 0 for w in weights):
        raise ValueError(f"ensemble weights must be {m} positive numbers, got {list(weights)}")
    total = float(sum(weights))
    logw = torch.tensor([math.log(w / total) for w in weights], dtype=work.dtype, device=work.device)
    logw = logw.view(-1, *([1] * (work.dim() - 1)))
    return torch.logsumexp(work + logw, dim=0).to(dtype)


def check_same_vocab(
    vocabs: Sequence[Sequence[str]], names: Sequence[str] | None = None, what: str = "target vocabulary",
    whose: str = "ensemble members",
) -> None:
    """Raise ValueError unless every member has the same vocabulary, in the same order.

    Averaging p_m(v) token by token (or two models' weights row by row) is meaningless if index v names
    different words.
    """
    if len(vocabs) < 2:
        return
    names = list(names) if names is not None else [f"model {i}" for i in range(len(vocabs))]
    ref = list(vocabs[0])
    for name, voc in zip(names[1:], vocabs[1:]):
        voc = list(voc)
        if voc == ref:
            continue
        if len(voc) != len(ref):
            detail = f"{len(ref)} vs {len(voc)} tokens"
        else:
            i = next(i for i, (a, b) in enumerate(zip(ref, voc)) if a != b)
            detail = f"token {i} is {ref[i]!r} in {names[0]} but {voc[i]!r} in {name}"
        raise ValueError(
            f"{whose} must share one {what}: {names[0]} and {name} differ ({detail})"
        )


def check_same_attention_layout(layouts: Sequence[str | None], names: Sequence[str]) -> None:
    """Raise ValueError unless every member whose layout is known (not None) returns its decoder's attention
    in the first known one's layout (e.g. "(batch, target step, source)").

    An ensemble steps its members together and averages their attention at every step (``torch.stack`` of
    the members' tensors): tensors in different layouts cannot be stacked, whatever their sizes say.
    """
    known = [(name, layout) for name, layout in zip(names, layouts) if layout is not None]
    for name, layout in known[1:]:
        if layout != known[0][1]:
            raise ValueError(f"ensemble members whose decoders return attention in different layouts cannot be "
                             f"averaged step by step: {known[0][0]} returns {known[0][1]}, {name} {layout}")


def members_average(generators: Sequence[nn.Module], hidden: Sequence[Tensor]) -> Tensor:
    """log((1/M) sum_m p_m) of an ensemble's output layers, p_m = member m's own mapping of its logits
    (sparsemax, entmax, alpha-ReLU, softmax) at its decoder states ``hidden[m]``: -inf where every member
    gives 0."""
    return average_probs([generator_log_probs(g, g(h)) for h, g in zip(hidden, generators)])


def average_raw_probs(model: nn.Module, asked: bool) -> bool:
    """Switch a loaded ensemble's generator to ``members_average`` when ``asked`` (``avg_raw_probs``) or
    when a member's output layer is sparse (its logits averaged would give every token p > 0); returns
    whether it did."""
    raw = asked or any(t is not None and t.sparse for t in member_transformations(model))
    setattr(model.generator, LOG_PROBS_OUT, raw)
    return raw


def returns_log_probs(generator: nn.Module) -> bool:
    """Whether ``generator`` is an ensemble's that averages raw probabilities (``LOG_PROBS_OUT``), read
    from its own ``__dict__`` (a getattr with a default raises inside nn.Module, at every step)."""
    return bool(vars(generator).get(LOG_PROBS_OUT, False))


def averaging_forward(upstream: Callable, refusal: Callable[[str], Exception]) -> Callable:
    """An ensemble generator's ``forward(hidden, attn, src_map)`` (both toolkits' ``EnsembleGenerator``):
    ``members_average`` when the generator ``returns_log_probs``, upstream's otherwise. Copy attention
    (``attn`` given) has no per-member mapping to average: ``refusal(message)`` is raised."""

    def forward(self, hidden, attn=None, src_map=None):
        if not returns_log_probs(self):
            return upstream(self, hidden, attn, src_map)
        if attn is not None:
            raise refusal("raw-probability ensembles do not support copy attention generators")
        return members_average(self.model_generators, hidden)

    return forward
