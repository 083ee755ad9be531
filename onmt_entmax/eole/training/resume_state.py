"""What a resumed Eole run needs of its optimizer's saved state beyond ``onmt_entmax.training.resume_state``."""
from __future__ import annotations

from typing import Callable


def wrap_load_counters(upstream: Callable) -> Callable:
    """``Optimizer.load_state_dict``: a state without step counters keeps the optimizer's own. Eole 0.6.4's
    ``train_from`` with ``reset_optim: keep_states`` passes only the torch optimizer's state ("step
    counters are intentionally reset", its comment says), which its ``load_state_dict`` then indexes
    for ``training_step``: a KeyError instead of the resumed run."""

    def load_state_dict(self, state_dict):
        if "training_step" not in state_dict:
            state_dict = {**state_dict, "training_step": self._training_step}
        return upstream(self, state_dict)

    return load_state_dict
