#!/usr/bin/env bash
# Every GPU benchmark of docs/benchmarks.md in one command, on one otherwise idle GPU. Each benchmark's
# markdown goes to OUTDIR (FILE.md, + JSON where the script writes it) with the command that made it
# (FILE.md.cmd) and the machine (machine.json: GPU, driver, torch, Triton, commit, date); at the end
# benchmarks/report.py assembles them into OUTDIR/benchmarks.md, the document's GPU sections
# (`python3 benchmarks/report.py OUTDIR... --into docs/benchmarks.md` puts them there).
#   bash benchmarks/run_gpu.sh OUTDIR [MULTI30K_DIR]      # MULTI30K_DIR: train.{de,en}.gz
#   PARTS="tests 32k" bash benchmarks/run_gpu.sh OUTDIR    # only the named parts, in this order:
# tests (kernel tests), check (a checked training run), kernels (kernel ratios; a few minutes),
# train-inproc (training steps in one process), multi30k and 32k (onmt_train tokens/s, then
# onmt_translate sentences/s, in-process decoding and its per-step profile, on Multi30k and on a
# synthetic 32k vocabulary; four variants each, ~1 min a variant on an H200), long (documents of
# 4,096 tokens, a synthetic long copy: softmax (SDPA) against 1.5-entmax and learned-alpha attention,
# training steps in one process, then onmt_train runs whose models decode a document), long-attention
# (bench_long_attention.py's cases this commit has not measured, into CSV/long-attention.csv), long-eole
# (the same documents, variants and model size with eole train, then eole predict of one document
# with the 1.5-entmax model; Eole installed: docs/eole.md). Each part stands alone: a part that
# decodes trains its own models first. DECODE_ROUNDS=N (default 120) sets the in-process decoding
# rounds (fewer fit a time-limited machine; the interval printed widens); COMMIT=HASH names the commit
# where the copy has no .git. Each benchmark also appends its rows to the family CSVs in CSV=DIR
# (default benchmarks/results; on a lent machine a folder under OUTDIR), which
# `python3 benchmarks/report.py --results DIR --into docs/benchmarks.md` renders.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash benchmarks/run_gpu.sh OUTDIR [MULTI30K_DIR]}
m30k=${2:-../shared/data/multi30k}
csv=${CSV:-benchmarks/results}
parts=" ${PARTS:-tests check kernels train-inproc multi30k 32k long long-attention long-eole} "
for p in $parts; do
    case $p in tests|check|kernels|train-inproc|multi30k|32k|long|long-attention|long-eole) ;;
        *) echo "run_gpu.sh: unknown part '$p' in PARTS (tests check kernels train-inproc multi30k 32k long" \
                "long-attention long-eole)" >&2
           exit 2;;
    esac
    if [[ $p == long-eole ]] && ! python3 -c "import importlib.util as u, sys; sys.exit(not u.find_spec('eole'))"; then
        echo "run_gpu.sh: the part long-eole runs eole, and this python3 has no eole (its wheels: docs/eole.md)" >&2
        exit 2
    fi
    if [[ $p =~ ^(check|train-inproc|multi30k)$ ]] && ! ls "$m30k"/train.de* > /dev/null 2>&1; then
        echo "run_gpu.sh: no train.de(.gz) in MULTI30K_DIR=$m30k (read by the part $p)" >&2; exit 2
    fi
