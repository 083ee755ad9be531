#!/usr/bin/env bash
# Reproduce one table of the papers: data, training over seeds, evaluation, recorded results, markdown table.
#   scripts/reproduce.sh peters2019-table1 --seeds 1 2 3 --gpus 0 1 2 3 --jobs 9 [--only 'medium/*']
#   scripts/reproduce.sh smoke          # every family, tiny, on CPU (minutes): the bundled samples in data/
#   scripts/reproduce.sh smoke-data     # work/smoke/multi30k from data/multi30k-sample (what configs/smoke read)
# Steps one at a time: python3 scripts/reproduce/reproduce.py {data,train,evaluate,record,table,plot} TABLE ...
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
    python3 scripts/reproduce/reproduce.py --help
    exit 2
fi
if [ "$1" = smoke ]; then
    shift
    exec python3 -m pytest -q -m slow tests/pipelines/test_pipe_smoke.py "$@"
fi
if [ "$1" = smoke-data ]; then
    exec python3 scripts/reproduce/reproduce.py smoke-data
fi
table="$1"
shift
exec python3 scripts/reproduce/reproduce.py all "$table" "$@"
