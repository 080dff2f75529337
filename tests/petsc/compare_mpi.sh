#!/usr/bin/env bash
# Solves with N MPI processes twice, -mat_type aijpredict and a reference type (aijcusparse with a GPU, aij
# without), and checks that the aijpredict run really used the aijpredict types and needed the same number
# of KSP iterations. Usage: compare_mpi.sh N PROGRAM [program options]
set -euo pipefail
n="$1"; prog="$2"; shift 2
mpiexec="${MPIEXEC:-$(command -v mpiexec || command -v mpiexec.hydra || true)}"
[ -n "$mpiexec" ] || { echo "FAIL: no mpiexec"; exit 1; }
ref=aij
if nvidia-smi -L >/dev/null 2>&1; then ref=aijcusparse; fi
out_p=$("$mpiexec" -n "$n" "$prog" -mat_type aijpredict "$@" 2>&1) || { echo "$out_p"; exit 1; }
out_r=$("$mpiexec" -n "$n" "$prog" -mat_type "$ref" "$@" 2>&1) || { echo "$out_r"; exit 1; }
echo "== $n processes, -mat_type aijpredict"; echo "$out_p"
echo "== $n processes, -mat_type $ref"; echo "$out_r"
want=$([ "$n" = 1 ] && echo seqaijpredict || echo mpiaijpredict)
grep -q "Matrix type $want" <<<"$out_p" || { echo "FAIL: the matrix is not $want"; exit 1; }
its() { grep -Eo 'KSP iterations [0-9]+' <<<"$1" | grep -Eo '[0-9]+$'; }
ip=$(its "$out_p"); ir=$(its "$out_r")
[ -n "$ip" ] && [ "$ip" = "$ir" ] || { echo "FAIL: $ip iterations with aijpredict, $ir with $ref"; exit 1; }
echo "PASS: $ip iterations with aijpredict and with $ref on $n processes"
