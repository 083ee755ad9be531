"""Checked kernels: every mapping forward of short rows compared with the float64 torch reference.

A debugging aid for kernel work (it is how the lanes bug of docs/kernels.md was caught: test
inputs passed, OpenNMT-py training did not). ``watch(out_dir)`` replaces ``mapping.forward_rows``
in this process; each call on rows of at most ``max_cols`` entries is recomputed by the reference,
and a call with a row off by more than ``tol`` (or not finite where the reference is) is reported
on stderr, its first wrong program (the rows launched together) saved to ``out_dir`` for replay.
``benchmarks/bench_train.py --check-kernels DIR`` runs onmt_train this way. Costs a reference
computation per call: not for timing.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from .. import entmax15, entmax_bisect, sparsemax
from . import mapping
from ._config import launch_config

_MODES = {"sparsemax": 0, "entmax15": 1, "bisect": 2}
WRONG = "[kernel check] wrong rows"  # starts the stderr line of each call with wrong rows


def reference(z2: torch.Tensor, mode: str, alpha_rows: torch.Tensor | None) -> torch.Tensor:
    """float64 torch reference of a (n_rows, n_cols) forward (alpha == 1 rows: softmax)."""
    z = z2.double()
    if mode == "sparsemax":
        return sparsemax(z, -1)
    if mode == "entmax15":
        return entmax15(z, -1)
    a = alpha_rows.double()[:, None]
    soft = a <= 1.0
    p = entmax_bisect(z, a.clamp(min=1.0 + 1e-4), -1, n_iter=80)
    return torch.where(soft, torch.softmax(z, -1), p)


def wrong_rows(p: torch.Tensor, ref: torch.Tensor, tol: float) -> torch.Tensor:
    """Indices of rows where p is off the reference by more than tol (NaN counts as off)."""
    err = (p.double() - ref).abs().amax(-1)
    return (~(err <= tol)).nonzero().flatten()


class _Watch:
    def __init__(self, out_dir: Path, tol: float, max_cols: int, max_saved: int, forward_rows):
        self.out_dir, self.tol, self.max_cols, self.max_saved = out_dir, tol, max_cols, max_saved
        self.forward_rows = forward_rows
        self.calls = self.wrong_calls = self.saved = 0

    def __call__(self, z2, mode, alpha_rows=None, *args, **kwargs):
        p = self.forward_rows(z2, mode, alpha_rows, *args, **kwargs)
        if z2.shape[-1] > self.max_cols or z2.numel() == 0:
            return p
        self.calls += 1
        ref = reference(z2, mode, alpha_rows)
        bad = wrong_rows(p, ref, self.tol)
        if bad.numel():
            self.wrong_calls += 1
            self._report(z2, mode, alpha_rows, p, ref, bad, kwargs.get("config"))
        return p

    def _report(self, z2, mode, alpha_rows, p, ref, bad, config):
        first = int(bad[0])
        cfg = launch_config(z2.shape[-1], z2.element_size(), config, mode=_MODES[mode])
        lo = first // cfg["BR"] * cfg["BR"]
        err = float((p[first].double() - ref[first]).abs().max())
        print(f"{WRONG}: call {self.calls}, {mode}, rows x cols {tuple(z2.shape)}, "
              f"{z2.dtype}, {bad.numel()} wrong, first row {first} off by {err:.3g}, launch {cfg}",
              file=sys.stderr, flush=True)
        if self.saved < self.max_saved:
            sl = slice(lo, lo + cfg["BR"])
            torch.save({"z": z2[sl].cpu(), "mode": mode, "cfg": cfg, "row": first - lo,
                        "alpha": None if alpha_rows is None else alpha_rows[sl].cpu(),
                        "p": p[sl].cpu(), "ref": ref[sl].cpu()},
                       self.out_dir / f"wrong_{os.getpid()}_{self.saved}.pt")
            self.saved += 1


def watch(out_dir, tol: float = 1e-4, max_cols: int = 512, max_saved: int = 6) -> _Watch:
    """Check every mapping forward of rows up to max_cols entries from now on (this process)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    w = _Watch(out, tol, max_cols, max_saved, mapping.forward_rows)
    mapping.forward_rows = w  # module global: _forward looks it up at each call
    print(f"[kernel check] watching short-row mapping kernels (pid {os.getpid()})", file=sys.stderr, flush=True)
    return w
