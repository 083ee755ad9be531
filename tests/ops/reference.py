"""Independent float64 references for the tests: plain numpy, no code shared with the package."""
from __future__ import annotations

import numpy as np


def entmax_ref(z: np.ndarray, alpha: float, iters: int = 200) -> np.ndarray:
    """alpha-entmax of each row of z by bisection on tau in float64 (softmax at alpha = 1)."""
    z = np.asarray(z, dtype=np.float64)
    out = np.zeros_like(z)
    for r, row in enumerate(z.reshape(-1, z.shape[-1])):
        fin = np.isfinite(row)
        if not fin.any():
            continue
        x = np.where(fin, row, -np.inf)
        if alpha == 1:
            e = np.exp(x - x[fin].max())
            out.reshape(-1, z.shape[-1])[r] = e / e.sum()
            continue
        x = (alpha - 1) * x
        lo, hi = x[fin].max() - 1, x[fin].max()
        for _ in range(iters):
            mid = (lo + hi) / 2
            mass = (np.clip(x - mid, 0, None) ** (1 / (alpha - 1))).sum()
            lo, hi = (mid, hi) if mass >= 1 else (lo, mid)
        p = np.clip(x - (lo + hi) / 2, 0, None) ** (1 / (alpha - 1))
        out.reshape(-1, z.shape[-1])[r] = p / p.sum()
    return out


def fy_loss_ref(z: np.ndarray, y: int, alpha: float, q: np.ndarray | None = None) -> float:
    """FY loss of one row against target distribution q (default e_y): Omega*(z) + Omega(q) - z.q,
    with Omega = -H_alpha (Tsallis; Shannon at 1) and Omega*(z) = max_p p.z + H(p)."""
    p = entmax_ref(z[None], alpha)[0]
    if q is None:
        q = np.zeros_like(p)
        q[y] = 1.0

    def tsallis(v: np.ndarray) -> float:
        v = v[v > 0]
        if alpha == 1:
            return float(-(v * np.log(v)).sum())
        return float((1 - (v ** alpha).sum()) / (alpha * (alpha - 1)))

    finite = np.isfinite(z)
    pz = float((p[finite] * z[finite]).sum())
    return pz + tsallis(p) - tsallis(q) - float((q[q > 0] * z[q > 0]).sum())
