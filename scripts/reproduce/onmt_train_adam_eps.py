"""``onmt_train`` with Adam's ε given: OpenNMT-py 3.5.1 builds Adam with ε = 1e-8, Peters et al.'s fork
(OpenNMT-py 0.6) with 1e-9; the update is m / (√v + ε), so ε only matters where √v is that small.

    python3 scripts/reproduce/onmt_train_adam_eps.py --adam_eps 1e-9 -config CONFIG.yaml [onmt_train options]

Every other option goes to ``onmt_train`` unchanged (the plugin activates as it does there).
"""
from __future__ import annotations

import argparse
import sys

import torch.optim


def set_adam_eps(eps: float) -> None:
    """Make every ``torch.optim.Adam`` built from now on use ``eps`` (OpenNMT-py's optimizer builder
    looks the class up on ``torch.optim`` when it builds, and passes its own ε, replaced here)."""
    class Adam(torch.optim.Adam):
        def __init__(self, *args, **kwargs):
            kwargs["eps"] = eps
            super().__init__(*args, **kwargs)

    torch.optim.Adam = Adam


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--adam_eps", type=float, required=True, help="Adam's ε (OpenNMT-py 3.5.1: 1e-8)")
    a, rest = p.parse_known_args(argv)
    if not a.adam_eps > 0:
        p.error(f"--adam_eps {a.adam_eps}: give a number above 0")
    set_adam_eps(a.adam_eps)
    from onmt.bin.train import main as onmt_train

    sys.argv = ["onmt_train", *rest]
    onmt_train()


if __name__ == "__main__":  # (OpenNMT-py's data-loader workers are spawned: they import this file)
    main()
