#!/usr/bin/env bash
# Downloads the wheels the GPU machine lacks (bench/gpu/requirements.txt) into bench/gpu/wheels/
# for its Python (default 3.12, x86-64 Linux), before a session sends the checkout there:
#   bash bench/gpu/wheels.sh [PYTHON_VERSION]
# The folder is git-ignored; the device call carries it (`carry: ["bench/gpu/wheels"]`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="${1:-3.12}"
pip="${PIP:-$here/../../.venv/bin/pip}"
rm -rf "$here/wheels" && mkdir -p "$here/wheels"  # one Python's wheels at a time
grep -v '^#' "$here/requirements.txt" | grep . | while read -r req; do
  "$pip" download --quiet --no-deps --only-binary=:all: --python-version "$version" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux1_x86_64 \
    --dest "$here/wheels" "$req" 2>&1 | grep -v '^WARNING: Location' || true
done
echo "bench/gpu/wheels: $(ls "$here/wheels" | wc -l) wheels, $(du -sh "$here/wheels" | cut -f1)"
