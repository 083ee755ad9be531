"""What the long-attention kernels (triton/attention_long.py) compile to for sm_90, with no GPU: for each kernel
as its launch configures it (tiles, warps, pipelining stages, kind, dtype), the machine code's spill traffic and
instruction mix, read from the cubin that the installed Triton builds (its own `cuobjdump`).

Counts are static (instructions in the code, not executed): a change that adds local-memory loads (LDL, spilled
registers) or removes the pipelined copies (LDGSTS) inside the key-tile loops shows here before a GPU run. The
GPU machine's Triton may compile otherwise (install its version beside, e.g. `pip install --target DIR
triton==3.6.0` and run with `PYTHONPATH=DIR`).

    python3 benchmarks/sass_long_attention.py [--dtype bf16] [--head-dim 64] [--keys 4096] [--mode 1] [--tile 64x64x4]
    python3 benchmarks/sass_long_attention.py --unspecialised   # the strides as plain ints (no 16-byte proof)
    python3 benchmarks/sass_long_attention.py --head-dim 256 --alpha-grad   # shared bytes of the widest heads
    python3 benchmarks/sass_long_attention.py --loops   # each loop's instructions (a tile's, in a key-tile loop)
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onmt_entmax.ops.triton import attention_long as KL  # noqa: E402

SIZES = {"H", "Tq", "Tk", "D", "Dv"}  # upper-case ints among the kernels' pointers
FLOATS = {"scale", "drop", "tol"}
COUNTED = ["LDL", "STL", "LDGSTS", "LDG", "HGMMA", "HMMA", "BAR", "LDS", "STS", "SHFL", "MUFU", "FMNMX"]
OPCODE = re.compile(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
BRANCH_TARGET = re.compile(r"0x([0-9a-f]+)")


def compiled(fn, constexprs: dict, dtype: str, warps: int, stages: int | None, specialised: bool):
    """`fn` compiled for sm_90 as Triton's JIT would build it for 16-byte-aligned tensors and (specialised) for
    ints that are multiples of 16 where the kernel lets them be specialised."""
    ptr = "*bf16" if dtype == "bf16" else "*fp32"
    sig = {}
    for name in fn.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in FLOATS:
            sig[name] = "fp32"
        elif name == "KEEP":
            sig[name] = "*i1"
        elif name in ("ITERS", "CNT", "LIST", "JR", "QR"):
            sig[name] = "*i32"
        elif name == "KCLS":
            sig[name] = "*i8"
        elif name[0].isupper() and name not in SIZES:
            sig[name] = ptr if name in ("Q", "K", "V", "O", "GO", "DQ", "DK", "DV") else "*fp32"
        else:
            sig[name] = "i32"
    names = list(fn.arg_names)
    aligned = [n for n in names if sig[n].startswith("*")]
    if specialised:
        aligned += [n for n in names if sig[n] == "i32" and n not in fn.do_not_specialize]
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    options = {"num_warps": warps, "enable_fp_fusion": False} | ({"num_stages": stages} if stages else {})
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)


def machine_code(kernel) -> tuple[str, collections.Counter, str]:
    """(registers a thread, the kernel's SASS instructions by opcode, the SASS)."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        usage, sass = (subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=True).stdout
                       for flag in ("--dump-resource-usage", "--dump-sass"))
    regs = re.search(r"REG:(\d+)", usage)
    return (regs.group(1) if regs else "-"), collections.Counter(
        m.group(1) for m in map(OPCODE.match, sass.splitlines()) if m), sass


def loops(sass: str) -> list[tuple[int, int, collections.Counter]]:
    """(first address, last address, instructions by opcode with their modifiers) of each loop of the SASS, in
    the order their back edges appear: a branch to an earlier address closes a loop whose body runs from that
    address to the branch (an outer loop's body holds its inner loops). A key-tile loop's count is what a thread
    issues a tile (static: each instruction once, whether or not its predicate holds)."""
    code = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in map(INSTRUCTION.search, sass.splitlines()) if m]
    at = {address: i for i, (address, _, _) in enumerate(code)}
    found = []
    for i, (address, opcode, operands) in enumerate(code):
        target = BRANCH_TARGET.search(operands) if opcode.startswith("BRA") else None
        if target and int(target.group(1), 16) < address and int(target.group(1), 16) in at:
            start = int(target.group(1), 16)
            found.append((start, address, collections.Counter(op for _, op, _ in code[at[start]:i + 1])))
    return found


