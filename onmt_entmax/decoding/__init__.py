"""Decoding algorithms for sparse models: pure functions over log-prob tensors.

Nothing here imports OpenNMT-py; ``onmt_entmax.onmt.decoding`` hooks them into
``onmt_translate``.
"""
from onmt_entmax.errors import SupportTooLarge

from .certificate import CertificateTracker, SentenceCertificate, certificate_rate, require_sparse
from .ensemble import average_probs, check_same_vocab
from .masking import NEG_INF, forbid_, is_sparse, penalty_mask, support_size
from .search import (
    BeamResult,
    NextLogProbs,
    Support,
    beam_search,
    enumerate_support,
    exact_search,
)

__all__ = [
    "NEG_INF", "BeamResult", "CertificateTracker", "NextLogProbs", "SentenceCertificate", "Support",
    "SupportTooLarge", "average_probs", "beam_search", "certificate_rate", "check_same_vocab",
    "enumerate_support", "exact_search", "forbid_", "is_sparse", "penalty_mask", "require_sparse",
    "support_size",
]
