"""Model surgery after OpenNMT-py builds a model: our generator and attention normalizers.

Runs inside the wrapped ``build_base_model``, i.e. after the modules exist and before any
checkpoint is loaded, so learnable alphas and the alpha-ReLU threshold load like other weights.
"""
from __future__ import annotations

from torch import nn

from onmt_entmax.modules import AttentionNormalizer, EntmaxGenerator
from onmt_entmax.modules.models import (
    formula_tau,
    generator_log_probs,
    has_sparse_transformation,
    learned_alphas,
    reset_learnable_alphas,
    transformation_of,
)
from onmt_entmax.options.model import attention_spec, generator_transformation
from onmt_entmax.registry import get_transformation

__all__ = ["formula_tau", "generator_log_probs", "has_sparse_transformation", "install", "learned_alphas",
           "reset_learnable_alphas", "transformation_of"]


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
