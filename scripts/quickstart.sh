#!/usr/bin/env bash
# Sets up everything on a fresh machine and runs the main job: a KSP solve of a generated 3D Laplacian
# with -mat_type aijpredict, printing the decision report (on a machine without a GPU it says so and runs
# the CPU fallback). Extra arguments go to the solver (e.g. -n 64, -f matrix.mtx.gz, -ksp_type gmres).
# Usage: scripts/quickstart.sh [--help] [solver options]
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
"$AIJP_ROOT/scripts/install_deps.sh"
"$AIJP_ROOT/scripts/build.sh"
exec "$AIJP_BUILD/examples/petsc/aijp_ksp_solve" -mat_type aijpredict -mat_aijpredict_view -ksp_type cg -pc_type jacobi -use_gpu_aware_mpi 0 "$@"
