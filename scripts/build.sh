#!/usr/bin/env bash
# Configures and builds aijpredict (and PETSc first, from the cache or from source).
# Usage: scripts/build.sh [--help]   (build directory: $AIJP_BUILD_DIR, default ./build)
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  echo "Usage: $0"
  echo "Builds PETSc if its cached build is missing (scripts/setup_petsc.sh), then configures and builds"
  echo "aijpredict with CMake into \$AIJP_BUILD_DIR (default $AIJP_ROOT/build)."
  exit 0
fi
PETSC_DIR="$("$AIJP_ROOT/scripts/setup_petsc.sh" | tail -n 1)"
export PETSC_DIR
if [ ! -f "$AIJP_BUILD/CMakeCache.txt" ] || ! grep -q "PETSC_DIR:.*=$PETSC_DIR\$" "$AIJP_BUILD/CMakeCache.txt"; then
  cmake -S "$AIJP_ROOT" -B "$AIJP_BUILD" -DCMAKE_BUILD_TYPE=Release -DPETSC_DIR="$PETSC_DIR" \
        -DAIJP_MATRIX_DIR="$AIJP_SHARED/matrices"
fi
cmake --build "$AIJP_BUILD" -j "$(nproc)"
