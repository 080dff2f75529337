#!/usr/bin/env bash
# Runs an UNMODIFIED PETSc tutorial on N processes twice: with the plugin loaded at run time
# (-dll_append LIB TYPEOPT aijpredict) and with TYPEOPT aij, where TYPEOPT is the option the tutorial takes its
# matrix type from (-mat_type for MatSetFromOptions, -dm_mat_type for DMDA-based ones). Checks that the
# aijpredict run used the plugin (-mat_aijpredict_view prints "aijpredict:" lines) and that both runs report the
# same sequence of converged reasons and iteration counts (pass -ksp_converged_reason, -snes_converged_reason).
# Usage: compare_tutorial.sh N PROGRAM LIBAIJPREDICT TYPEOPT [tutorial options]
set -euo pipefail
n="$1"; prog="$2"; lib="$3"; typeopt="$4"; shift 4
mpiexec="${MPIEXEC:-$(command -v mpiexec || command -v mpiexec.hydra || true)}"
[ -n "$mpiexec" ] || { echo "FAIL: no mpiexec"; exit 1; }
vec=()
if nvidia-smi -L >/dev/null 2>&1; then
  # Vectors on the GPU as well, as an aijcusparse user would run it (DMDA vectors come from -dm_vec_type).
  [ "$typeopt" = -dm_mat_type ] && vec=(-dm_vec_type cuda) || vec=(-vec_type cuda)
fi
common=("${vec[@]}" "$@")
out_p=$("$mpiexec" -n "$n" "$prog" -dll_append "$lib" "$typeopt" aijpredict -mat_aijpredict_view "${common[@]}" 2>&1) || { echo "$out_p"; echo "FAIL: the aijpredict run failed"; exit 1; }
out_r=$("$mpiexec" -n "$n" "$prog" "$typeopt" aij "${common[@]}" 2>&1) || { echo "$out_r"; echo "FAIL: the aij run failed"; exit 1; }
echo "== $n processes, $typeopt aijpredict (-dll_append $lib)"; echo "$out_p"
echo "== $n processes, $typeopt aij"; echo "$out_r"
conv() { grep -Eo '(Linear|Nonlinear) solve (converged|did not converge).*iterations [0-9]+' <<<"$1" || true; }
cp=$(conv "$out_p"); cr=$(conv "$out_r")
[ -n "$cr" ] || { echo "FAIL: no converged reason found"; exit 1; }
grep -q "aijpredict:" <<<"$out_p" || { echo "FAIL: no aijpredict report (plugin not loaded, or $typeopt not used by this program?)"; exit 1; }
if [ "$cp" != "$cr" ]; then
  echo "FAIL: the solves differ:"; diff <(echo "$cr") <(echo "$cp") || true; exit 1
fi
echo "PASS: $(wc -l <<<"$cr") solves, same converged reasons and iteration counts with aijpredict and aij"
