"""Launch configuration (tile shape, warps) by row length; overridable for benchmarks."""
from __future__ import annotations

import triton

# Rows up to SINGLE_MAX elements are held in registers (one HBM read); longer rows are
# streamed in chunks of CHUNK elements, each solver pass re-reading the row from L2.
DEFAULTS = {"SINGLE_MAX": 8192, "CHUNK": 4096, "TILE": 2048}


def launch_config(n_cols: int, elem_size: int, override: dict | None = None) -> dict:
    """{BR, BC, SINGLE, num_warps} for rows of n_cols elements."""
    o = dict(DEFAULTS, **(override or {}))
    if n_cols <= o["SINGLE_MAX"]:
        bc = triton.next_power_of_2(max(n_cols, 16))
        br = max(1, o["TILE"] // bc)
        nw = o.get("num_warps") or max(1, min(16, br * bc // 256))
        return {"BR": br, "BC": bc, "SINGLE": True, "num_warps": nw}
    bc = o["CHUNK"]
    return {"BR": 1, "BC": bc, "SINGLE": False, "num_warps": o.get("num_warps") or 8}
