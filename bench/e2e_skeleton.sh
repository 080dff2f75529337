#!/usr/bin/env bash
# End-to-end checks of the walking skeleton on the GPU machine (run through scripts/device_run.sh):
# PETSc's unmodified KSP ex2 with -dll_append libaijpredict.so -mat_type aijpredict against aijcusparse
# (same iteration count), and the aijp_ksp_solve example with -log_view. Output goes to $1 (a folder).
# Usage: bash bench/e2e_skeleton.sh OUTDIR
set -uo pipefail
usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then usage; exit 0; fi
[ $# -eq 1 ] || { usage >&2; exit 1; }
out="$1"; mkdir -p "$out"
source "$(dirname "$0")/../.device/paths.env"
B="$AIJP_HOST_BUILD_DIR"; lib="$B/petsc_plugin/libaijpredict.so"
rc=0
{
  echo "# date: $(date -u +%Y-%m-%dT%H:%MZ); device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  for args in "-m 1000 -n 1000 -ksp_type cg -pc_type jacobi" "-m 300 -n 300 -ksp_type gmres -pc_type bjacobi" "-m 500 -n 400 -ksp_type bcgs -pc_type none -ksp_max_it 2000"; do
    for type in aijpredict aijcusparse; do
      extra=(); [ "$type" = aijpredict ] && extra=(-dll_append "$lib" -mat_aijpredict_view)
      echo "## command: petsc ex2 $args -vec_type cuda -mat_type $type ${extra[*]} -ksp_converged_reason -log_view"
      "$B/examples/petsc/petsc_ksp_ex2" $args -vec_type cuda -mat_type $type "${extra[@]}" -ksp_converged_reason -log_view \
        2>&1 | grep -E "aijpredict|statistics|strips|model:|format|feasible|^  [a-z_0-9]+ +(yes|no)|choice|upload|converged|Norm of error|^KSPSolve|^MatMult |AIJPred|^VecTDot|^VecAXPY" || rc=1
    done
  done
  for type in aijpredict aijcusparse; do
    echo "## command: aijp_ksp_solve -n 128 -mat_type $type -ksp_type cg -pc_type jacobi -log_view"
    "$B/examples/petsc/aijp_ksp_solve" -n 128 -mat_type $type -mat_aijpredict_view -ksp_type cg -pc_type jacobi -log_view 2>&1 |
      grep -E "^Matrix|aijpredict|choice|upload|KSP iterations|^KSPSolve|^MatMult |AIJPred" || rc=1
  done
  for type in aijpredict aijcusparse; do
    echo "## command: aijp_ksp_solve -n 128 -mat_type $type -ksp_type cg -pc_type jacobi -ksp_max_it 8 -check_tol -1 -log_view (short solve: <= 10 products)"
    "$B/examples/petsc/aijp_ksp_solve" -n 128 -mat_type $type -mat_aijpredict_view -ksp_type cg -pc_type jacobi -ksp_max_it 8 -check_tol -1 -log_view 2>&1 |
      grep -E "^Matrix|aijpredict|choice|KSP iterations|^KSPSolve|^MatMult |AIJPred" || rc=1
  done
} 2>&1 | tee "$out/e2e_skeleton.txt"
exit $rc
