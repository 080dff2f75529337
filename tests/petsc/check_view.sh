#!/usr/bin/env bash
# -mat_view ::ascii_info on an unmodified PETSc program with the plugin loaded: the viewer output names the
# aijpredict type and says where the products run (one line on one process; a line per process, with both
# blocks, on more). Usage: check_view.sh N PROGRAM LIBAIJPREDICT [program options]
set -euo pipefail
n="$1"; prog="$2"; lib="$3"; shift 3
mpiexec="${MPIEXEC:-$(command -v mpiexec || command -v mpiexec.hydra || true)}"
[ -n "$mpiexec" ] || { echo "FAIL: no mpiexec"; exit 1; }
out=$("$mpiexec" -n "$n" "$prog" -dll_append "$lib" -mat_type aijpredict -mat_view ::ascii_info "$@" 2>&1) || { echo "$out"; echo "FAIL: the run failed"; exit 1; }
echo "$out"
if [ "$n" = 1 ]; then
  grep -q "type: seqaijpredict" <<<"$out" || { echo "FAIL: no 'type: seqaijpredict'"; exit 1; }
  grep -Eq "aijpredict: (SpMV format|GPU copy|products )" <<<"$out" || { echo "FAIL: no 'aijpredict:' line"; exit 1; }
else
  grep -q "type: mpiaijpredict" <<<"$out" || { echo "FAIL: no 'type: mpiaijpredict'"; exit 1; }
  for ((r = 0; r < n; r++)); do
    grep -q "\[$r\] aijpredict: diagonal block: .*; off-diagonal block: " <<<"$out" || { echo "FAIL: no block line for process $r"; exit 1; }
  done
fi
echo "PASS: -mat_view ::ascii_info says where the products run on $n processes"
