"""Attention normalizers: drop-in replacements for ``nn.Softmax(dim=-1)`` over attention scores."""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from onmt_entmax import ops
from onmt_entmax.ops import tensor_version
from onmt_entmax.registry import EntmaxBisect, Transformation

ALPHA_MIN, ALPHA_MAX = 1.01, 2.0


class LearnableAlpha(nn.Module):
    """One learnable alpha per head: alpha_h = clamp(1 + sigmoid(a_h), 1.01, 2).

    The parametrisation of "Adaptively Sparse Transformers" (Correia et al. 2019): alpha stays in
    (1, 2] whatever the optimizer does. ``a`` is a 1-D parameter (OpenNMT-py's loader needs >= 1-D),
    initialised to a_h = logit(alpha_0 - 1), i.e. a = 0 for alpha_0 = 1.5.
    """

    def __init__(self, heads: int, init_alpha: float = 1.5):
        super().__init__()
        if not ALPHA_MIN <= init_alpha < ALPHA_MAX:
            raise ValueError(f"a learnable alpha must start in [{ALPHA_MIN}, {ALPHA_MAX}), got {init_alpha}")
        self.init_alpha = float(init_alpha)
        self.a = nn.Parameter(torch.full((heads,), self._logit(init_alpha)))

    @staticmethod
    def _logit(alpha: float) -> float:
        q = alpha - 1.0
        return math.log(q / (1.0 - q))

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.a.fill_(self._logit(self.init_alpha))

    def forward(self) -> Tensor:
        if torch.is_grad_enabled():
            return self._alpha()
        # no grad (decoding): the same alphas at every call until `a` changes; one computation, not one a call
        key = self.state_key()
        if getattr(self, "_cached_key", None) != key:
            self._cached, self._cached_key = self._alpha(), key
        return self._cached

    def state_key(self) -> tuple:
        """Changes whenever the alphas may have: in-place updates (optimizer steps, loading) bump the
        parameter's version, .to() and assignment replace its storage."""
        a = self._parameters["a"]  # (not self.a: nn.Module's attribute lookup, at every decoding call)
        return tensor_version(a), a.data_ptr(), a.device

    def _alpha(self) -> Tensor:
        return ops.bounded_alpha(self.a, ALPHA_MIN, ALPHA_MAX)

    def extra_repr(self) -> str:
        return f"heads={self.a.numel()}, init_alpha={self.init_alpha}"


class AttentionNormalizer(nn.Module):
    """p = pi(scores) along the last dim, for scores (..., H, T_q, T_k) or (N, T_k).

    Masked keys arrive as -inf (RNN) or -1e18 (Transformer); both get weight exactly 0. With
    ``heads`` and ``learn_alpha``, head h uses alpha-entmax with its own learnable alpha_h (bisection,
    differentiable in alpha); the head axis is dim -3. Computed in float32 (the ops upcast
    fp16/bf16 inside), returned in the input dtype.
    """

    def __init__(self, transformation: Transformation, heads: Optional[int] = None, learn_alpha: bool = False,
                 init_alpha: Optional[float] = None):
        super().__init__()
        self.transformation = transformation
        self.alpha: Optional[LearnableAlpha] = None
        if learn_alpha:
            if heads is None:
                raise ValueError("learn_alpha needs the number of heads")
            if not transformation.sparse or transformation.name == "sparsemax":
                raise ValueError(f"learn_alpha needs attention_function entmax15 or entmax_bisect "
                                 f"(the starting alpha), got {transformation.name}")
            start = init_alpha if init_alpha is not None else getattr(transformation, "alpha", None) or 1.5
            self.alpha = LearnableAlpha(heads, start)
            # alpha-entmax with a tensor alpha always takes the bisection path
            self.transformation = EntmaxBisect(alpha=start, n_iter=getattr(transformation, "n_iter", None))

    def current_alpha(self) -> Optional[Tensor]:
        """Per-head alphas (H,) if learned, else None."""
        return None if self.alpha is None else self.alpha().detach()

    def forward(self, scores: Tensor) -> Tensor:
        if self.alpha is None:
            return self.transformation.mapping(scores, dim=-1)
        return self.transformation.mapping(scores, dim=-1, alpha=self._alpha_per_head())

    def _alpha_per_head(self, learned: Optional[LearnableAlpha] = None) -> Tensor:
        """The learned alphas (``self.alpha``, or the ``learned`` the caller has looked up) as (H, 1, 1),
        broadcasting over (..., H, T_q, T_k) scores (in range by construction: not checked again);
        without grad the same tensor at every call until the alphas change."""
        learned = self.alpha if learned is None else learned
        if torch.is_grad_enabled():
            # in [1.01, 2] for every finite parameter (NaN only after NaN gradients, which the loss
            # shows): the ops need not check it again at every training call
            return ops.alpha_in_range(learned().view(-1, 1, 1))
        # decoding asks at every step of every layer: keyed as LearnableAlpha's own cache, checked
        # here without a module call
        key = learned.state_key()
        if self.__dict__.get("_view_key") != key:
            self._view, self._view_key = ops.alpha_in_range(learned().view(-1, 1, 1)), key
        return self._view

    def attend(self, q: Tensor, k: Tensor, v: Tensor, keep: Optional[Tensor] = None, dropout_p: float = 0.0,
               return_weights: bool = False, scale: Optional[float] = None):
        """drop(pi(scale q k^T)) v, keys where ``keep`` is False masked: attention with this
        normalizer in one call (on CUDA one fused kernel without gradient, one autograd node with,
        learned alphas included). q, k, v (B, H, T, d); ``scale`` defaults to 1 / sqrt(d);
        ``return_weights``: (out, the weights before dropout, no gradient)."""
        t = self.transformation
        n_iter = getattr(t, "n_iter", None)
        # (a submodule, or None: looked up once, and in _modules, at every layer and decoding step)
        learned = self._modules.get("alpha")
        if learned is not None and torch.is_grad_enabled():  # (the op takes the parameter itself)
            return ops.sparse_attention(q, k, v, keep, kind=t.name, scale=scale, n_iter=n_iter, dropout_p=dropout_p,
                                        return_weights=return_weights, alpha_logit=learned.a,
                                        alpha_bounds=(ALPHA_MIN, ALPHA_MAX))
        alpha = self._alpha_per_head(learned) if learned is not None else t.alpha
        return ops.sparse_attention(q, k, v, keep, kind=t.name, alpha=alpha, scale=scale, n_iter=n_iter,
                                    dropout_p=dropout_p, return_weights=return_weights)

    def extra_repr(self) -> str:
        return self.transformation.describe()