def kernels(args: argparse.Namespace) -> list[tuple[str, object, dict, int, int | None]]:
    """(name, kernel, constexprs, warps, stages) of the calls a launch of these settings makes: the launch's own
    tiles and stages (`_tiles`, `_stages`) for the dtype, head dim and row length, where not given."""
    dtype = KL.torch.float32 if args.dtype == "fp32" else KL.torch.bfloat16
    # (the kernels' own knobs, as a benchmark sweep sets them)
    KL.TILE = tuple(int(n) for n in args.tile.split("x")) if args.tile else None
    KL.BWD_KEYS, KL.BWD_STAGES = args.bwd_keys, args.bwd_stages
    bm, bn, bn_b, warps = KL._tiles(args.head_dim, args.head_dim, args.keys, dtype, args.mode)
    stages, bwd_stages = KL._stages(args.head_dim, args.head_dim, dtype, args.keep)
    stages = args.stages if args.stages is not None else stages
    bd = triton.next_power_of_2(max(args.head_dim, 16))
    common = dict(BM=bm, BN=bn, BD=bd, BDV=bd, HAS_KEEP=2 * args.keep, CAUSAL=args.causal, HAS_DROP=args.dropout,
                  PREC="tf32x3" if args.dtype == "fp32" else "tf32", LOGIT=False, LO=1.0, HI=2.0, SKIP=True)
    fwd = dict(common, ITERS=None, MODE=args.mode, MAX_ITER=64 if args.mode == 2 else 32, GROUP_ITER=32,
               TOPK=args.topk or KL._topk(args.keys), START_MARGIN2=False, ROWWISE=args.rowwise, HALLEY=not args.newton)
    fwd["R"] = 1
    bwd = dict(common, BN=bn_b, R=bn_b // bn)
    if args.alpha_grad:  # learned alphas (their logits' gradient): the dq kernel sums it, so two kernels
        fwd.update(LOGIT=True)
        bwd.update(LOGIT=True)
    fused = args.dtype != "fp32" and not args.alpha_grad
    out = [(f"forward {bm}x{bn}x{warps}", KL._fwd_kernel, fwd, warps, stages)]
    if args.rowwise:
        rows = {c: v for c, v in fwd.items()
                if c not in ("GROUP_ITER", "TOPK", "START_MARGIN2", "ROWWISE", "R", "HALLEY")}
        rows.update(QBM=bm, HAS_KEEP=int(args.keep))
        out.append((f"forward, listed rows {bm}x{bn}x{warps}", KL._fwd_rows_kernel, rows, warps, stages))
    out.append((f"backward dk dv{' dq' if fused else ''} {bm}x{bn_b}x{warps}", KL._bwd_dkv_kernel,
                dict(bwd, MODE=args.mode, FUSED_DQ=fused), warps, bwd_stages))
    if not fused:
        out.append((f"backward dq {bm}x{bn_b}x{warps}", KL._bwd_dq_kernel,
                    dict(bwd, MODE=args.mode, HAS_DALPHA=args.alpha_grad), warps, bwd_stages))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tile", help="BMxBNxWARPS, forward and backward (default: the launch's)")
    ap.add_argument("--bwd-keys", type=int, help="the backward's key tile (default: the launch's)")
    ap.add_argument("--stages", type=int, help="the forward's pipelining stages (default: the launch's)")
    ap.add_argument("--bwd-stages", type=int, help="the backward's (default: the launch's)")
    ap.add_argument("--mode", type=int, default=1, choices=[0, 1, 2], help="0 sparsemax, 1 1.5-entmax, 2 alpha")
    ap.add_argument("--topk", type=int, choices=[1, 2, 4], help="(default: the launch's)")
    ap.add_argument("--keys", type=int, default=4096, help="the row length the launch's settings are chosen for")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--alpha-grad", action="store_true", help="learned alphas: their gradient, two backward kernels")
    ap.add_argument("--keep", action="store_true", help="with a keep mask")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dropout", action="store_true", help="with attention dropout")
    ap.add_argument("--newton", action="store_true", help="alpha-entmax passes with Newton's step (HALLEY off)")
    ap.add_argument("--rowwise", action="store_true", help="ROWWISE: rows pass 1 does not prove, in a second launch")
    ap.add_argument("--unspecialised", action="store_true", help="no int specialised (every stride a plain int)")
    ap.add_argument("--loops", action="store_true", help="also each loop's instruction count and commonest opcodes")
    args = ap.parse_args(argv)
    args.mode = 2 if args.alpha_grad else args.mode
    print(f"Triton {triton.__version__}, sm_90, {args.dtype}, mode {args.mode}, head dim {args.head_dim}, "
          f"{args.keys} keys")
    print("| kernel | registers | shared bytes | " + " | ".join(COUNTED) + " | all |")
    print("|" + "---|" * (len(COUNTED) + 4))
    found = []
    for name, fn, constexprs, warps, stages in kernels(args):
        kernel = compiled(fn, constexprs, args.dtype, warps, stages, not args.unspecialised)
        regs, ops, sass = machine_code(kernel)
        print(f"| {name} | {regs} | {kernel.metadata.shared} | " + " | ".join(str(ops[c]) for c in COUNTED)
              + f" | {sum(ops.values())} |", flush=True)
        if args.loops:
            found.append((name, loops(sass)))
    for name, kernel_loops in found:
        print(f"\n{name}, loops (static instructions a thread an iteration):")
        for start, end, ops in kernel_loops:
            common = ", ".join(f"{op} {n}" for op, n in ops.most_common(8))
            print(f"- 0x{start:x}-0x{end:x}: {sum(ops.values())} ({common})")


if __name__ == "__main__":
    main()
