"""benchmarks/sass_long_attention.py, no GPU: the long-attention kernels' sm_90 code as the launch configures
them (bf16, 1.5-entmax, head dim 64; the widest launches' shared memory), built by the installed Triton."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET", "0") == "1":
    pytest.skip("compiles real kernels (the interpreter replaces them)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]


def _rows(*args: str) -> dict:
    """The script's table: kernel -> {column: cell}."""
    out = subprocess.run([sys.executable, "benchmarks/sass_long_attention.py", *args], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=900).stdout
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    head = lines[0]
    return {cells[0]: dict(zip(head, cells)) for cells in lines[1:] if not cells[0].startswith("---")}


def test_the_key_tile_loops_keep_their_pipelined_copies_and_the_half_backward_spills_nothing():
    """Both kernels' loops over the tiles hold the asynchronous copies that software pipelining issues (LDGSTS:
    none when the tile loads sit under a branch), and the one-kernel backward keeps every value in registers
    (no local-memory load or store: its loads are 16 bytes wide only where the strides are specialised)."""
    rows = _rows()
    fwd, bwd = (next(row for name, row in rows.items() if name.startswith(kind))
                for kind in ("forward", "backward dk dv dq"))
    assert int(fwd["LDGSTS"]) > 0 and int(bwd["LDGSTS"]) > 0
    assert int(bwd["LDL"]) == 0 and int(bwd["STL"]) == 0


SHARED_MEMORY_SM90 = 232448  # bytes a block may take on sm_90 (227 KiB): a kernel past it fails at its launch


@pytest.mark.parametrize("args", [["--dtype", "fp32"], ["--dtype", "fp32", "--head-dim", "128", "--alpha-grad"],
                                  ["--head-dim", "256"], ["--head-dim", "256", "--alpha-grad"]])
def test_every_kernel_of_the_widest_launches_fits_a_blocks_shared_memory(args):
    """The launch's tiles and pipelining stages for float32 (whose tf32x3 tiles hold each operand twice) up to
    FP32_MAX_HEAD_DIM and half inputs at head dim 256, with and without an alpha-gradient (two backward
    kernels), a keep mask and dropout: every kernel's shared memory within sm_90's limit, else the call fails
    on the GPU (float32 at head dim 128 on 64-key tiles and three stages needed 294,912 bytes)."""
    rows = _rows(*args, "--keep", "--dropout")
    assert len(rows) >= 2
    for name, row in rows.items():
        assert int(row["shared bytes"]) <= SHARED_MEMORY_SM90, (name, row["shared bytes"])


def test_loops_are_the_back_edges_of_the_code_with_their_bodies_counted():
    """`--loops` finds each loop by its branch back to an earlier address and counts its body (inner loops
    inside outer ones); forward branches and branches out of the code close none."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sass_long_attention", ROOT / "benchmarks" / "sass_long_attention.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    sass = "\n".join([
        "        /*0000*/                   MOV R1, c[0x0][0x28] ;                /* 0x000 */",
        "        /*0010*/                   FMNMX R2, R3, R4, !PT ;               /* 0x000 */",
        "        /*0020*/                   FADD R2, R2, R5 ;                     /* 0x000 */",
        "        /*0030*/              @!P0 BRA 0x60 ;                            /* 0x000 */",
        "        /*0040*/                   FMUL R2, R2, R2 ;                     /* 0x000 */",
        "        /*0050*/               @P1 BRA 0x10 ;                            /* 0x000 */",
        "        /*0060*/                   FADD R6, R2, R2 ;                     /* 0x000 */",
        "        /*0070*/                   BRA 0x0 ;                             /* 0x000 */",
        "        /*0080*/                   BRA 0x1000 ;                          /* 0x000 */",
    ])
    found = tool.loops(sass)
    assert [(start, end, sum(ops.values())) for start, end, ops in found] == [(0x10, 0x50, 5), (0x0, 0x70, 8)]
    assert found[0][2]["FMNMX"] == 1 and found[0][2]["BRA"] == 2
