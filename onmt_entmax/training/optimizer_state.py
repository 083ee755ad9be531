"""A resumed optimizer state checked finite before it loads (``train_from`` in both toolkits).

Adam carries its moments m, v into the first resumed update θ ← θ − lr·m̂/(√v̂ + ε): one NaN or inf there
turns that parameter NaN at the first step, and the run goes on at ``loss: nan`` although every weight of the
checkpoint was finite (which is all the checkpoint checks look at). OpenNMT-py 3.5.1 and Eole 0.6 both hand the
saved state to their ``Optimizer.load_state_dict``, its ``optimizer`` entry the torch optimizer's state dict
(or a list of them); that entry is walked once and refused, naming the first tensor that is not finite,
before anything is loaded (``analysis.checkpoint.first_not_finite``, as the weights are checked).
``reset_optim`` modes that drop the saved moments pass no ``optimizer`` entry."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from torch import Tensor

from onmt_entmax.analysis.checkpoint import first_not_finite, not_finite_values


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


def wrap_load_state_dict(upstream: Callable, refusal: Callable[[str], Exception]) -> Callable:
    """A toolkit ``Optimizer.load_state_dict(state_dict)`` that raises ``refusal(message)`` when the saved
    moments (``state_dict["optimizer"]``) are not all finite."""

    def load_state_dict(self, state_dict, *args, **kwargs):
        saved = state_dict.get("optimizer") if isinstance(state_dict, Mapping) else None
        bad = first_not_finite(named_tensors(saved))
        if bad is not None:
            name, t = bad
            raise refusal(f"train_from: the checkpoint's optimizer state {name} holds {not_finite_values(t)}: the "
                          f"first resumed step would make the weights NaN; resume from an earlier checkpoint, or "
                          f"with reset_optim states to start the optimizer afresh")
        return upstream(self, state_dict, *args, **kwargs)

    return load_state_dict
