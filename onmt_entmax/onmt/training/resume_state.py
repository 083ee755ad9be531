"""Training state that OpenNMT-py 3.5.1's checkpoints lack, saved in the optimizer's state dict so
that ``-train_from`` resumes it: the learning-rate halvings (``lr_halving``) and the early-stopping
counts (``early_stopping``). Upstream's ``Optimizer.load_state_dict`` reads only its own keys, so
stock OpenNMT-py still loads these checkpoints."""
from __future__ import annotations

from . import early_stopping, lr_halving

PARTS = (lr_halving, early_stopping)  # each: state_of(optim) -> dict, load_into(optim, state_dict)


def wrap_state_dict(upstream):
    def state_dict(self):
        state = upstream(self)
        for part in PARTS:
            state.update(part.state_of(self))
        return state

    return state_dict


def wrap_load_state_dict(upstream):
    def load_state_dict(self, state_dict):
        upstream(self, state_dict)
        for part in PARTS:
            part.load_into(self, state_dict)

    return load_state_dict
