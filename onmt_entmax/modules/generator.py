"""Output layer: logits z = W h + b, and the model's own transformation for training and decoding."""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from onmt_entmax import ops
from onmt_entmax.ops import tensor_version
from onmt_entmax.registry import AlphaReLU, Transformation, get_transformation


class EntmaxGenerator(nn.Linear):
    """``nn.Linear`` returning logits, which also knows how to turn them into probabilities.

    Training feeds the logits to the Fenchel-Young loss of ``transformation``; decoding calls
    ``log_probs`` = log pi(z) (-inf for zeros). The state dict is that of ``nn.Linear`` (so stock
    checkpoints load), plus a persistent ``tau`` buffer of shape (1,) for alpha-ReLU: NaN until
    ``generator_tau: auto`` resolves it, then saved in every checkpoint.
    """

    def __init__(self, in_features: int, out_features: int, transformation: Transformation, bias: bool = True,
                 device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.transformation = transformation
        if isinstance(transformation, AlphaReLU):
            tau = math.nan if transformation.tau is None else transformation.tau
            self.register_buffer("tau", torch.tensor([tau], dtype=torch.float32, device=device))

    @classmethod
    def from_linear(cls, linear: nn.Linear, transformation: Transformation) -> "EntmaxGenerator":
        """Wrap an existing ``nn.Linear`` keeping its parameters (and any weight tying)."""
        gen = cls(linear.in_features, linear.out_features, transformation, bias=linear.bias is not None,
                  device="meta")
        gen.weight = linear.weight
        if linear.bias is not None:
            gen.bias = linear.bias
        if hasattr(gen, "tau"):
            gen.tau = gen.tau.new_empty((1,), device=linear.weight.device).fill_(
                math.nan if transformation.tau is None else transformation.tau)
        return gen

    # alpha-ReLU: the buffer is the source of truth (it travels with checkpoints and devices). Its
    # value is read back (a device sync on a GPU) only when something changed since the last read:
    # in-place writes (set_tau, load_state_dict) bump the buffer's version, .to() / assignment
    # replace the buffer, and a new transformation object has not seen it yet.
    def _sync_tau(self) -> Transformation:
        if "tau" in self._buffers:  # (not hasattr: for the other generators that raises inside nn.Module)
            seen = getattr(self, "_tau_seen", None)
            if seen is None or seen[0] is not self.tau or seen[1] != tensor_version(self.tau) \
                    or seen[2] is not self.transformation:
                value = float(self.tau.reshape(-1)[0])
                self.transformation.tau = None if math.isnan(value) else value
                self._tau_seen = (self.tau, tensor_version(self.tau), self.transformation)
        return self.transformation

    def tau_pending(self) -> bool:
        """True while alpha-ReLU waits for ``generator_tau: auto`` to be resolved."""
        return "tau" in self._buffers and self._sync_tau().tau is None  # (read back only when it changed)

    def set_tau(self, tau: float) -> None:
        self.tau.fill_(float(tau))
        self.transformation.tau = float(tau)

    @torch.no_grad()
    def resolve_auto_tau(self, hidden: Tensor) -> tuple[float, int]:
        """``generator_tau: auto``: tau = mean over the rows of ``hidden`` (N, d) of the 1.5-entmax threshold
        of this layer's logits, averaged over ranks in multi-GPU training so that every rank agrees.

        "Speeding Up Entmax" (Tezekbayev et al.): alpha-ReLU with this constant tau matches the scale of
        entmax at initialisation. Sets the threshold; returns it with the number of rows it averages.
        """
        logits = self(hidden).float()
        stats = torch.stack([ops.entmax_threshold(logits, alpha=1.5, dim=-1).sum(), logits.new_tensor(len(logits))])
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(stats)
        tau = float(stats[0] / stats[1].clamp(min=1))
        self.set_tau(tau)
        return tau, int(stats[1])

    def probs(self, logits: Tensor) -> Tensor:
        """pi(z) over the vocabulary (alpha-ReLU: its unnormalized scores)."""
        return self._sync_tau().mapping(logits, dim=-1)

    def log_probs(self, logits: Tensor) -> Tensor:
        """log pi(z), -inf where pi(z) = 0: what beam search accumulates."""
        return self._sync_tau().log_probs(logits, dim=-1)

    def loss(self, logits: Tensor, target: Tensor, ignore_index: int, label_smoothing: float = 0.0,
             reduction: str = "sum", return_support: bool = False):
        """The transformation's Fenchel-Young loss; ``return_support``: (loss, support size of each row)."""
        return self._sync_tau().loss(logits, target, ignore_index=ignore_index, reduction=reduction,
                                     label_smoothing=label_smoothing, return_support=return_support)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, transformation={self.transformation.describe()}"


def make_generator(linear: nn.Linear, name: str, alpha: Optional[float] = None, tau: Optional[float] = None,
                   n_iter: Optional[int] = None) -> EntmaxGenerator:
    """``EntmaxGenerator`` sharing ``linear``'s parameters, for the registered function ``name``."""
    t = get_transformation(name, alpha=alpha, tau=tau, n_iter=n_iter, option="generator_function")
    return EntmaxGenerator.from_linear(linear, t)
