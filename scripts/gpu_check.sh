#!/usr/bin/env bash
# The prepared GPU check (benchmarks/gpu_check.py): installs nothing, runs unbuffered
# under a hard time limit (8 minutes on one H200 is the budget; the script stops itself before).
# Usage: bash scripts/gpu_check.sh OUTDIR [extra gpu_check.py options]
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: $0 OUTDIR [--sections tests,attention,decode,train[,tp]] [--quick]" >&2
  exit 2
fi
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONUNBUFFERED=1
timeout --signal=TERM --kill-after=10 ${GPU_CHECK_TIMEOUT:-470} "$PY" benchmarks/gpu_check.py "$@"
