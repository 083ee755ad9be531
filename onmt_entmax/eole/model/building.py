"""Model surgery after Eole builds a model, before any checkpoint is loaded.

``BaseModel.build`` (training and inference) builds the blocks and the generator; the wrappers here
give the model our output layer (``EntmaxGenerator``, an ``nn.Linear`` with the same parameters, plus
alpha-ReLU's persistent ``tau`` buffer) and an ``AttentionNormalizer`` on every attention whose
function is sparse (``<attention>.softmax``, ``<global attention>.entmax_normalizer``). Learned alphas
(``...softmax.alpha.a``) and tau are then ordinary weights: Eole saves them in ``model.00.safetensors``
and loads them module by module like the rest. ``init_weights`` draws every parameter of a new model
(``param_init_method: uniform``): learnable alphas are reset to their configured start afterwards.
"""
from __future__ import annotations

from typing import Callable

from torch import nn

from onmt_entmax import ops
from onmt_entmax.errors import ConfigError
from onmt_entmax.modules import AttentionNormalizer, EntmaxGenerator
from onmt_entmax.modules.models import formula_tau, has_sparse_transformation, reset_learnable_alphas
from onmt_entmax.options.model import attention_spec, generator_transformation
from onmt_entmax.registry import get_transformation

from ..validation import check_model_config, flat_options
from .attention import NORMALIZER, RNN_NORMALIZER


def attention_kind(module) -> str:
    """enc / dec / context of an Eole ``MultiHeadedAttention``."""
    from eole.modules.multi_headed_attn import ContextMHA

    if isinstance(module, ContextMHA):
        return "context"
    return "dec" if getattr(module, "is_decoder", False) else "enc"


def install_generator(model: nn.Module, opt) -> None:
    """``EntmaxGenerator`` sharing the stock generator's parameters (and any tying to the embeddings)."""
    gen = getattr(model, "generator", None)
    if gen is None:  # an encoder
        return
    if type(gen) is not nn.Linear:
        if opt.generator_function != "softmax":  # (a LoRA or quantized generator: upstream's softmax only)
            raise ConfigError(f"generator_function {opt.generator_function} needs a plain linear output layer; "
                              f"this model's is a {type(gen).__name__} (lora_embedding or quantization)")
        return
    model.generator = EntmaxGenerator.from_linear(gen, generator_transformation(opt))
    if getattr(opt, "generator_tau", None) == "formula" and model.generator.tau_pending():
        model.generator.set_tau(formula_tau(model.generator))


def install_attention(model: nn.Module, opt) -> int:
    """A normalizer in every ``MultiHeadedAttention`` whose kind is sparse; flash-attn's KV-cache decoding
    (softmax only) off in decoders whose self-attention is sparse. Returns how many were installed."""
    from eole.modules.multi_headed_attn import MultiHeadedAttention

    learn = bool(getattr(opt, "learn_alpha", False))
    count = 0
    for module in model.modules():
        if not isinstance(module, MultiHeadedAttention):
            continue
        kind = attention_kind(module)
        name, alpha = attention_spec(opt, kind)
        t = get_transformation(name, alpha=alpha, n_iter=getattr(opt, "bisect_iter", None), option="attention_function")
        if not t.sparse:
            continue
        normalizer = AttentionNormalizer(t, heads=module.heads // module.parallel_gpu, learn_alpha=learn,
                                         init_alpha=alpha)
        normalizer.kind = kind  # for reports and tests
        setattr(module, NORMALIZER, normalizer)
        count += 1
    for decoder in model.modules():
        layers = getattr(decoder, "transformer_layers", None)
        if layers is not None and hasattr(decoder, "self_attn_backend") and any(
                getattr(getattr(layer, "self_attn", None), NORMALIZER, None) is not None for layer in layers):
            decoder.self_attn_backend = "pytorch"
    return count


def install_rnn_attention(model: nn.Module, opt) -> int:
    """Our normalizer on the RNN decoder's global attention (sparsemax too: upstream's is replaced)."""
    from eole.modules.global_attention import GlobalAttention

    t = get_transformation(opt.global_attention_function, alpha=getattr(opt, "global_attention_alpha", None),
                           n_iter=getattr(opt, "bisect_iter", None), option="global_attention_function")
    count = 0
    for module in model.modules():
        if isinstance(module, GlobalAttention) and t.sparse:
            setattr(module, RNN_NORMALIZER, AttentionNormalizer(t))
            module.attn_func = t.name
            count += 1
    return count


def install(model: nn.Module, model_config) -> nn.Module:
    """All surgery on a freshly built model (checked options first)."""
    check_model_config(model_config)
    opt = flat_options(model_config)
    install_generator(model, opt)
    install_attention(model, opt)
    install_rnn_attention(model, opt)
    return model


def wrap_build(upstream: Callable) -> Callable:
    """``BaseModel.build`` (classmethod): upstream's blocks and generator, then ours."""

    def build(cls, model_config, vocabs, running_config):
        if getattr(model_config, "learn_alpha", False) and getattr(running_config, "parallel_gpu", 1) > 1:
            raise ConfigError("learn_alpha with parallel_mode tensor_parallel: each GPU would learn the alphas of "
                              "its own heads and Eole saves only the first GPU's; use data_parallel")
        model = upstream(cls, model_config, vocabs, running_config)
        model = install(model, model_config)
        if has_sparse_transformation(model) and _gpu(running_config):
            ops.prepare_kernels_in_background()  # Triton's host set-up overlaps the weights' loading
        return model

    return build


def _gpu(running_config) -> bool:
    return bool(getattr(running_config, "gpu_ranks", None))


def wrap_compute_log_probs(upstream: Callable) -> Callable:
    """``BaseModel.compute_log_probs`` (RL training) takes ``log_softmax`` of the generator's logits: right
    for softmax only, so a sparse output layer is refused there rather than trained with another loss."""

    def compute_log_probs(self, *args, **kwargs):
        t = getattr(getattr(self, "generator", None), "transformation", None)
        if t is not None and t.sparse:
            raise ConfigError(f"compute_log_probs (RL training) uses log_softmax of the logits; generator_function "
                              f"{t.name} has other log-probabilities: not supported with Eole's RL trainer")
        return upstream(self, *args, **kwargs)

    return compute_log_probs


def wrap_init_weights(upstream: Callable) -> Callable:
    """``BaseModel.init_weights``: a new model's learnable alphas start at the configured alpha."""

    def init_weights(self, running_config):
        upstream(self, running_config)
        reset_learnable_alphas(self)

    return init_weights
