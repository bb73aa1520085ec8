#!/usr/bin/env bash
# Create .venv and install gtalib with its pinned dependencies (one pip call, see
# docs/environment.md). Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
.venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
.venv/bin/python -c "import gtalib, torch, lightning; print('gtalib installed; torch', torch.__version__, 'lightning', lightning.__version__)"
