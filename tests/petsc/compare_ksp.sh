#!/usr/bin/env bash
# Solves the same system with every KSP x PC pair below, once with -mat_type aij and once with -mat_type
# aijpredict, on N processes, and compares the iteration counts and final residual norms (printed as a table for
# each type; they must be identical without a GPU, where both run SeqAIJ arithmetic; with a GPU the iteration
# counts must be equal and the residual norms agree to 1e-3 relative). Usage: compare_ksp.sh N PROGRAM [options]
# AIJP_KSPS overrides the list of Krylov methods (default "cg gmres bcgs").
set -euo pipefail
n="$1"; prog="$2"; shift 2
mpiexec="${MPIEXEC:-$(command -v mpiexec || command -v mpiexec.hydra || true)}"
[ -n "$mpiexec" ] || { echo "FAIL: no mpiexec"; exit 1; }
# Without a GPU the aijpredict runs multiply with the host copy that stands in for the device copy.
extra=()
nvidia-smi -L >/dev/null 2>&1 || extra=(-mat_aijpredict_host_copy)
pcs=("none" "jacobi" "bjacobi" "sor" "asm -sub_pc_type ilu" "bjacobi -sub_pc_type icc" "gamg")
[ "$n" = 1 ] && pcs+=("ilu" "icc")
table() {  # table TYPE [options]: one line per KSP x PC: its and residual norm
  local t="$1"; shift
  for ksp in ${AIJP_KSPS:-cg gmres bcgs}; do
    for pc in "${pcs[@]}"; do
      # shellcheck disable=SC2086
      out=$("$mpiexec" -n "$n" "$prog" -mat_type "$t" -ksp_type "$ksp" -pc_type $pc -check_tol -1 "$@" 2>&1) || { echo "$ksp / $pc: ERROR"; echo "$out" >&2; continue; }
      grep -q "Matrix type .*$t" <<<"$out" || echo "$ksp / $pc: WRONG TYPE: $(grep 'Matrix type' <<<"$out")"
      echo "$ksp / $pc: $(grep -Eo 'KSP iterations [0-9]+, residual norm [^,]+' <<<"$out")"
    done
  done
}
shift_args=("$@")
ta=$(table aij "${shift_args[@]}")
tp=$(table aijpredict "${extra[@]}" "${shift_args[@]}")
echo "== $n processes, -mat_type aij"; echo "$ta"
echo "== $n processes, -mat_type aijpredict"; echo "$tp"
if grep -q "ERROR\|WRONG TYPE" <<<"$ta$tp"; then echo "FAIL: a run failed or used the wrong type"; exit 1; fi
if [ "$ta" = "$tp" ]; then echo "PASS: identical iteration counts and residual norms on $n processes"; exit 0; fi
# With a GPU the products round differently: equal iteration counts, residual norms within 1e-3.
paste -d'|' <(echo "$ta") <(echo "$tp") | awk -F'|' '
  { split($1, a, /[ ,]+/); split($2, b, /[ ,]+/); ia = ra = ib = rb = "";
    for (i in a) { if (a[i] == "iterations") ia = a[i+1]; if (a[i] == "norm") ra = a[i+1] }
    for (i in b) { if (b[i] == "iterations") ib = b[i+1]; if (b[i] == "norm") rb = b[i+1] }
    d = ra - rb; if (d < 0) d = -d; m = (ra > rb ? ra : rb);
    if (ia != ib || d > 1e-3 * m + 1e-300) { print "FAIL: " $1 "  vs  " $2; bad = 1 } }
  END { exit bad }' || exit 1
echo "PASS: equal iteration counts, residual norms within 1e-3 on $n processes"
