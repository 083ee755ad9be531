#!/usr/bin/env bash
# The test suite (CPU; CUDA tests skip without a GPU). Installs first, so it runs on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec "${PYTHON:-python3}" -m pytest -q tests "$@"
