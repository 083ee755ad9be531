#!/usr/bin/env bash
# Set-up on a fresh machine (Python >= 3.10, CPU is enough): torch, OpenNMT-py 3.5.1 and onmt-entmax.
#
# OpenNMT-py 3.5.1 pins torch<2.3, so it is installed with --no-deps and the runtime packages it
# imports (its transforms import spacy, fasttext, pyonmttok, rapidfuzz, pyahocorasick at import
# time) come from this package's setup.cfg instead. An installed torch is kept; otherwise
# $TORCH_SPEC is installed (default torch==2.13.0, a CPU wheel on the project's machines).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
pip_install() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }

if ! "$PY" -c "import torch" 2>/dev/null; then
  pip_install "${TORCH_SPEC:-torch==2.13.0}"
fi
if ! "$PY" -c "import importlib.metadata as m; assert m.version('OpenNMT-py') == '3.5.1'" 2>/dev/null; then
  pip_install --no-deps "OpenNMT-py==3.5.1"
fi
pip_install -e ".[test,pipelines]"
"$PY" -c "import torch, onmt, onmt_entmax; print('onmt-entmax', onmt_entmax.__version__, '| torch', torch.__version__)" 2>&1 \
  | grep -v Warning | grep -v '@custom_' || true
