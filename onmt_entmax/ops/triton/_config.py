"""Launch configuration (tile shape, warps) by row length; overridable for benchmarks.

Rows up to SINGLE_MAX elements are held in registers (one HBM read, solver passes over
registers); longer rows are streamed in chunks of CHUNK elements, each solver pass re-reading
the row from L2. Short rows (attention) are packed TILE // next_pow2(n) rows per program on one
warp, so that every reduction stays inside a warp. Defaults from the sweeps of
`benchmarks/bench_kernels.py --variants` on an H200 (docs/kernels.md).
"""
from __future__ import annotations

DEFAULTS = {"SINGLE_MAX": 32768, "CHUNK": 4096, "CHUNK_WARPS": 8,
            "TILE": 128, "SHORT_WARPS": 4,          # forward, short rows (1 warp: wrong rows, see below)
            "BWD_TILE": 512, "BWD_WARPS": 1,        # mapping backward, short rows
            "BISECT_LONG_WARPS": 32}                # alpha-entmax rows >= 16384 (pow in registers)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def launch_config(n_cols: int, elem_size: int, override: dict | None = None, mode: int = 1,
                  backward: bool = False) -> dict:
    """{BR, BC, SINGLE, num_warps} for rows of n_cols elements (mode 2: alpha-entmax)."""
    o = dict(DEFAULTS, **override) if override else DEFAULTS
    if n_cols <= o["SINGLE_MAX"]:
        bc = next_pow2(max(n_cols, 16))
        tile = o["BWD_TILE"] if backward else o["TILE"]
        br = max(1, tile // bc)
        if br > 1:
            nw = o.get("num_warps") or (o["BWD_WARPS"] if backward else o["SHORT_WARPS"])
        elif mode == 2 and bc >= 16384 and not backward:
            nw = o.get("num_warps") or o["BISECT_LONG_WARPS"]
        else:  # one row per program: 8 warps hold 32768 floats (128 a thread) best on H200
            nw = o.get("num_warps") or max(1, min(8, bc // 1024))
        return {"BR": br, "BC": bc, "SINGLE": True, "num_warps": nw}
    return {"BR": 1, "BC": o["CHUNK"], "SINGLE": False,
            "num_warps": o.get("num_warps") or o["CHUNK_WARPS"]}
