#!/usr/bin/env bash
# Set-up on a fresh machine (Python >= 3.10, CPU is enough): torch, OpenNMT-py 3.5.1, Eole 0.6.4 (Python
# >= 3.11) and onmt-entmax, all in one environment.
#
# OpenNMT-py 3.5.1 pins torch<2.3; this package supports current torch. So OpenNMT-py is installed
# last and with --no-deps (pip then neither downgrades torch nor reports the pin as a conflict), and
# the runtime packages it imports (its transforms import spacy, fasttext, pyonmttok, rapidfuzz,
# pyahocorasick at import time) come from this package's setup.cfg. Eole 0.6.4 wants torch>=2.10,<2.15
# and comes with its dependencies through the `eole` extra (plus aiohttp, which its command imports).
# An installed torch is kept; otherwise $TORCH_SPEC is installed (default torch==2.13.0, a CPU wheel
# on the project's machines).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore  # containers install as root; pip would warn about it at every step
# -qq: pip's errors only; its notices about this machine's index settings (one "Location ... is
# ignored" warning for each package looked up, over a hundred with Eole's dependencies) are not ours
# --no-warn-conflicts: on a second run OpenNMT-py is already there, and pip would report its torch pin
# as an ERROR line at every install (nothing fails: it is the pin bypassed above)
pip_install() { "$PY" -m pip install -qq --disable-pip-version-check --no-warn-conflicts "$@"; }

if ! "$PY" -c "import torch" 2>/dev/null; then
  pip_install "${TORCH_SPEC:-torch==2.13.0}"
fi
echo "install.sh: onmt-entmax and its dependencies (Eole, OpenNMT-py's imports, test tools): minutes when new..."
pip_install -e ".[test,pipelines,eole]"
if ! "$PY" -c "import importlib.metadata as m; assert m.version('OpenNMT-py') == '3.5.1'" 2>/dev/null; then
  pip_install --no-deps "OpenNMT-py==3.5.1"
fi
"$PY" -c "import torch, onmt, onmt_entmax; print('onmt-entmax', onmt_entmax.__version__, '| torch', torch.__version__,
'| OpenNMT-py 3.5.1, installed without its dependencies: its torch<2.3 pin is bypassed on purpose')"
