"""Queries and resets over a whole model made with these modules, whatever toolkit built it.

Used by both adapters: which transformation the output layer has (ensembles included: members are
``generator.model_generators``), the decoding scores it gives, the learned alphas per layer, and
the resets a new model needs.
"""
from __future__ import annotations

from typing import Callable, Iterator, Optional

import torch
from torch import Tensor, nn

from onmt_entmax import ops
from onmt_entmax.registry import Transformation

from .attention import AttentionNormalizer, LearnableAlpha
from .generator import EntmaxGenerator


def formula_tau(generator: nn.Module) -> float:
    """tau of Speeding Up Entmax eq. (3) for this output layer (d_model inputs, V outputs)."""
    from onmt_entmax.ops.tau_estimate import tau_formula

    return tau_formula(generator.in_features, generator.out_features, alpha=generator.transformation.alpha)


def has_sparse_transformation(model: nn.Module) -> bool:
    """Whether a module of the model (generator, attention normalizer) has a sparse transformation:
    softmax models (stock or ours) run no kernel of ours."""
    return any(getattr(getattr(m, "transformation", None), "sparse", False) for m in model.modules())


def reset_learnable_alphas(model: nn.Module) -> None:
    """Undo ``param_init``'s uniform init on alpha logits: a new model starts at the configured alpha."""
    for module in model.modules():
        if isinstance(module, LearnableAlpha):
            module.reset_parameters()


def learned_alphas(model: nn.Module) -> dict[str, list[float]]:
    """{attention module name: [alpha per head]} for every attention with learnable alpha."""
    names, alphas = [], []
    for name, module in model.named_modules():
        if isinstance(module, AttentionNormalizer) and module.alpha is not None:
            names.append(name.removesuffix(".softmax"))
            alphas.append(module.current_alpha())
    if not alphas:
        return {}
    flat = torch.cat(alphas).tolist()  # one device sync per call, not one per layer
    out, start = {}, 0
    for name, a in zip(names, alphas):
        out[name] = [round(x, 4) for x in flat[start:start + a.numel()]]
        start += a.numel()
    return out


def _member_generators(generator: nn.Module) -> Iterator[nn.Module]:
    members = getattr(generator, "model_generators", None)  # onmt.decoders.ensemble.EnsembleGenerator
    if members is None:
        yield generator
    else:
        yield from members


def member_transformations(model_or_generator: nn.Module) -> list[Optional[Transformation]]:
    """Each output layer's transformation, one a member for an ensemble; None for a stock (softmax,
    copy) generator."""
    generator = getattr(model_or_generator, "generator", model_or_generator)
    return [getattr(g, "transformation", None) for g in _member_generators(generator)]


def transformation_of(model_or_generator: nn.Module) -> Optional[Transformation]:
    """The transformation decoding must use, or None for stock softmax / copy generators.

    Ensembles: the members' common transformation; ValueError if the members differ.
    """
    generator = getattr(model_or_generator, "generator", model_or_generator)
    ts = [g.transformation if isinstance(g, EntmaxGenerator) else None for g in _member_generators(generator)]
    specs = {t.spec() if t is not None else ("softmax", None, None, None) for t in ts}
    if len(specs) > 1:
        raise ValueError(f"ensemble members use different generator functions: {sorted(map(str, specs))}")
    return ts[0]


def generator_log_probs(model_or_generator: nn.Module, logits: Tensor) -> Tensor:
    """log pi(logits) with the model's own mapping: -inf where the probability is exactly 0.

    The same function training used (alpha-ReLU: log of its unnormalized scores); plain
    ``log_softmax`` for stock generators. This is what the translator hook feeds to beam search.
    """
    if isinstance(model_or_generator, EntmaxGenerator):  # one model's generator, at every decoding step
        return model_or_generator.log_probs(logits)
    # a stock generator (no model.generator, no ensemble members): asked of _modules, where a getattr
    # with a default would raise inside nn.Module at every step
    children = getattr(model_or_generator, "_modules", None)
    if children is not None and "generator" not in children and "model_generators" not in children:
        return torch.log_softmax(logits, dim=-1)
    generator = getattr(model_or_generator, "generator", model_or_generator)
    member = next(iter(_member_generators(generator)))
    if transformation_of(generator) is None or not isinstance(member, EntmaxGenerator):
        return torch.log_softmax(logits, dim=-1)
    return member.log_probs(logits)


def warm_up_kernels_of(model: nn.Module, log: Callable[[str], None] = lambda message: None) -> bool:
    """With the model loaded, run the kernels' once-a-process set-up on its device (`ops.warm_up_kernels`,
    docs/kernels.md: otherwise paid in the first beam step) when a module of the model has a
    sparse transformation (softmax's decoding runs no kernel of ours). On a GPU whose kernels Triton has
    not compiled yet, ``log`` says so first: the first batches compile them. True when it ran."""
    if not has_sparse_transformation(model):
        return False
    param = next(model.parameters(), None)
    if param is None:
        return False
    cache = ops.cold_kernel_cache(param.device)
    if cache is not None:
        log(f"compiling the sparse kernels for this GPU as decoding first meets them (once: Triton caches them in "
            f"{cache}); the first batches take longer")
    return ops.warm_up_kernels(param.device)
