"""nn.Modules built from the registry: output layer, attention normalizers, loss criterion."""
from .attention import AttentionNormalizer, LearnableAlpha
from .generator import EntmaxGenerator
from .loss import TransformationLoss

__all__ = ["AttentionNormalizer", "LearnableAlpha", "EntmaxGenerator", "TransformationLoss"]
