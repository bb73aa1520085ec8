#!/usr/bin/env bash
# The test command of the README: the unit/integration tests, then the whole book at the `ci`
# preset (papermill executes every notebook, Jupyter Book builds HTML, the pages are checked).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
.venv/bin/python -m pytest -q -x "$@"
