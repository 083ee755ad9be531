#!/usr/bin/env bash
# Every GPU benchmark of docs/benchmarks.md in one command, on one otherwise idle GPU; each table
# goes to OUTDIR as markdown (+ JSON where the script writes it), with the device and versions.
#   bash benchmarks/run_gpu.sh OUTDIR [MULTI30K_DIR]      # MULTI30K_DIR: train.{de,en}.gz
#   PARTS="tests 32k" bash benchmarks/run_gpu.sh OUTDIR    # only the named parts, in this order:
# tests (kernel tests), check (a checked training run), kernels (kernel ratios; a few minutes),
# train-inproc (training steps in one process), multi30k and 32k (onmt_train tokens/s, then
# onmt_translate sentences/s, in-process decoding and its per-step profile, on Multi30k and on a
# synthetic 32k vocabulary; four variants each, ~1 min a variant on an H200). Each part stands
# alone: a part that decodes trains its own models first. DECODE_ROUNDS=N (default 120) sets the
# in-process decoding rounds (fewer fit a time-limited machine; the interval printed widens).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash benchmarks/run_gpu.sh OUTDIR [MULTI30K_DIR]}
m30k=${2:-../shared/data/multi30k}
parts=" ${PARTS:-tests check kernels train-inproc multi30k 32k} "
for p in $parts; do
    case $p in tests|check|kernels|train-inproc|multi30k|32k) ;;
        *) echo "run_gpu.sh: unknown part '$p' in PARTS (tests check kernels train-inproc multi30k 32k)" >&2; exit 2;;
    esac
    if [[ $p =~ ^(check|train-inproc|multi30k)$ ]] && ! ls "$m30k"/train.de* > /dev/null 2>&1; then
        echo "run_gpu.sh: no train.de(.gz) in MULTI30K_DIR=$m30k (read by the part $p)" >&2; exit 2
    fi
done
part() { [[ $parts == *" $1 "* ]] && echo "== part $1 ($(date -u +%H:%M:%S))"; }
mkdir -p "$out"
python3 -c "import torch; assert torch.cuda.is_available(), 'run_gpu.sh needs a CUDA GPU'; \
import triton; print(torch.cuda.get_device_name(), 'torch', torch.__version__, 'triton', triton.__version__)" \
    | tee "$out/device.txt"
git describe --always --dirty --abbrev=40 >> "$out/device.txt" 2>/dev/null || true  # -dirty: not the commit alone

# decoding in one process, 30 steps a sentence, each run (one 64-sentence batch) paired with softmax's of
# the same round, 120 rounds by default (onmt_translate process runs move by tens of percent); then where the beam
# steps go: kernel launches and GPU kernel time a step, the heaviest kernels
decode_in_process() {  # decode_in_process NAME WORKDIR SOURCE
    python3 benchmarks/bench_translate.py --workdir "$2" --src "$3" --gpu --beam 5 --lines 64 --fixed-length 30 \
        --in-process --repeat "${DECODE_ROUNDS:-120}" --median > "$out/translate-inproc-$1.md"
    python3 benchmarks/profile_translate.py --workdir "$2" --src "$3" --gpu --fixed-length 30 \
        > "$out/profile-translate-$1.md"
}

if part tests; then
    # speed of wrong kernels means nothing: the kernel tests first (set -e stops on a failure)
    python3 -m pytest -q -p no:cacheprovider tests/ops/test_triton_kernels.py tests/ops/test_triton_loss.py tests/ops/test_triton_codegen.py \
        tests/ops/test_triton_attention.py tests/onmt/model/test_fused_attention.py tests/onmt/test_cuda.py \
        2>&1 | tee "$out/tests.txt" | tail -n 3
fi
if part check; then
    # training rows are not test rows: every short-row kernel call of 100 training steps against the
    # float64 reference (exit status 1 on a wrong row)
    python3 benchmarks/bench_train.py --gpu --data multi30k --multi30k-dir "$m30k" --workdir "$out/check" --steps 100 \
        --variants "entmax15 (output + all attention)" "learned alpha (all attention)" \
        --check-kernels "$out/check/wrong" > "$out/check.md"
fi
if part kernels; then
    # VARIANTS=1: also the launch-shape sweeps (each short-row shape next to its correctness check)
    python3 benchmarks/bench_kernels.py ${VARIANTS:+--variants} --json "$out/kernels.json" > "$out/kernels.md"
    (cd benchmarks && python3 bench_attention.py --train --rows 128 --keys 32 --reps 200 --rounds 3) \
        > "$out/attention-train.md"
fi
if part train-inproc; then
    # training steps in one process, the variants in turn (onmt_train runs move by 20-30% run to run)
    python3 benchmarks/bench_train.py --gpu --data multi30k --multi30k-dir "$m30k" --workdir "$out/inproc-multi30k" \
        --in-process --steps 20 --rounds 12 --json "$out/train-inproc-multi30k.json" > "$out/train-inproc-multi30k.md"
    python3 benchmarks/bench_train.py --gpu --data synthetic --vocab 32000 --workdir "$out/inproc-32k" \
        --in-process --steps 20 --rounds 12 --json "$out/train-inproc-32k.json" > "$out/train-inproc-32k.md"
fi
if part multi30k; then
    python3 benchmarks/bench_train.py --gpu --data multi30k --multi30k-dir "$m30k" --workdir "$out/train-multi30k" \
        --json "$out/train-multi30k.json" > "$out/train-multi30k.md"
    python3 benchmarks/bench_translate.py --workdir "$out/train-multi30k" --gpu --beam 5 --lines 1000 \
        --check-kernels log_probs,alpha_relu_log,beam_topk > "$out/translate-multi30k.md"
    decode_in_process multi30k "$out/train-multi30k" "$out/train-multi30k/train.de"
fi
if part 32k; then
    python3 benchmarks/bench_train.py --gpu --data synthetic --vocab 32000 --workdir "$out/train-32k" \
        --json "$out/train-32k.json" > "$out/train-32k.md"
    python3 benchmarks/bench_translate.py --workdir "$out/train-32k" --gpu --beam 5 --lines 1000 \
        > "$out/translate-32k.md"
    decode_in_process 32k "$out/train-32k" "$out/train-32k/train.src"
fi
tail -n +1 "$out"/*.md
