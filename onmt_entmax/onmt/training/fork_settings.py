"""``embeddings_dropout`` and ``adam_eps``: two values OpenNMT-py 3.5.1 fixes, as training options.

Peters et al.'s code (their fork of OpenNMT-py 0.6) set both otherwise; with them a run can train as
the fork did (docs/results/peters2019-table1.md, "Where we differ from the paper, and why").

- ``embeddings_dropout``: OpenNMT-py 3.5.1 builds every model's ``Embeddings`` with ``-dropout`` (its
  first value), applied to the embeddings' output; the fork's RNN embeddings had none. Unset, upstream's
  value stays. As for ``-dropout`` itself, a run resumed with ``-train_from`` builds its model with the
  checkpoint's value.
- ``adam_eps``: ε of Adam's update  θ ← θ − lr · m̂ / (√v̂ + ε),  which OpenNMT-py 3.5.1 hard-codes
  to 1e-8 (the fork: 1e-9). It matters only where √v̂ is that small. A run resumed with
  ``-train_from`` takes it from the checkpoint's options, as upstream's other optimizer options
  (``-reset_optim none`` or ``states``); with ``keep_states`` or ``all`` the given one holds, also over
  an optimizer state loaded with another ε.
"""
from __future__ import annotations

from onmt_entmax.errors import EntmaxOptionError

ADAM_OPTIMS = ("adam", "sparseadam")  # the -optim values whose torch optimizers OpenNMT-py builds with eps


def check_embeddings_dropout(opt) -> None:
    """A probability in [0, 1), not beside a dropout schedule (whose later values upstream's
    ``update_dropout`` would give the embeddings)."""
    p = getattr(opt, "embeddings_dropout", None)
    if p is not None:
        if not 0 <= p < 1:
            raise EntmaxOptionError(f"-embeddings_dropout {p}: give a probability in [0, 1)")
        if len(getattr(opt, "dropout_steps", None) or [0]) > 1:
            raise EntmaxOptionError("-embeddings_dropout with a -dropout_steps schedule: the schedule would set "
                                    "the embeddings' dropout to its -dropout values; drop one of the two")


def check_adam_eps(opt) -> None:
    """An ε above 0, for an Adam optimizer."""
    eps = getattr(opt, "adam_eps", None)
    if eps is not None:
        if not eps > 0:
            raise EntmaxOptionError(f"-adam_eps {eps}: give a number above 0")
        if getattr(opt, "optim", "sgd") not in ADAM_OPTIMS:
            raise EntmaxOptionError(f"-adam_eps is Adam's epsilon: it needs -optim {' or '.join(ADAM_OPTIMS)}, "
                                    f"not {getattr(opt, 'optim', None)}")


def wrap_build_embeddings(upstream):
    """``onmt.model_builder.build_embeddings``: with ``embeddings_dropout``, the built embeddings drop
    that share of their output (upstream skips its dropout module when the probability is 0)."""

    def build_embeddings(opt, vocabs, for_encoder=True):
        emb = upstream(opt, vocabs, for_encoder)
        p = getattr(opt, "embeddings_dropout", None)
        if p is not None:
            emb.dropout_p = p
            emb.update_dropout(p)
        return emb

    return build_embeddings


def _set_eps(torch_optimizer, eps: float) -> None:
    for group in torch_optimizer.param_groups:  # (MultipleOptimizer: every optimizer's groups)
        group["eps"] = eps


def wrap_build_torch_optimizer(upstream):
    """``onmt.utils.optimizers.build_torch_optimizer``: with ``adam_eps``, every parameter group of the
    built optimizer gets that ε, which the optimizer remembers for ``wrap_optimizer_from_opt``."""

    def build_torch_optimizer(model, opt):
        optimizer = upstream(model, opt)
        eps = getattr(opt, "adam_eps", None)
        if eps is not None:
            _set_eps(optimizer, eps)
            optimizer.entmax_adam_eps = eps
        return optimizer

    return build_torch_optimizer


def wrap_optimizer_from_opt(upstream):
    """``Optimizer.from_opt``: after a resumed run's optimizer state is loaded (it carries the ε it was
    saved with), the ε the optimizer was built with applies again."""

    def from_opt(cls, model, opt, checkpoint=None):
        optim = upstream(cls, model, opt, checkpoint)
        eps = getattr(optim._optimizer, "entmax_adam_eps", None)
        if eps is not None:
            _set_eps(optim._optimizer, eps)
        return optim

    return from_opt