done
part() { [[ $parts == *" $1 "* ]] && echo "== part $1 ($(date -u +%H:%M:%S))"; }
mkdir -p "$out"
python3 - "$out/machine.json" "$parts" <<'PY'
import datetime, json, os, subprocess, sys
import torch, triton
assert torch.cuda.is_available(), "run_gpu.sh needs a CUDA GPU"
def output(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
        "driver": output("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader").split("\n")[0],
        # -dirty: not the commit alone; COMMIT=HASH names it where the copy has no .git (a device machine)
        "commit": os.environ.get("COMMIT") or output("git", "describe", "--always", "--dirty", "--abbrev=40"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "parts": sys.argv[2].split()}
open(sys.argv[1], "w").write(json.dumps(meta, indent=1))
print(meta["gpu"], "torch", meta["torch"], "triton", meta["triton"], meta["commit"])
PY

# shown FILE CMD...: the command that writes FILE, as the document shows it (OUT, MULTI30K_DIR for the paths)
shown() {
    local file=$1 words=() a; shift
    for a in "$@"; do
        [[ $a == "$out"* ]] && a="OUT${a#"$out"}"
        [[ $a == "$m30k"* ]] && a="MULTI30K_DIR${a#"$m30k"}"
        [[ $a == *" "* ]] && a="\"$a\""
        words+=("$a")
    done
    echo "${words[*]}" > "$out/$file.cmd"
}
# record FILE CMD...: run CMD, its output to OUTDIR/FILE, its command beside it (and in its CSV rows)
record() { local file=$1; shift; shown "$file" "$@"; BENCH_COMMAND="$(cat "$out/$file.cmd")" "$@" > "$out/$file"; }

# decoding in one process, 30 steps a sentence, each run (one 64-sentence batch) paired with softmax's of
# the same round, 120 rounds by default (onmt_translate process runs move by tens of percent); then where the beam
# steps go: kernel launches and GPU kernel time a step, the heaviest kernels
decode_in_process() {  # decode_in_process NAME WORKDIR SOURCE DATA_LABEL
    record "translate-inproc-$1.md" python3 benchmarks/bench_translate.py --workdir "$2" --src "$3" --gpu --beam 5 \
        --lines 64 --fixed-length 30 --in-process --repeat "${DECODE_ROUNDS:-120}" --median --csv "$csv" \
        --data-label "$4"
    record "profile-translate-$1.md" python3 benchmarks/profile_translate.py --workdir "$2" --src "$3" --gpu \
        --fixed-length 30 --csv "$csv" --data-label "$4"
}

if part tests; then
    # speed of wrong kernels means nothing: the kernel tests first (set -e stops on a failure); with pytest-xdist,
    # TEST_WORKERS processes (default 8) compile the kernels' variants side by side (the long-attention file
    # alone: ~2 minutes on 16 workers of an H200 machine, ~10 in one process)
    tests=(python3 -m pytest -q -p no:cacheprovider tests/ops/test_triton_kernels.py tests/ops/test_triton_loss.py
           tests/ops/test_triton_codegen.py tests/ops/test_triton_attention.py tests/ops/test_triton_long_attention.py
           tests/onmt/model/test_fused_attention.py tests/onmt/test_cuda.py)
    if python3 -c "import xdist" 2> /dev/null; then tests+=(-n "${TEST_WORKERS:-8}"); fi
    shown tests.txt "${tests[@]}"
    "${tests[@]}" 2>&1 | tee "$out/tests.txt" | tail -n 3
fi
if part check; then
    # training rows are not test rows: every short-row kernel call of 100 training steps against the
    # float64 reference (exit status 1 on a wrong row)
    record check.md python3 benchmarks/bench_train.py --gpu --data multi30k --multi30k-dir "$m30k" \
        --workdir "$out/check" --steps 100 --variants "entmax15 (output + all attention)" "learned alpha (all attention)" \
        --check-kernels "$out/check/wrong" --csv "$csv"
fi
if part kernels; then
    # VARIANTS=1: also the launch-shape sweeps (each short-row shape next to its correctness check)
    record kernels.md python3 benchmarks/bench_kernels.py ${VARIANTS:+--variants} --json "$out/kernels.json" \
        --csv "$csv"
    record attention-train.md python3 benchmarks/bench_attention.py --train --rows 128 --keys 32 --reps 200 --rounds 3 \
        --csv "$csv"
fi
if part train-inproc; then
    # training steps in one process, the variants in turn (onmt_train runs move by 20-30% run to run)
    record train-inproc-multi30k.md python3 benchmarks/bench_train.py --gpu --data multi30k --multi30k-dir "$m30k" \
        --workdir "$out/inproc-multi30k" --in-process --steps 20 --rounds 12 --json "$out/train-inproc-multi30k.json" \
        --csv "$csv"
    record train-inproc-32k.md python3 benchmarks/bench_train.py --gpu --data synthetic --vocab 32000 \
        --workdir "$out/inproc-32k" --in-process --steps 20 --rounds 12 --json "$out/train-inproc-32k.json" --csv "$csv"
fi
if part multi30k; then
    record train-multi30k.md python3 benchmarks/bench_train.py --gpu --data multi30k --multi30k-dir "$m30k" \
        --workdir "$out/train-multi30k" --json "$out/train-multi30k.json" --csv "$csv"
    record translate-multi30k.md python3 benchmarks/bench_translate.py --workdir "$out/train-multi30k" --gpu --beam 5 \
        --lines 1000 --check-kernels log_probs,alpha_relu_log,beam_topk --csv "$csv" --data-label multi30k
    decode_in_process multi30k "$out/train-multi30k" "$out/train-multi30k/train.de" multi30k
fi
if part 32k; then
    record train-32k.md python3 benchmarks/bench_train.py --gpu --data synthetic --vocab 32000 --workdir "$out/train-32k" \
        --json "$out/train-32k.json" --csv "$csv"
    record translate-32k.md python3 benchmarks/bench_translate.py --workdir "$out/train-32k" --gpu --beam 5 --lines 1000 \
        --csv "$csv" --data-label "synthetic 32k"
    decode_in_process 32k "$out/train-32k" "$out/train-32k/train.src" "synthetic 32k"
fi
if part long; then
    # issue 62 item 5: rows past the short-row tiles (4,096 keys) take the long-attention kernels
    record train-inproc-long.md python3 benchmarks/bench_train.py --gpu --data long-copy --length 4096 \
        --workdir "$out/inproc-long" --in-process --in-process-batches 8 --steps 10 --rounds 8 --csv "$csv"
    record train-long.md python3 benchmarks/bench_train.py --gpu --data long-copy --length 4096 \
        --workdir "$out/train-long" --steps 60 --report-every 10 --csv "$csv"
    # greedy, exactly 4,096 steps: one whole target document a model
    record translate-long.md python3 benchmarks/bench_translate.py --workdir "$out/train-long" \
        --src "$out/train-long/train.src" --gpu --beam 1 --batch 1 --lines 1 --repeat 1 --fixed-length 4096 \
        --csv "$csv" --data-label "long copy 4096 tokens"
fi
if part long-attention; then
    # issue 62's kernel table (benchmarks/results/long-attention.csv; docs/benchmarks.md renders it with
    # report.py --long-attention): --resume measures only the cases this commit has no row for, so a run cut
    # short at a machine's limit goes on where it stopped
    python3 benchmarks/bench_long_attention.py --csv "$csv/long-attention.csv" --resume | tee "$out/long-attention.log" \
        | tail -n 3
fi
if part long-eole; then
    # issue 62 item 5 with stock eole train / eole predict: the same documents, variants and model size
    record eole-long.md python3 benchmarks/bench_eole_long.py --gpu --data long-copy --length 4096 \
        --workdir "$out/eole-long" --steps 60 --report-every 10 --json "$out/eole-long.json" --csv "$csv"
fi
python3 benchmarks/report.py "$out" > "$out/benchmarks.md"
cat "$out/benchmarks.md"
