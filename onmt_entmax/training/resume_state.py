"""Training state that the toolkits' checkpoints lack, saved in the optimizer's state dict so that a
resumed run (``train_from``) continues it: the learning-rate halvings (``lr_halving``) and the
early-stopping counts (``early_stopping``). OpenNMT-py 3.5.1 and Eole 0.6 both keep the optimizer's
state dict in the checkpoint and read only their own keys from it, so stock toolkits still load these
checkpoints. Each adapter wraps its ``Optimizer.state_dict`` / ``load_state_dict`` with these."""
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
