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


def _ptx(fn, runtime: dict, constexprs: dict, num_warps: int, fp_fusion: bool,
         multiples_of_16=()) -> str:
    """PTX for sm_90 as Triton's JIT would build it: pointers 16-byte aligned, and the ints named
    in multiples_of_16 specialised as such unless the kernel says do_not_specialize."""
    sig = dict(runtime, **{name: "constexpr" for name in constexprs})
    names = list(fn.arg_names)
    div = [n for n in runtime if runtime[n].startswith("*")]
    div += [n for n in multiples_of_16 if n not in fn.do_not_specialize]
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div}
    src = ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "enable_fp_fusion": fp_fusion})
    return compiled.asm["ptx"]


def fma_reading_a_shuffle(ptx: str) -> list:
    """fma instructions with an operand that a shfl.sync wrote."""
    shuffled = set(re.findall(r"shfl\.sync\.\w+\.b32\s+(%r\d+)", ptx))
    fmas = re.finditer(r"fma\.[\w.]+\s+%r\d+,\s*(%r\d+),\s*(%r\d+),\s*(%r\d+);", ptx)
    return [m.group(0) for m in fmas if shuffled & set(m.groups())]


def _mapping_fwd(n_cols, mode, fp_fusion=None, lanes=True):
    """The forward kernel forward_rows launches for rows of n_cols (lanes=False: the short-row
    tile spread over the warp, as before lane tiles), specialised for contiguous rows."""
    cfg = launch_config(n_cols, 4, {"LANE_TILES": lanes}, mode=MODES[mode], soft_rows=False)
    runtime = {"Z": F32, "P": F32, "ALPHA": F32, "n_rows": "i32", "n_cols": "i32",
               "stride": "i32", "tol": "fp32"}
    const = {"ITERS": None, "MODE": MODES[mode], "MAX_ITER": 32, "BR": cfg["BR"], "BC": cfg["BC"], "LOG": False}
    if cfg["LANES"]:
        fn, const = KM._fwd_lanes_kernel, dict(const, LANES=cfg["LANES"])
    else:
        fn, const = KM._fwd_kernel, dict(const, SINGLE=cfg["SINGLE"], GROUPS=cfg["GROUPS"],
                                         GROUP_ITER=cfg["GROUP_ITER"])
    fus = cfg["FP_FUSION"] if fp_fusion is None else fp_fusion
    mult = ("n_cols", "stride") if n_cols % 16 == 0 else ()
    return _ptx(fn, runtime, const, cfg["num_warps"], fus, mult)


_LOSS_FWD_ARGS = {"Z": F32, "Y": "*i64", "LOSS": F32, "STATS": F32, "ALPHA": F32, "DZ": F32, "W": F32, "n_rows": "i32",
                  "n_cols": "i32", "stride": "i32", "ignore_index": "i32", "eps": "fp32",
                  "relu_tau": "fp32", "tol": "fp32"}


_ELEM_SIZE = {F32: 4, "*bf16": 2}


def _loss_fwd(n_cols, mode, dtype=F32, groups=None):
    """The loss forward fy_loss_rows launches for rows of n_cols of `dtype` logits; `groups`: the
    start's group size instead of the launch's (0: from -1)."""
    cfg = launch_config(n_cols, _ELEM_SIZE[dtype], mode=MODES[mode], lanes=False)
    if groups is None:
        groups = 0 if mode == "alpha_relu" else cfg["GROUPS"]
    const = {"MODE": MODES[mode], "SMOOTH": False, "MAX_ITER": 64, "BR": cfg["BR"],
             "BC": cfg["BC"], "SINGLE": cfg["SINGLE"], "GROUPS": groups, "GROUP_ITER": cfg["GROUP_ITER"],
             "GRAD": True}  # (the gradient written too, as where the logits require grad)
    mult = ("n_cols", "stride") if n_cols % 16 == 0 else ()
    return _ptx(KL._fy_fwd_kernel, dict(_LOSS_FWD_ARGS, Z=dtype, DZ=dtype), const, cfg["num_warps"], cfg["FP_FUSION"],
                mult)


