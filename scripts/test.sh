#!/usr/bin/env bash
# Runs the whole test suite (CTest: labels unit, petsc, gpu; the gpu tests skip without a CUDA device).
# Usage: scripts/test.sh [--help] [extra ctest arguments, e.g. -L unit]
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
"$AIJP_ROOT/scripts/build.sh" >/dev/null
ctest --test-dir "$AIJP_BUILD" --output-on-failure -j 2 "$@"
