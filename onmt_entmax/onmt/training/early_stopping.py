"""Early stopping that a resumed run continues, in OpenNMT-py 3.5.1 (``onmt_entmax.early_stopping`` says
why and what is kept): the early stopper of a trainer just built continues the checkpoint's state."""
from __future__ import annotations

import logging

from onmt_entmax.early_stopping import continue_in


def wrap_build_trainer(upstream):
    """``onmt.trainer.build_trainer``: the early stopper continues the checkpoint's state, and the
    optimizer can reach it when a checkpoint is saved."""

    def build_trainer(opt, device_id, model, vocabs, optim, model_saver=None):
        trainer = upstream(opt, device_id, model, vocabs, optim, model_saver)
        continue_in(trainer, optim, logging.getLogger("onmt"))
        return trainer

    return build_trainer