def _mapping_bwd(n_cols, mode):
    cfg = launch_config(n_cols, 4, mode=MODES[mode], backward=True)
    runtime = {"P": F32, "G": F32, "DZ": F32, "ALPHA": F32, "DALPHA": F32, "n_rows": "i32",
               "n_cols": "i32", "stride_p": "i32", "stride_g": "i32"}
    const = {"MODE": MODES[mode], "BR": cfg["BR"], "BC": cfg["BC"]}
    if cfg["LANES"]:
        fn, const = KM._bwd_lanes_kernel, dict(const, LANES=cfg["LANES"])
    else:
        fn, const = KM._bwd_kernel, dict(const, SINGLE=cfg["SINGLE"])
    mult = ("n_cols", "stride_p", "stride_g") if n_cols % 16 == 0 else ()
    return _ptx(fn, runtime, const, cfg["num_warps"], cfg["FP_FUSION"], mult)


def test_the_check_sees_a_fused_butterfly_step():
    """Compiled with contraction, rows of 12 entries spread one entry a lane (the short-row
    tile before `lane_cols`, LANES=0) fuse a lane's own square into the first shuffle step of
    the 1.5-entmax sums: the check must flag it."""
    assert fma_reading_a_shuffle(_mapping_fwd(12, "entmax15", fp_fusion=True, lanes=False))


@pytest.mark.parametrize("mode", ["entmax15", "bisect"])
@pytest.mark.parametrize("n_cols", [3, 12, 17, 32, 48, 50, 100, 1024, 32768, 50000])
def test_mapping_forward_lanes_agree(mode, n_cols):
    assert fma_reading_a_shuffle(_mapping_fwd(n_cols, mode)) == []


@pytest.mark.parametrize("mode", ["entmax15", "bisect", "alpha_relu"])
@pytest.mark.parametrize("n_cols", [12, 1024, 32768, 50000])
def test_loss_forward_lanes_agree(mode, n_cols):
    assert fma_reading_a_shuffle(_loss_fwd(n_cols, mode)) == []


@pytest.mark.parametrize("mode", ["entmax15", "bisect"])
@pytest.mark.parametrize("n_cols", [3, 12, 17, 32, 48, 50, 100, 32768])
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


@pytest.mark.parametrize("mode", ["entmax15", "learned"])
@pytest.mark.parametrize("n_keys", [7, 12, 23, 50, 300])
def test_training_attention_lanes_agree(mode, n_keys):
    """The training attention's forward and backward kernels (one autograd node in OpenNMT-py's
    attention), per-head learned alpha included, as `scores_forward` / `scores_backward` launch them."""
    from onmt_entmax.ops.triton import attention_train as KT
    from onmt_entmax.ops.triton.attention import alpha_flags

    m = MODES["bisect" if mode == "learned" else mode]
    flags = {"HAS_KEEP": True, "HAS_DROP": True, **alpha_flags((1.01, 2.0) if mode == "learned" else None)}
    ints = {name: "i32" for name in KT._INTS}
    for backward in (False, True):
        cfg = KT._layout(n_keys, 4, m, backward, mode == "learned")
        const = dict(MODE=m, BR=cfg["BR"], BC=cfg["BC"], LANES=cfg["LANES"], **flags)
        if backward:
            fn, ptrs = KT._bwd_kernel, ["P", "GD", "DS", "KEEP", "ALPHA", "DALPHA"]
            const["HAS_DALPHA"] = mode == "learned"
            floats = ["scale", "drop"]
        else:
            fn, ptrs = KT._fwd_kernel, ["Sc", "P", "D", "KEEP", "ALPHA"]
            const.update(MAX_ITER=64 if m == 2 else 32, GROUPS=cfg["GROUPS"], GROUP_ITER=cfg["GROUP_ITER"],
                         HAS_D=True)
            floats = ["scale", "drop", "tol"]
        runtime = {**{p: ("*i1" if p == "KEEP" else F32) for p in ptrs}, **ints, **{f: "fp32" for f in floats}}
        ptx = _ptx(fn, runtime, const, cfg["num_warps"], cfg["FP_FUSION"])
        assert fma_reading_a_shuffle(ptx) == [], ("backward" if backward else "forward", cfg)


