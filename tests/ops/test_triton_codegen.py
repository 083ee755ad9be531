"""The compiled kernels keep the lanes of a row in agreement (no GPU needed: compiled for sm_90).

After a warp's butterfly reduction every lane must hold the row's sum bit for bit, because the
solver's loop exit and certificate are decided from it in every lane. That holds when each
butterfly step is a plain add; a fused multiply-add that reads a shuffled value (the lane's own
product fused into the step) gives each lane a different rounding (onmt_entmax/ops/triton/_launch.py).
"""
import os
import re

import pytest

triton = pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET", "0") == "1":
    pytest.skip("compiles real kernels (the interpreter replaces them)", allow_module_level=True)

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from onmt_entmax.ops.triton import loss as KL  # noqa: E402
from onmt_entmax.ops.triton import mapping as KM  # noqa: E402
from onmt_entmax.ops.triton._config import launch_config  # noqa: E402

F32 = "*fp32"
MODES = {"sparsemax": 0, "entmax15": 1, "bisect": 2, "alpha_relu": 3}


def _ptx(fn, runtime: dict, constexprs: dict, num_warps: int, fp_fusion: bool) -> str:
    sig = dict(runtime, **{name: "constexpr" for name in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs=constexprs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "enable_fp_fusion": fp_fusion})
    return compiled.asm["ptx"]


def fma_reading_a_shuffle(ptx: str) -> list:
    """fma instructions with an operand that a shfl.sync wrote."""
    shuffled = set(re.findall(r"shfl\.sync\.\w+\.b32\s+(%r\d+)", ptx))
    fmas = re.finditer(r"fma\.[\w.]+\s+%r\d+,\s*(%r\d+),\s*(%r\d+),\s*(%r\d+);", ptx)
    return [m.group(0) for m in fmas if shuffled & set(m.groups())]


def _mapping_fwd(n_cols, mode, fp_fusion=None):
    cfg = launch_config(n_cols, 4, mode=MODES[mode], soft_rows=False)
    runtime = {"Z": F32, "P": F32, "ALPHA": F32, "n_rows": "i32", "n_cols": "i32",
               "stride": "i32", "tol": "fp32"}
    const = {"ITERS": None, "MODE": MODES[mode], "MAX_ITER": 32, "BR": cfg["BR"],
             "BC": cfg["BC"], "SINGLE": cfg["SINGLE"], "GROUPS": cfg["GROUPS"],
             "GROUP_ITER": cfg["GROUP_ITER"]}
    fus = cfg["FP_FUSION"] if fp_fusion is None else fp_fusion
    return _ptx(KM._fwd_kernel, runtime, const, cfg["num_warps"], fus)


def _loss_fwd(n_cols, mode):
    cfg = launch_config(n_cols, 4, mode=MODES[mode])
    runtime = {"Z": F32, "Y": "*i64", "LOSS": F32, "STATS": F32, "ALPHA": F32, "n_rows": "i32",
               "n_cols": "i32", "stride": "i32", "ignore_index": "i32", "eps": "fp32",
               "relu_tau": "fp32", "tol": "fp32"}
    const = {"MODE": MODES[mode], "SMOOTH": False, "MAX_ITER": 64, "BR": cfg["BR"],
             "BC": cfg["BC"], "SINGLE": cfg["SINGLE"], "GROUPS": cfg["GROUPS"] and mode != "alpha_relu",
             "GROUP_ITER": cfg["GROUP_ITER"]}
    return _ptx(KL._fy_fwd_kernel, runtime, const, cfg["num_warps"], cfg["FP_FUSION"])


def _mapping_bwd(n_cols, mode):
    cfg = launch_config(n_cols, 4, mode=MODES[mode], backward=True)
    runtime = {"P": F32, "G": F32, "DZ": F32, "ALPHA": F32, "DALPHA": F32, "n_rows": "i32",
               "n_cols": "i32", "stride_p": "i32", "stride_g": "i32"}
    const = {"MODE": MODES[mode], "BR": cfg["BR"], "BC": cfg["BC"], "SINGLE": cfg["SINGLE"]}
    return _ptx(KM._bwd_kernel, runtime, const, cfg["num_warps"], cfg["FP_FUSION"])


def test_the_check_sees_a_fused_butterfly_step():
    """Compiled with contraction, rows of 12 entries (one per lane) fuse a lane's own square
    into the first shuffle step of the 1.5-entmax sums: the check must flag it."""
    assert fma_reading_a_shuffle(_mapping_fwd(12, "entmax15", fp_fusion=True))


@pytest.mark.parametrize("mode", ["entmax15", "bisect"])
@pytest.mark.parametrize("n_cols", [12, 50, 1024, 32768, 50000])
def test_mapping_forward_lanes_agree(mode, n_cols):
    assert fma_reading_a_shuffle(_mapping_fwd(n_cols, mode)) == []


@pytest.mark.parametrize("mode", ["entmax15", "bisect", "alpha_relu"])
@pytest.mark.parametrize("n_cols", [12, 1024, 32768, 50000])
def test_loss_forward_lanes_agree(mode, n_cols):
    assert fma_reading_a_shuffle(_loss_fwd(n_cols, mode)) == []


@pytest.mark.parametrize("mode", ["entmax15", "bisect"])
@pytest.mark.parametrize("n_cols", [12, 32768])
def test_mapping_backward_lanes_agree(mode, n_cols):
    assert fma_reading_a_shuffle(_mapping_bwd(n_cols, mode)) == []


@pytest.mark.parametrize("mode", ["entmax15", "bisect"])
@pytest.mark.parametrize("n_keys", [12, 50, 700])
def test_fused_attention_lanes_agree(mode, n_keys):
    """The decode-time attention kernel solves each row with the same solver (one row a program)."""
    from onmt_entmax.ops.triton import attention as KA
    from onmt_entmax.ops.triton._config import next_pow2

    ints = {name: "i32" for name in KA._INTS}
    runtime = {"Q": F32, "K": F32, "V": F32, "KEEP": "*i1", "ALPHA": F32, "O": F32, **ints,
               "scale": "fp32", "tol": "fp32"}
    order = ["Q", "K", "V", "KEEP", "ALPHA", "O", "Tq", "H", "Tk", "D", "Dv", "scale", "tol"] + KA._INTS[5:]
    bc = next_pow2(max(n_keys, 16))
    const = {"MODE": MODES[mode], "MAX_ITER": 32, "BC": bc, "BD": max(1, min(64, KA._TILE // bc)), "HAS_KEEP": True}
    ptx = _ptx(KA._attn_fwd_kernel, {k: runtime[k] for k in order}, const, 1 if bc <= 128 else 4, False)
    assert fma_reading_a_shuffle(ptx) == []
