#!/usr/bin/env bash
# The GPU run (issue 42 item 4), in one go of at most ~8 minutes on a one-GPU machine:
#   bash bench/gpu/run.sh                 # the measurements, under results/gpu/<device>/
#   bash bench/gpu/run.sh --tiny --checkpoint-dir DIR --out DIR   # the suite's CPU check
# It runs from a copy of the checkout with the machine's own Python (PYTHON, default python3)
# and JAX. What that Python lacks comes from bench/gpu/wheels/ (bench/gpu/wheels.sh), installed
# --no-deps into a folder of its own: nothing is fetched and the machine's packages are kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
py="${PYTHON:-python3}"
deps="${RTPLAN_GPU_DEPS:-${TMPDIR:-/tmp}/rtplan-gpu-deps}"
root="$(pwd)"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
if ! "$py" -c "import mctx, pgx, jumanji, fastapi, uvicorn, websockets, pydantic_settings" 2>/dev/null; then
  wheels="${RTPLAN_GPU_WHEELS:-bench/gpu/wheels}"
  if ! ls "$wheels"/*.whl >/dev/null 2>&1; then
    echo "run.sh: $py lacks rtplan's packages and $wheels/ has no wheels:" \
      "run bash bench/gpu/wheels.sh first" >&2
    exit 2
  fi
  "$py" -m pip install --quiet --no-index --no-deps --target "$deps" "$wheels"/*.whl
  export PYTHONPATH="$root:$deps${PYTHONPATH#"$root"}"
fi
# The planner service and the env server share the one GPU: no process takes most of its
# memory up front.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
exec "$py" -m bench.gpu.measure "$@"
