"""``adam_fused``: ``-optim adam`` updates every parameter in torch's fused Adam kernel.

OpenNMT-py 3.5.1 builds ``torch.optim.Adam`` with torch's default implementation, on a GPU the "foreach"
one: about a dozen kernels over the parameter lists a step. The fused one does the same update in one
pass (``onmt_entmax/adam_fused.py``). For the SIGMORPHON RNN (batch 64) Adam was 0.88 ms of the 6.0 ms
of GPU kernels in a training step and 0.76 ms of its host time (one NVIDIA H200, docs/benchmarks.md);
with several runs on a GPU under MPS the step is bound by the GPU.

A training option: ``-train_from`` takes it from the command, not the checkpoint; after a saved
optimizer state is loaded (with the flags it was saved with), the command's value is set again.
"""
from __future__ import annotations

import torch

from onmt_entmax.adam_fused import set_fused

from ..validation import EntmaxOptionError


def add_options(group) -> None:
    group.add("--adam_fused", "-adam_fused", action="store_true",
              help="-optim adam: update the parameters with torch's fused Adam (one kernel a step for all of "
                   "them) instead of upstream's default (a dozen on a GPU). The same update up to the order of "
                   "floating-point operations; on the CPU too.")


def check_train_opts(opt) -> None:
    """Only ``-optim adam`` builds one ``torch.optim.Adam`` (sparseadam: a SparseAdam beside it)."""
    if getattr(opt, "adam_fused", False) and getattr(opt, "optim", "sgd") != "adam":
        raise EntmaxOptionError(f"-adam_fused is an implementation of Adam: it needs -optim adam, "
                                f"not {getattr(opt, 'optim', None)}")


def wrap_build_torch_optimizer(upstream):
    """``onmt.utils.optimizers.build_torch_optimizer``: with ``adam_fused``, the Adam it builds is fused."""

    def build_torch_optimizer(model, opt):
        optimizer = upstream(model, opt)
        if getattr(opt, "adam_fused", False) and isinstance(optimizer, torch.optim.Adam):
            set_fused(optimizer, True)
        return optimizer

    return build_torch_optimizer


def wrap_optimizer_from_opt(upstream):
    """``Optimizer.from_opt``: after a resumed optimizer state is loaded (with the flags it was saved
    with), the command's ``adam_fused`` decides again."""

    def from_opt(cls, model, opt, checkpoint=None):
        optim = upstream(cls, model, opt, checkpoint)
        inner = optim._optimizer
        if isinstance(inner, torch.optim.Adam):
            wanted = bool(getattr(opt, "adam_fused", False))
            if wanted or any(g.get("fused") for g in inner.param_groups):
                set_fused(inner, wanted)
        return optim

    return from_opt
