"""``adam_fused``: ``-optim adam`` updates every parameter in torch's fused Adam kernel.

OpenNMT-py 3.5.1 builds ``torch.optim.Adam`` with torch's default implementation, on a GPU the "foreach"
one: about a dozen kernels over the parameter lists a step. The fused one does the same update in one
pass (``onmt_entmax/training/adam_fused.py``): fewer launches for a host-bound step, and less GPU time
when several runs share a GPU under MPS and the step is bound by the GPU (docs/benchmarks.md).

A training option: ``-train_from`` takes it from the command, not the checkpoint; after a saved
optimizer state is loaded (with the flags it was saved with), the command's value is set again.
"""
from __future__ import annotations

from onmt_entmax.errors import EntmaxOptionError
from onmt_entmax.training import adam_fused as rule


def check_train_opts(opt) -> None:
    why = rule.refusal(getattr(opt, "adam_fused", False), getattr(opt, "optim", "sgd"))
    if why:
        raise EntmaxOptionError(why)


def wrap_build_torch_optimizer(upstream):
    """``onmt.utils.optimizers.build_torch_optimizer``: with ``adam_fused``, the Adam it builds is fused."""

    def build_torch_optimizer(model, opt):
        optimizer = upstream(model, opt)
        rule.apply(optimizer, getattr(opt, "adam_fused", False))
        return optimizer

    return build_torch_optimizer


def wrap_optimizer_from_opt(upstream):
    """``Optimizer.from_opt``: after a resumed optimizer state is loaded (with the flags it was saved
    with), the command's ``adam_fused`` decides again."""

    def from_opt(cls, model, opt, checkpoint=None):
        optim = upstream(cls, model, opt, checkpoint)
        rule.apply(optim._optimizer, getattr(opt, "adam_fused", False))
        return optim

    return from_opt
