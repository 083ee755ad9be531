"""Launch configuration (tile shape, warps) by row length; overridable for benchmarks.

Rows up to SINGLE_MAX elements are held in registers (one HBM read, solver passes over
registers); longer rows are streamed in chunks of CHUNK elements, each solver pass re-reading
the row from L2. alpha-entmax (mode 2) streams from BISECT_SINGLE_MAX: its pow terms spill
registers when the whole row is held. Short rows (attention) are packed TILE // next_pow2(n)
rows per program (forward: at most 32 // MIN_ROW_LANES) on one warp: every reduction stays
inside the warp (shuffles, no shared memory), faster than on 4 warps; each row on lanes of
its own (LANE_TILES, `_solver.lane_cols`). FP_FUSION: floating-point contraction is safe only
where every thread adds two or more entries of its row before the warp's butterfly (_launch.py):
one row per program of at least 64 entries a warp (tests/ops/test_triton_codegen.py).
Defaults from the sweeps in docs/kernels.md (where their numbers are, with GPU and date).
"""
from __future__ import annotations

import functools

DEFAULTS = {"SINGLE_MAX": 32768, "CHUNK": 4096, "CHUNK_WARPS": 8,
            "TILE": 512, "SHORT_WARPS": 1,          # forward, short rows
            "LANE_TILES": True,                     # short rows: own lanes a row (lane_cols)
            "MIN_ROW_LANES": 4,                     # forward: at most 32 / 4 rows a warp
            "SPREAD_TILE": 128,                     # forward, short rows spread over the warp (loss)
            "BWD_TILE": 256, "BWD_WARPS": 1,        # mapping backward, short rows
            "BISECT_SINGLE_MAX": 4096,              # alpha-entmax (float alpha): longer rows stream
            "BISECT_LONG_WARPS": 32,                # alpha-entmax rows >= 16384 held in registers
            "GROUP_MIN": 1024,                      # rows from this length start from group maxima
            "GROUP_SIZE": 16,                       # entries a group, at most (group_size)
            "GROUP_ITER": 32}                       # solver passes at most over the group maxima


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for the launch grids (`triton.cdiv` goes through Triton's JIT call, a host cost at
    every launch: docs/kernels.md)."""
    return -(-a // b)


def group_size(bc: int, num_warps: int, elem_size: int, most: int) -> int:
    """Entries a group of the start from group maxima (`_solver.group_max`: group j holds entries j,
    j + bc / size, ...): at most `most`, and few enough that bc / size is a multiple of the span a
    load covers (16-byte vectors on 32 lanes of each warp), so that a group lies in one thread.
    Groups of 16 at 8192 columns on 8 warps took the row through shared memory, which slowed the fp32
    1.5-entmax loss at 4096 x 8192 (docs/kernels.md)."""
    span = 16 // elem_size * 32 * num_warps
    return max(1, min(most, bc // span))


def launch_config(n_cols: int, elem_size: int, override: dict | None = None, mode: int = 1,
                  backward: bool = False, soft_rows: bool = False, lanes: bool = True) -> dict:
    """The launch shape (read-only dict; `_launch_config` says what it holds): the defaults' are
    computed once per row length and kind, this runs at every kernel call."""
    if override:
        return _launch_config(n_cols, elem_size, override, mode, backward, soft_rows, lanes)
    return _default_config(n_cols, elem_size, mode, backward, soft_rows, lanes)


@functools.lru_cache(maxsize=4096)
def _default_config(n_cols: int, elem_size: int, mode: int, backward: bool, soft_rows: bool, lanes: bool) -> dict:
    return _launch_config(n_cols, elem_size, None, mode, backward, soft_rows, lanes)


def _launch_config(n_cols: int, elem_size: int, override: dict | None, mode: int, backward: bool,
                   soft_rows: bool, lanes: bool) -> dict:
    """{BR, BC, SINGLE, GROUPS, GROUP_ITER, FP_FUSION, num_warps, LANES} for rows of n_cols
    elements (mode 2: alpha-entmax).
    LANES: for tiles of several short rows, the lanes they share (each row gets LANES // BR of
    them, `_solver.lane_cols`, in the mapping kernels' `_*_lanes_kernel`); 0 for one row a
    program, or where the kernel has no lane tiles (lanes=False: the loss).
    GROUPS: entries a group where the row held in registers starts the solver from its group
    maxima (_solver.py; 0: from -1); streamed rows: 1, their groups being the columns that share a
    position mod BC.
    soft_rows: a per-row alpha tensor, whose alpha == 1 rows only the register path computes."""
    o = dict(DEFAULTS, **override) if override else DEFAULTS
    single_max = o["SINGLE_MAX"]
    if mode == 2 and not backward and not soft_rows:  # soft_rows (alpha == 1) need registers
        single_max = min(single_max, o["BISECT_SINGLE_MAX"])
    if n_cols <= single_max:
        bc = next_pow2(max(n_cols, 16))
        spread = not (lanes and o["LANE_TILES"])  # rows over all the lanes of the warp
        tile = o["BWD_TILE"] if backward else o["SPREAD_TILE"] if spread else o["TILE"]
        br = max(1, tile // bc)
        if br > 1:
            nw = o.get("num_warps") or (o["BWD_WARPS"] if backward else o["SHORT_WARPS"])
            if not backward:  # (a row's solver passes end with the slowest row of its warp)
                br = max(1, min(br, 32 * nw // o["MIN_ROW_LANES"]))
        elif mode == 2 and bc >= 16384 and not backward:
            nw = o.get("num_warps") or o["BISECT_LONG_WARPS"]
        else:  # one row per program: 8 warps hold 32768 floats (128 a thread) best (docs/kernels.md)
            nw = o.get("num_warps") or max(1, min(8, bc // 1024))
        groups = 0
        if br == 1 and bc >= o["GROUP_MIN"] and not backward:
            groups = group_size(bc, nw, elem_size, o["GROUP_SIZE"])
        n_lanes = min(32 * nw, br * bc)
        # (with one lane a row the compiler spreads the row over the lanes again)
        if br == 1 or n_lanes // br < 2 or spread:
            n_lanes = 0
        # every thread holds >= 2 entries of its row and adds them before the butterfly: one row
        # of >= 64 a warp. Not lane tiles: Triton >= 3.7 lays a tile of rows of <= 32 out so that
        # the butterfly runs before a thread's own entries are added, and fuses a product into it
        fusion = br == 1 and bc >= 64 * nw
        return {"BR": br, "BC": bc, "SINGLE": True, "GROUPS": groups, "GROUP_ITER": o["GROUP_ITER"],
                "FP_FUSION": fusion, "num_warps": nw, "LANES": n_lanes}
    nw = o.get("num_warps") or o["CHUNK_WARPS"]
    return {"BR": 1, "BC": o["CHUNK"], "SINGLE": False, "GROUPS": 1, "GROUP_ITER": o["GROUP_ITER"],
            "FP_FUSION": o["CHUNK"] >= 64 * nw, "num_warps": nw, "LANES": 0}
