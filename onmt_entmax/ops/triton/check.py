"""Checked kernels: every mapping forward of short rows compared with the float64 torch reference.

A debugging aid for kernel work (it is how the lanes bug of docs/kernels.md was caught: test
inputs passed, OpenNMT-py training did not). ``watch(out_dir)`` replaces ``mapping.forward_rows``
and the forwards of the training attention kernels (``attention_tiles.forward``,
``attention_train.scores_forward``: their weights p from the scores q k^T) in this process; each
call on rows of at most ``max_cols`` entries is recomputed by the reference, and a call with a row
off by more than ``tol`` (or not finite where the reference is) is reported on stderr, its first
wrong program (mapping: the rows launched together; attention: the rows of that batch and head)
saved to ``out_dir`` for replay.
``benchmarks/bench_train.py --check-kernels DIR`` runs onmt_train this way. Costs a reference
computation per call: not for timing.
"""
from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

import torch

from .. import entmax15, entmax_bisect, sparsemax
from ..attention import MASKED
from ..bounded_alpha import bounded_alpha_reference
from . import attention_tiles, attention_train, mapping
from ._config import launch_config
from .mapping import MODES

_NAMES = {mode: name for name, mode in MODES.items()}
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
        q = p.exp() if kwargs.get("log") else p  # (decoding's kernels store log p)
        bad = wrong_rows(q, ref, self.tol)
        if bad.numel():
            self.wrong_calls += 1
            self._report(z2, mode, alpha_rows, q, ref, bad, kwargs.get("config"))
        return p

    def attention(self, s: torch.Tensor, p: torch.Tensor, keep, alpha, bounds, mode: int, scale: float) -> None:
        """Weights p (B, H, Tq, Tk) of a training attention kernel against the reference mapping of
        its scores s = q k^T (float64, before the scale), keys where keep is False at -1e18; alpha
        per head, or logits of clamp(1 + sigmoid(a), *bounds)."""
        B, H, Tq, Tk = p.shape
        if Tk > self.max_cols or p.numel() == 0:
            return
        self.calls += 1
        z = s * scale
        if keep is not None:
            z = z.masked_fill(~keep, MASKED)
        alpha_rows = None
        if mode == 2:
            a = (alpha if torch.is_tensor(alpha) else torch.tensor([float(alpha)])).detach().reshape(-1)
            if bounds is not None:  # (the torch reference of ops.bounded_alpha, not its kernel)
                a = bounded_alpha_reference(a, *bounds)
            alpha_rows = a.double().to(p.device).view(1, -1, 1).expand(B, H, Tq).reshape(-1)
        z2, p2, name = z.expand(B, H, Tq, Tk).reshape(-1, Tk), p.reshape(-1, Tk), _NAMES[mode]
        ref = reference(z2, name, alpha_rows)
        bad = wrong_rows(p2, ref, self.tol)
        if bad.numel():
            self.wrong_calls += 1
            first = int(bad[0])
            lo = first // Tq * Tq  # the rows of that (batch, head)
            self._say(f"call {self.calls}, attention {name}, (B, H, Tq, Tk) {tuple(p.shape)}, {s.dtype}, "
                      f"{bad.numel()} wrong, first row {first} off by "
                      f"{float((p2[first].double() - ref[first]).abs().max()):.3g}",
                      {"z": z2[lo:lo + Tq].cpu(), "mode": name, "row": first - lo, "attention": True,
                       "alpha": None if alpha_rows is None else alpha_rows[lo:lo + Tq].cpu(),
                       "p": p2[lo:lo + Tq].cpu(), "ref": ref[lo:lo + Tq].cpu()})

    def tiles_forward(self, forward):
        def checked(q, k, v, keep, alpha, bounds, mode, scale, drop, seed):
            out, p, call = forward(q, k, v, keep, alpha, bounds, mode, scale, drop, seed)
            self.attention(torch.matmul(q.double(), k.double().transpose(-2, -1)), p, keep, alpha, bounds, mode, scale)
            return out, p, call
        return checked

    def scores_forward(self, forward):
        def checked(s, keep, alpha, bounds, mode, scale, drop, seed, d_dtype):
            p, d, call = forward(s, keep, alpha, bounds, mode, scale, drop, seed, d_dtype)
            self.attention(s.double(), p, keep, alpha, bounds, mode, scale)
            return p, d, call
        return checked

    def _say(self, line: str, record: dict) -> None:
        print(f"{WRONG}: {line}", file=sys.stderr, flush=True)
        if self.saved < self.max_saved:
            torch.save(record, self.out_dir / f"wrong_{os.getpid()}_{self.saved}.pt")
            self.saved += 1

    def _report(self, z2, mode, alpha_rows, p, ref, bad, config):
        first = int(bad[0])
        cfg = launch_config(z2.shape[-1], z2.element_size(), config, mode=MODES[mode])
        lo = first // cfg["BR"] * cfg["BR"]
        err = float((p[first].double() - ref[first]).abs().max())
        sl = slice(lo, lo + cfg["BR"])
        self._say(f"call {self.calls}, {mode}, rows x cols {tuple(z2.shape)}, {z2.dtype}, {bad.numel()} wrong, "
                  f"first row {first} off by {err:.3g}, launch {cfg}",
                  {"z": z2[sl].cpu(), "mode": mode, "cfg": cfg, "row": first - lo,
                   "alpha": None if alpha_rows is None else alpha_rows[sl].cpu(), "p": p[sl].cpu(),
                   "ref": ref[sl].cpu()})


def watch(out_dir, tol: float = 1e-4, max_cols: int = 512, max_saved: int = 6) -> _Watch:
    """Check every mapping and training-attention forward of rows up to max_cols entries from now on
    (this process)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    w = _Watch(out, tol, max_cols, max_saved, mapping.forward_rows)
    # module globals, looked up at each call (mapping._forward, attention_train.SparseAttention)
    mapping.forward_rows = w
    attention_tiles.forward = w.tiles_forward(attention_tiles.forward)
    attention_train.scores_forward = w.scores_forward(attention_train.scores_forward)
    print(f"[kernel check] watching short-row mapping and training attention kernels (pid {os.getpid()})",
          file=sys.stderr, flush=True)
    _summary_at_exit(w)
    return w


def _summary_at_exit(w: _Watch) -> None:
    """How many calls were checked, printed when the process ends (a check that saw no call is no check)."""
    atexit.register(lambda: print(f"[kernel check] {w.calls} calls checked, {w.wrong_calls} with wrong rows "
                                  f"(pid {os.getpid()})", file=sys.stderr, flush=True))