@pytest.mark.parametrize("mode", ["sparsemax", "bisect"])
def test_short_rows_compile_the_same_whatever_their_length(mode):
    """Short rows share one compiled kernel a tile size: rows of 48 and 64 (multiples of 16, which
    Triton would specialise on and vectorise) compile to the code of rows of 50. Vectorised,
    Triton 3.6 put each row on lanes that are not adjacent and reduced it across rows (wrong rows
    at 32, 48 and 64 columns on an H100): the lane-tile kernels do not specialise on lengths."""
    def code(n):
        return re.sub(r"//.*|\.loc.*|\.file.*", "", _mapping_fwd(n, mode))

    assert code(48) == code(50) == code(64)
    assert _mapping_bwd(48, mode) .count("ld.global.v") == 0


_FLOAT_ARGS = {"scale", "drop", "tol", "eps", "relu_tau", "lo", "hi", "am1", "tau"}
_INT_ARGS = {"H", "D"}  # heads and head size among the tiles' pointers


def _signature(fn, constexprs: dict, pointers: dict) -> dict:
    """Runtime argument types of `fn`: `pointers` for the named pointer arguments (default *fp32 for
    the other upper-case names), fp32 for the float scalars, i32 for sizes and strides."""
    def kind(n):
        if n in pointers or (n.isupper() and n not in _INT_ARGS):
            return pointers.get(n, "*fp32")
        return "fp32" if n in _FLOAT_ARGS else "i32"

    return {n: kind(n) for n in fn.arg_names if n not in constexprs}


def _other_kernels():
    """(name, kernel, constexprs, pointer types, warps, contraction) of every kernel the tests above
    do not compile, as their launches configure them."""
    from onmt_entmax.ops.triton import alpha as KAL
    from onmt_entmax.ops.triton import alpha_relu as KR
    from onmt_entmax.ops.triton import attention_long as KLA
    from onmt_entmax.ops.triton import attention_tiles as KTT
    from onmt_entmax.ops.triton import beam_step as KB
    from onmt_entmax.ops.triton import keep_tiles as KT

    i64 = "*i64"
    tiles = dict(MODE=2, BR=KTT.BM, BC=32, BD=64, BDV=64, HAS_KEEP=True, HAS_DROP=True, PREC="ieee",
                 LOGIT=True, LO=1.01, HI=2.0)
    # (long attention: bf16 tiles, every mask and the learned alpha; the forward's fused 1.5-entmax passes
    # and its weighted-sum pass, the dq kernel with the alpha-gradient, the key-tile kernel with dq by atomics)
    b16 = "*bf16"
    half = {n: b16 for n in ("Q", "K", "V", "O", "GO", "DQ", "DK", "DV")} | {"KEEP": "*i1", "KCLS": "*i8", "JR": "*i32",
                                                                           "QR": "*i32"}
    # (a keep mask read by its tile classes, HAS_KEEP 2, the launches' own; the listed rows read it entry by entry)
    long = dict(BM=64, BN=64, BD=64, BDV=64, HAS_KEEP=2, CAUSAL=True, HAS_DROP=True, PREC="tf32", LOGIT=True,
                LO=1.01, HI=2.0, SKIP=True)
    return [
        ("beam stats", KB._stats_kernel, dict(KP=8, BLOCK=KB._BLOCK, FINAL=False),
         {"KEPT": i64, "COUNT": i64}, 4, False),
        ("beam stats reduce", KB._reduce_kernel, dict(CP=8), {"PART_COUNT": i64, "COUNT": i64}, 1, False),
        ("beam top-k chunks", KB._topk_chunk_kernel, dict(KP=8, CHUNK=4096), {"PART": i64}, 4, False),
        ("beam top-k merge", KB._topk_merge_kernel, dict(KP=8, CP=8),
         {"PART": i64, "INDICES": i64, "STATS": "*fp64"}, 4, False),
        ("learned alpha", KAL._alpha_kernel, dict(BLOCK=16, GRAD=True), {}, 1, True),
        ("alpha-ReLU log", KR.log_kernel, dict(BLOCK=KR._BLOCK), {}, 4, False),
        *[(f"loss backward{' after the forward gradient' if skip else ''}", KL._fy_bwd_kernel,
           dict(MODE=1, SMOOTH=True, G_ONE=True, BR=1, BC=1024, SKIP_ONE=skip), {"Y": i64}, 4, True)
          for skip in (False, True)],
        *[(f"loss reduce, part {part}", KL._fy_reduce_kernel, dict(REDUCE=2, BLOCK=1024, PART=part), {"Y": i64}, 4,
           False) for part in (0, 1, 2)],
        ("training attention tiles, forward", KTT._fwd_kernel, dict(tiles, MAX_ITER=64), {"KEEP": "*i1"}, 4, False),
        ("training attention tiles, backward", KTT._bwd_kernel, dict(tiles, HAS_DALPHA=True), {"KEEP": "*i1"}, 4,
         False),
        *[(f"long attention, forward{', rows proved a row' if rowwise else ''}", KLA._fwd_kernel,
           dict(long, ITERS=None, MODE=1, MAX_ITER=32, GROUP_ITER=32, TOPK=4, START_MARGIN2=False, ROWWISE=rowwise,
                R=1, HALLEY=True),
           half | {"CNT": "*i32", "LIST": "*i32"}, 4, False) for rowwise in (False, True)],
        ("long attention, forward of the listed rows", KLA._fwd_rows_kernel,
         dict(long, ITERS=None, MODE=1, MAX_ITER=32, QBM=64, HAS_KEEP=1),
         half | {"CNT": "*i32", "LIST": "*i32"}, 4, False),
        ("long attention, dq", KLA._bwd_dq_kernel, dict(long, MODE=2, HAS_DALPHA=True, R=2), half, 4, False),
        ("long attention, dq dk dv", KLA._bwd_dkv_kernel, dict(long, MODE=1, FUSED_DQ=True, R=2), half, 4, False),
        ("long attention, keep mask tiles", KT._classes_kernel, dict(BM=64, BN=32, CH=256, CAUSAL=True),
         {"KEEP": "*i1", "KCLS": "*i8", "JR": "*i32"}, 8, False),
        ("long attention, keep mask tiles by key tile", KT._columns_kernel, dict(R=2, CB=128),
         {"KCLS": "*i8", "QR": "*i32"}, 4, False),
        ("long attention, c", KLA._c_kernel, dict(BM=64, BDV=64), half, 4, False),
    ]


