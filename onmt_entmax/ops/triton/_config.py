"""Launch configuration (tile shape, warps) by row length; overridable for benchmarks.

Rows up to SINGLE_MAX elements are held in registers (one HBM read, solver passes over
registers); longer rows are streamed in chunks of CHUNK elements, each solver pass re-reading
the row from L2. Defaults from the sweep in benchmarks/bench_kernels.py --variants (H200).
"""
from __future__ import annotations

DEFAULTS = {"SINGLE_MAX": 32768, "CHUNK": 4096, "TILE": 2048, "LONG_WARPS": 16,
            "SHORT_WARPS": 8, "CHUNK_WARPS": 8}


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def launch_config(n_cols: int, elem_size: int, override: dict | None = None) -> dict:
    """{BR, BC, SINGLE, num_warps} for rows of n_cols elements."""
    o = dict(DEFAULTS, **override) if override else DEFAULTS
    if n_cols <= o["SINGLE_MAX"]:
        bc = next_pow2(max(n_cols, 16))
        br = max(1, o["TILE"] // bc)
        if br == 1:  # one long row per program: enough warps to hold it in registers
            nw = o.get("num_warps") or (o["LONG_WARPS"] if bc >= 16384 else
                                        max(1, min(16, bc // 512)))
        else:
            nw = o.get("num_warps") or o["SHORT_WARPS"]
        return {"BR": br, "BC": bc, "SINGLE": True, "num_warps": nw}
    return {"BR": 1, "BC": o["CHUNK"], "SINGLE": False,
            "num_warps": o.get("num_warps") or o["CHUNK_WARPS"]}
