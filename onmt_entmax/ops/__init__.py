"""Math layer: sparse mappings and their Fenchel-Young losses (no OpenNMT-py import here)."""
from ._common import alpha_in_range, check_alpha, check_number, tensor_version
from ._dispatch import cold_cache as cold_kernel_cache
from ._dispatch import prepare_in_background as prepare_kernels_in_background
from ._dispatch import warm_up as warm_up_kernels
from .alpha_relu import alpha_relu, alpha_relu_log
from .attention import sparse_attention
from .beam_stats import beam_stats, beam_topk
from .bounded_alpha import bounded_alpha
from .entmax import entmax, entmax_threshold
from .entmax15 import entmax15
from .entmax_bisect import entmax_bisect, softmax_safe
from .log_probs import log_probs
from .losses import (
    AlphaReLULoss,
    Entmax15Loss,
    EntmaxBisectLoss,
    SparsemaxLoss,
    alpha_relu_loss,
    entmax15_loss,
    entmax_bisect_loss,
    fy_loss,
    sparsemax_loss,
)
from .sparsemax import sparsemax
from .tau_estimate import tau_first_batch, tau_formula

__all__ = [
    "sparsemax", "entmax15", "entmax_bisect", "entmax", "alpha_relu", "alpha_relu_log", "log_probs", "entmax_threshold",
    "softmax_safe", "sparse_attention", "beam_stats", "beam_topk", "alpha_in_range", "bounded_alpha",
    "SparsemaxLoss", "Entmax15Loss", "EntmaxBisectLoss", "AlphaReLULoss",
    "sparsemax_loss", "entmax15_loss", "entmax_bisect_loss", "alpha_relu_loss", "fy_loss",
    "tau_formula", "tau_first_batch", "warm_up_kernels", "prepare_kernels_in_background",
    "cold_kernel_cache", "check_alpha", "check_number", "tensor_version",
]
