"""Training criterion (criterion(float32 logits (N, V), target (N,)) -> summed loss), as both toolkits call it."""
from __future__ import annotations

import weakref
from typing import Optional

from torch import Tensor, nn

from .generator import EntmaxGenerator


class TransformationLoss(nn.Module):
    """Summed Fenchel-Young loss sum_i L(z_i, y_i) of the generator's transformation, pads ignored.

    Reads the transformation through the generator at call time, so an alpha-ReLU threshold
    resolved on the first batch (``generator_tau: auto``) is the one the loss uses. The generator is
    held outside the module tree (it is already a submodule of the model and of ``LossCompute``).
    The loss also gives the support size of each row, kept for the last call (``support_of``): what
    training reports count, without computing the probabilities a second time.
    """

    def __init__(self, generator: EntmaxGenerator, ignore_index: int, label_smoothing: float = 0.0):
        super().__init__()
        self._generator = [generator]
        self.ignore_index = ignore_index
        self.label_smoothing = float(label_smoothing)
        self._last: tuple = (lambda: None, None)  # (weak reference to the target, support sizes)

    @property
    def generator(self) -> EntmaxGenerator:
        return self._generator[0]

    @property
    def loss_name(self) -> str:
        return self.generator.transformation.loss_name

    @property
    def sparse(self) -> bool:
        return self.generator.transformation.sparse

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        loss, support = self.generator.loss(logits, target, ignore_index=self.ignore_index,
                                            label_smoothing=self.label_smoothing, reduction="sum", return_support=True)
        self._last = (weakref.ref(target), support)
        return loss

    def support_of(self, target: Tensor) -> Optional[Tensor]:
        """Number of nonzero probabilities of each row (N,), 0 where the target is ignore_index, if
        the last call was for this very ``target`` tensor (OpenNMT-py passes the same one to the
        criterion and to ``_stats``), else None."""
        ref, support = self._last
        return support if ref() is target else None

    def extra_repr(self) -> str:
        return (f"{self.generator.transformation.describe()}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}")


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
