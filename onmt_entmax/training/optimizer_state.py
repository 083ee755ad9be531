"""A resumed optimizer state checked finite before it loads (``train_from`` in both toolkits).

Adam carries its moments m, v into the first resumed update θ ← θ − lr·m̂/(√v̂ + ε): one NaN or inf there
turns that parameter NaN at the first step, and the run goes on at ``loss: nan`` although every weight of the
checkpoint was finite (which is all the checkpoint checks look at). OpenNMT-py 3.5.1 and Eole 0.6 both hand the
saved state to their ``Optimizer.load_state_dict``, its ``optimizer`` entry the torch optimizer's state dict
(or a list of them); that entry is walked once and refused, naming the first tensor that is not finite,
before anything is loaded. ``reset_optim`` modes that drop the saved moments pass no ``optimizer`` entry."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import torch
from torch import Tensor


def named_tensors(state: object, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
    """(dotted path, tensor) of every tensor in nested dicts, lists and tuples."""
    if isinstance(state, Tensor):
        yield prefix, state
    elif isinstance(state, Mapping):
        for key, value in state.items():
            yield from named_tensors(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(state, (list, tuple)):
        for i, value in enumerate(state):
            yield from named_tensors(value, f"{prefix}.{i}" if prefix else str(i))


def first_not_finite(state: object) -> tuple[str, Tensor] | None:
    """The first floating-point tensor of ``state`` holding a NaN or an infinity (its path and itself), or None.
    One ``isfinite(...).all()`` a tensor, gathered with one device sync at the end."""
    named = [(n, t) for n, t in named_tensors(state) if t.is_floating_point() and not t.is_meta]
    if not named:
        return None
    flags = torch.stack([torch.isfinite(t).all().to(named[0][1].device) for _, t in named])
    if bool(flags.all()):
        return None
    return next((n, t) for (n, t), ok in zip(named, flags.tolist()) if not ok)


def wrap_load_state_dict(upstream: Callable, refusal: Callable[[str], Exception]) -> Callable:
    """A toolkit ``Optimizer.load_state_dict(state_dict)`` that raises ``refusal(message)`` when the saved
    moments (``state_dict["optimizer"]``) are not all finite."""

    def load_state_dict(self, state_dict, *args, **kwargs):
        bad = first_not_finite(state_dict.get("optimizer")) if isinstance(state_dict, Mapping) else None
        if bad is not None:
            name, t = bad
            kinds = " and ".join(k for k, m in (("NaN", torch.isnan(t)), ("inf", torch.isinf(t))) if bool(m.any()))
            raise refusal(f"train_from: the checkpoint's optimizer state {name} holds {kinds} "
                          f"({int((~torch.isfinite(t)).sum())} of {t.numel()} values): the first resumed step "
                          f"would make the weights NaN; resume from an earlier checkpoint, or with "
                          f"reset_optim states to start the optimizer afresh")
        return upstream(self, state_dict, *args, **kwargs)

    return load_state_dict
