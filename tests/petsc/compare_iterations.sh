#!/usr/bin/env bash
# Runs an UNMODIFIED PETSc program twice, once with the plugin loaded at run time
# (-dll_append libaijpredict.so -mat_type aijpredict) and once with a reference matrix type, and checks that
# the KSP iteration counts (and so the convergence history) are the same. The reference type is
# aijcusparse when a GPU is present, aij otherwise. Prints both outputs.
# Usage: compare_iterations.sh PROGRAM LIBAIJPREDICT [program options]
set -euo pipefail
prog="$1"; lib="$2"; shift 2
ref=aij; vec=standard
if nvidia-smi -L >/dev/null 2>&1; then ref=aijcusparse; vec=cuda; fi
common=(-ksp_converged_reason -ksp_monitor -vec_type "$vec" "$@")
out_p=$("$prog" -dll_append "$lib" -mat_type aijpredict -mat_aijpredict_view "${common[@]}" 2>&1) || { echo "$out_p"; exit 1; }
out_r=$("$prog" -mat_type "$ref" "${common[@]}" 2>&1) || { echo "$out_r"; exit 1; }
echo "== -mat_type aijpredict (-dll_append $lib)"; echo "$out_p"
echo "== -mat_type $ref"; echo "$out_r"
its() { grep -Eo 'iterations [0-9]+' <<<"$1" | tail -1 | grep -Eo '[0-9]+'; }
ip=$(its "$out_p"); ir=$(its "$out_r")
[ -n "$ip" ] && [ -n "$ir" ] || { echo "FAIL: no iteration count found"; exit 1; }
grep -q "aijpredict:" <<<"$out_p" || { echo "FAIL: the aijpredict report is missing (plugin not loaded?)"; exit 1; }
if [ "$ip" != "$ir" ]; then echo "FAIL: $ip iterations with aijpredict, $ir with $ref"; exit 1; fi
echo "PASS: $ip iterations with aijpredict and with $ref"
