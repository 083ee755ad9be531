"""``onmt_train`` with two settings that OpenNMT-py 3.5.1 fixes and Peters et al.'s fork (OpenNMT-py
0.6) set otherwise, for measuring what each changes:

- ``--adam_eps``: Adam's ε, 1e-8 in OpenNMT-py 3.5.1, 1e-9 in the fork. The update is
  m / (√v + ε), so ε only matters where √v is that small.
- ``--embedding_dropout``: the word embeddings' dropout. OpenNMT-py 3.5.1's ``Embeddings`` drops
  ``-dropout`` of their units in every model; the fork's applied dropout only inside a Transformer's
  positional encoding, so its RNNs' embeddings had none (0). The LSTMs' and the attention output's
  dropout stay ``-dropout``.

    python3 scripts/reproduce/onmt_train_fork_settings.py [--adam_eps 1e-9] [--embedding_dropout 0] \\
        -config CONFIG.yaml [onmt_train options]

Every other option goes to ``onmt_train`` unchanged (the plugin activates as it does there).
"""
from __future__ import annotations

import argparse
import sys

import torch.optim


def set_adam_eps(eps: float) -> None:
    """Make every ``torch.optim.Adam`` built from now on use ``eps`` (OpenNMT-py's optimizer builder
    looks the class up on ``torch.optim`` when it builds, and passes its own ε, replaced here). Called
    again, it replaces the ε rather than wrapping the previous replacement (whose ε would win)."""
    upstream = getattr(torch.optim.Adam, "__wrapped__", torch.optim.Adam)

    class Adam(upstream):
        __wrapped__ = upstream

        def __init__(self, *args, **kwargs):
            kwargs["eps"] = eps
            super().__init__(*args, **kwargs)

    torch.optim.Adam = Adam


def set_embedding_dropout(p: float) -> None:
    """Make every OpenNMT-py ``Embeddings`` built from now on use dropout ``p`` (its model builder
    passes ``-dropout``, replaced here)."""
    from onmt.modules.embeddings import Embeddings

    upstream = getattr(Embeddings.__init__, "__wrapped__", Embeddings.__init__)

    def __init__(self, *args, **kwargs):
        kwargs["dropout"] = p
        upstream(self, *args, **kwargs)

    __init__.__wrapped__ = upstream
    Embeddings.__init__ = __init__


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adam_eps", type=float, help="Adam's ε (OpenNMT-py 3.5.1: 1e-8; the fork: 1e-9)")
    ap.add_argument("--embedding_dropout", type=float,
                    help="dropout probability of the word embeddings (OpenNMT-py 3.5.1: -dropout; the fork's RNNs: 0)")
    a, rest = ap.parse_known_args(argv)
    if a.adam_eps is None and a.embedding_dropout is None:
        ap.error("give --adam_eps, --embedding_dropout or both (without them, run onmt_train itself)")
    if a.adam_eps is not None and not a.adam_eps > 0:
        ap.error(f"--adam_eps {a.adam_eps}: give a number above 0")
    if a.embedding_dropout is not None and not 0 <= a.embedding_dropout < 1:
        ap.error(f"--embedding_dropout {a.embedding_dropout}: give a probability in [0, 1)")
    if a.adam_eps is not None:
        set_adam_eps(a.adam_eps)
    if a.embedding_dropout is not None:
        set_embedding_dropout(a.embedding_dropout)
    from onmt.bin.train import main as onmt_train

    sys.argv = ["onmt_train", *rest]
    onmt_train()


if __name__ == "__main__":  # (OpenNMT-py's data-loader workers are spawned: they import this file)
    main()
