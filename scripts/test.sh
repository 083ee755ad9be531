#!/usr/bin/env bash
# The test suite (CPU; CUDA tests skip without a GPU). Installs first, so it runs on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
PY=${PYTHON:-python3}
# the console scripts the tests run (onmt_train, ...) must be the ones of this interpreter
PATH="$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))'):$PATH"
export PATH
# the linter first (pyflakes, pycodestyle, 120 columns: pyproject.toml), then the tests
"$PY" -m ruff check --quiet .
# one worker a core (pytest-xdist, in the test extra); a test file stays on one worker, so its module
# fixtures (the tiny trained models) are built once
exec "$PY" -m pytest -q -n auto --dist loadfile tests "$@"
