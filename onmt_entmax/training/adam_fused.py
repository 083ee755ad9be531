"""Adam switched between torch's implementations over the same state (the adapters' ``adam_fused``).

``torch.optim.Adam`` updates m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², θ ← θ − lr·m̂/(√v̂ + ε) either with
"foreach" kernels, one per operation over the parameter lists (torch's default on a GPU, about a dozen a
step), or "fused", the whole update in one pass. Both keep the same state (``step``, ``exp_avg``,
``exp_avg_sq``), except where the step count lives: fused reads it as a float32 tensor beside the
parameter, the others as a CPU tensor. A saved state carries its groups' flags, which
``load_state_dict`` puts back; ``set_fused`` sets them (after loading, too) and moves the counts.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch


def set_fused(optimizer: torch.optim.Optimizer, fused: bool) -> None:
    """Make ``optimizer`` (a ``torch.optim.Adam``) update fused or with torch's default implementation,
    its step counts where that implementation reads them."""
    for group in optimizer.param_groups:
        group["fused"], group["foreach"] = (True, False) if fused else (None, None)
        for p in group["params"]:
            state = optimizer.state.get(p)
            if state and torch.is_tensor(state.get("step")):
                state["step"] = state["step"].to(p.device if fused else "cpu", torch.float32)


def refusal(fused: bool, optim: str, name: Callable[[str], str] = lambda n: f"-{n}") -> Optional[str]:
    """Why ``adam_fused`` cannot be honoured with this ``optim``, or None (only ``adam`` builds one
    ``torch.optim.Adam``; ``sparseadam`` builds a SparseAdam beside it)."""
    if fused and optim != "adam":
        return f"{name('adam_fused')} is an implementation of Adam: it needs {name('optim')} adam, not {optim}"
    return None


def apply(optimizer: object, fused: bool) -> None:
    """After an optimizer is built or its saved state loaded: a ``torch.optim.Adam`` updates fused when
    ``fused`` is asked, with torch's default when not (also when its loaded state said fused)."""
    if isinstance(optimizer, torch.optim.Adam) and (fused or any(g.get("fused") for g in optimizer.param_groups)):
        set_fused(optimizer, fused)
