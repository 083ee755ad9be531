"""What the exactness certificate reads from each beam step (Peters et al. 2019, Sec. 4.1):

    n_r = |{j : s_rj > -inf}|                 candidates of nonzero probability of sentence r,
    b_r = max_{j not in kept_r} s_rj          the best candidate the search did not keep,

for the (R, N) candidate scores of the alive sentences (N = beam x vocabulary, -inf where the
probability is 0) and the (R, K) positions the search kept. One kernel on CUDA (a step of a sparse
model's beam search would otherwise launch five); the torch code below is the reference.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _dispatch


def beam_stats(scores: Tensor, kept: Tensor) -> tuple[Tensor, Tensor]:
    """(n (R,) int64, b (R,) float32): the finite candidates of each row of ``scores`` (R, N), and
    its best score outside the positions ``kept`` (R, K) (-inf if none; NaN if a score left out is
    NaN). No gradient."""
    if scores.dim() != 2 or kept.dim() != 2 or kept.shape[0] != scores.shape[0]:
        raise ValueError(f"beam_stats: scores (R, N) and kept (R, K), got {tuple(scores.shape)} and "
                         f"{tuple(kept.shape)}")
    if kept.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"beam_stats: kept must hold integer positions, got dtype {kept.dtype}")
    scores = scores.detach()
    fast = _dispatch.try_kernel("beam_stats", scores)  # (every beam step: the kernel decides itself)
    out = None if fast is None else fast(scores, kept)
    if out is not None:
        return out
    n = (scores > float("-inf")).sum(-1)  # (one comparison; isfinite is four operations)
    best = scores.scatter(-1, kept.long(), float("-inf")).amax(-1)
    return n, best.float()