@pytest.mark.parametrize("case", _other_kernels(), ids=lambda case: case[0])
def test_every_other_kernel_compiles_with_this_triton(case):
    """The installed Triton (CI takes the latest) compiles each remaining kernel for sm_90: an API
    that a new Triton drops fails here before it fails on a GPU; reductions in them keep their lanes
    in agreement too."""
    name, fn, const, pointers, warps, fusion = case
    ptx = _ptx(fn, _signature(fn, const, pointers), const, warps, fusion)
    assert ".entry" in ptx, name
    assert fma_reading_a_shuffle(ptx) == [], name


def _shared_loads(ptx: str) -> int:
    return len(re.findall(r"ld\.shared", ptx))


@pytest.mark.parametrize("dtype", [F32, "*bf16"])
@pytest.mark.parametrize("n_cols", [1024, 4096, 8192, 32768])
def test_group_start_keeps_long_rows_in_registers(n_cols, dtype):
    """Long rows start the solver from group maxima: forming the groups costs no trip through
    shared memory, only the solve on them its cross-warp reductions (groups of 16 at 8192 columns
    on 8 warps, which took the row through shared memory, ran the loss 1.5x slower on an H200)."""
    groups = launch_config(n_cols, _ELEM_SIZE[dtype], mode=1, lanes=False)["GROUPS"]
    assert groups >= 4
    loads = {g: _shared_loads(_loss_fwd(n_cols, "entmax15", dtype, g)) for g in (groups, 0)}
    assert loads[groups] <= 2 * loads[0], loads


def test_group_check_sees_groups_spread_over_threads():
    """Groups of 16 at 8192 columns on 8 warps (before `group_size`) fail the check above."""
    loads = {g: _shared_loads(_loss_fwd(8192, "entmax15", F32, g)) for g in (16, 0)}
    assert loads[16] > 2 * loads[0], loads
