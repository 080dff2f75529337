#!/usr/bin/env bash
# PETSc test-harness style: runs a plain PETSc program on N processes with -mat_type aij and with the plugin
# loaded at run time (-dll_append LIB -mat_type aijpredict), and diffs BOTH outputs against ONE expected output.
# The program prints a "type: ..." line, filtered out of the diff (like ex236's "filter: grep -v type"); in the
# aijpredict run it must name an aijpredict type. Without a GPU the aijpredict run adds -mat_aijpredict_host_copy:
# products then use a host copy refreshed exactly when the device copy would be, so a stale copy shows here too.
# Usage: compare_output.sh N EXPECTED PROGRAM LIBAIJPREDICT [program options]
set -euo pipefail
n="$1"; expected="$2"; prog="$3"; lib="$4"; shift 4
mpiexec="${MPIEXEC:-$(command -v mpiexec || command -v mpiexec.hydra || true)}"
[ -n "$mpiexec" ] || { echo "FAIL: no mpiexec"; exit 1; }
extra=()
nvidia-smi -L >/dev/null 2>&1 || extra=(-mat_aijpredict_host_copy)
rc=0
for t in aij aijpredict; do
  if [ "$t" = aij ]; then args=(-mat_type aij); else args=(-dll_append "$lib" -mat_type aijpredict "${extra[@]}"); fi
  echo "== $n processes: ${args[*]} $*"
  out=$("$mpiexec" -n "$n" "$prog" "${args[@]}" "$@" 2>&1) || { echo "$out"; echo "FAIL: ${args[*]} exited with an error"; rc=1; continue; }
  echo "$out" | grep '^type:' || true
  if [ "$t" = aijpredict ] && ! grep -q '^type: .*aijpredict' <<<"$out"; then echo "FAIL: the matrix is not aijpredict (plugin not loaded?)"; rc=1; fi
  if diff -u "$expected" <(grep -v '^type:' <<<"$out"); then echo "same as $(basename "$expected")"; else echo "FAIL: -mat_type $t differs from $expected"; rc=1; fi
done
[ "$rc" = 0 ] && echo "PASS: -mat_type aij and -mat_type aijpredict both match $(basename "$expected") on $n processes"
exit $rc
