#!/usr/bin/env bash
# The test command of the README: the unit/integration tests, then the whole book at the `ci`
# preset (papermill executes every notebook, Jupyter Book builds HTML, the pages are checked).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# two pytest-xdist workers, each test file on one (its module fixtures, such as the built ci
# book, are then made once), the files with slow tests first (tests/conftest.py orders them;
# --no-loadscope-reorder keeps that order); GTALIB_TEST_WORKERS=0 runs in this process alone
workers=${GTALIB_TEST_WORKERS:-2}
dist=()
if [ "$workers" != 0 ]; then dist=(-n "$workers" --dist loadfile --no-loadscope-reorder); fi
.venv/bin/python -m pytest -q -x "${dist[@]}" "$@"
