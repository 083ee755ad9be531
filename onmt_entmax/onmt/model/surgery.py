"""Model surgery after OpenNMT-py builds a model: our generator and attention normalizers.

Runs inside the wrapped ``build_base_model``, i.e. after the modules exist and before any
checkpoint is loaded, so learnable alphas and the alpha-ReLU threshold load like other weights.
"""
from __future__ import annotations

from typing import Iterator, Optional

import torch
from torch import Tensor, nn

from onmt_entmax.modules import AttentionNormalizer, EntmaxGenerator
from onmt_entmax.modules.attention import LearnableAlpha
from onmt_entmax.registry import Transformation, get_transformation

from ..options import DEFERRED_TAU
from ..validation import attention_spec


def generator_transformation(opt) -> Transformation:
    tau = getattr(opt, "generator_tau", None)
    return get_transformation(getattr(opt, "generator_function", "softmax"), alpha=getattr(opt, "generator_alpha", None),
                              tau=None if tau in DEFERRED_TAU else tau, n_iter=getattr(opt, "bisect_iter", None),
                              option="generator_function")


def _attention_kind(module) -> str:
    if getattr(module, "attn_type", None) == "context":
        return "context"
    return "dec" if getattr(module, "is_decoder", False) else "enc"


def install_generator(model: nn.Module, opt) -> None:
    """Replace the stock ``nn.Linear`` generator by an ``EntmaxGenerator`` sharing its parameters."""
    gen = getattr(model, "generator", None)
    if getattr(opt, "copy_attn", False) or not isinstance(gen, nn.Linear):
        return  # CopyGenerator: stock softmax path (validation forbids a sparse one)
    t = generator_transformation(opt)
    if isinstance(gen, EntmaxGenerator):
        gen.transformation = t
    else:
        model.generator = EntmaxGenerator.from_linear(gen, t)
    if getattr(opt, "generator_tau", None) == "formula" and isinstance(model.generator, EntmaxGenerator) \
            and model.generator.tau_pending():
        model.generator.set_tau(formula_tau(model.generator))


def formula_tau(generator: nn.Module) -> float:
    """tau of Speeding Up Entmax eq. (3) for this output layer (d_model inputs, V outputs)."""
    from onmt_entmax.ops.tau_estimate import tau_formula

    return tau_formula(generator.in_features, generator.out_features, alpha=generator.transformation.alpha)


def install_transformer_attention(model: nn.Module, opt) -> int:
    """Sparse normalizers in every ``MultiHeadedAttention`` whose kind asks for one; returns how many.

    A sparse one also sets the module's ``self_attn_type`` to ``scaled-dot``: on CUDA, OpenNMT-py's
    ``scaled-dot-flash`` path calls ``scaled_dot_product_attention`` (softmax) and never the normalizer.
    """
    from onmt.modules.multi_headed_attn import MultiHeadedAttention

    n_iter = getattr(opt, "bisect_iter", None)
    learn = bool(getattr(opt, "learn_alpha", False))
    count = 0
    for module in model.modules():
        if not isinstance(module, MultiHeadedAttention):
            continue
        name, alpha = attention_spec(opt, _attention_kind(module))
        t = get_transformation(name, alpha=alpha, n_iter=n_iter, option="attention_function")
        if not t.sparse:
            continue
        heads = module.head_count // getattr(module, "parallel_gpu", 1)
        kind = _attention_kind(module)
        module.softmax = AttentionNormalizer(t, heads=heads, learn_alpha=learn, init_alpha=alpha)
        module.softmax.kind = kind  # enc / dec / context, for reports and tests
        module.self_attn_type = "scaled-dot"
        count += 1
    return count


def install_rnn_attention(model: nn.Module, opt) -> int:
    """Our normalizer on the RNN decoder's global attention (not on copy attention)."""
    from onmt.modules.global_attention import GlobalAttention

    name = getattr(opt, "global_attention_function", "softmax")
    t = get_transformation(name, alpha=getattr(opt, "global_attention_alpha", None),
                           n_iter=getattr(opt, "bisect_iter", None), option="global_attention_function")
    attn = getattr(getattr(model, "decoder", None), "attn", None)
    if not isinstance(attn, GlobalAttention):
        return 0
    if t.sparse:
        attn.attn_func = name
        attn.entmax_normalizer = AttentionNormalizer(t)
    return int(t.sparse)


def install(model: nn.Module, opt) -> nn.Module:
    """All surgery on a freshly built model (before weights are loaded)."""
    install_generator(model, opt)
    install_transformer_attention(model, opt)
    install_rnn_attention(model, opt)
    return model


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


# --- for decoding (issue 4 hooks call these) --------------------------------------------------
def _member_generators(generator: nn.Module) -> Iterator[nn.Module]:
    members = getattr(generator, "model_generators", None)  # onmt.decoders.ensemble.EnsembleGenerator
    if members is None:
        yield generator
    else:
        yield from members


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
