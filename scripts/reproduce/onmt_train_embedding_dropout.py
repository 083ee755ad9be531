"""``onmt_train`` with the word embeddings' dropout given: OpenNMT-py 3.5.1 drops ``-dropout`` of the
embeddings' units (``Embeddings`` applies it to every model), Peters et al.'s fork (OpenNMT-py 0.6)
applied dropout in its embeddings only inside a Transformer's positional encoding, so its RNNs'
embeddings had none.

    python3 scripts/reproduce/onmt_train_embedding_dropout.py --embedding_dropout 0 -config CONFIG.yaml [onmt_train options]

Every other option goes to ``onmt_train`` unchanged (the plugin activates as it does there); the
dropout of the LSTMs and of the attention's output stays ``-dropout``.
"""
from __future__ import annotations

import argparse
import sys


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
    ap.add_argument("--embedding_dropout", type=float, required=True,
                    help="dropout probability of the word embeddings (OpenNMT-py 3.5.1: -dropout; the fork: 0)")
    a, rest = ap.parse_known_args(argv)
    if not 0 <= a.embedding_dropout < 1:
        ap.error(f"--embedding_dropout {a.embedding_dropout}: give a probability in [0, 1)")
    set_embedding_dropout(a.embedding_dropout)
    from onmt.bin.train import main as onmt_train

    sys.argv = ["onmt_train", *rest]
    onmt_train()


if __name__ == "__main__":  # (OpenNMT-py's data-loader workers are spawned: they import this file)
    main()
