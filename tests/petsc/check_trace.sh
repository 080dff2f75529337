#!/usr/bin/env bash
# -mat_aijpredict_trace_buffer on the unmodified ex2 tutorial: with the products on the GPU, the products the
# trace keeps (-mat_aijpredict_trace_ms 0: every one) are printed at MatDestroy, one line each, without -info,
# and each line's total is the sum of its parts; on the CPU path nothing is traced (exit 77: skipped, the same
# test runs on the GPU machine). Usage: check_trace.sh PROGRAM LIBAIJPREDICT [program options]
set -euo pipefail
prog="$1"; lib="$2"; shift 2
out=$("$prog" -dll_append "$lib" -mat_type aijpredict -mat_view ::ascii_info -mat_aijpredict_trace_buffer \
      -mat_aijpredict_trace_ms 0 -mat_aijpredict_defer_mults 0 "$@" 2>&1) || { echo "$out"; echo "FAIL: the run failed"; exit 1; }
echo "$out"
if ! grep -Eq "aijpredict: (SpMV format|GPU copy)" <<<"$out"; then
  grep -q "aijpredict trace:" <<<"$out" && { echo "FAIL: trace lines without products on the GPU"; exit 1; }
  echo "SKIP: the products did not run on a GPU"; exit 77
fi
its=$(sed -n 's/.*Norm of error .* iterations \([0-9]*\).*/\1/p' <<<"$out" | head -1)
header=$(grep -c "^aijpredict trace: [0-9]* products over 0.000 ms" <<<"$out" || true)
[ "$header" = 1 ] || { echo "FAIL: expected one trace header, found $header"; exit 1; }
lines=$(grep -E "^aijpredict trace: [0-9]+ -?[0-9]+ " <<<"$out" || true)
n=$(grep -c . <<<"$lines" || true)
[ -n "$its" ] && [ "$n" -ge "$its" ] || { echo "FAIL: $n traced products for $its iterations"; exit 1; }
awk '{ if ($3 < 1 || $6 < 0 || $7 < 0 || $8 < 0 || ($6 + $7 + $8 - $9) > 0.15 || ($6 + $7 + $8 - $9) < -0.15) { print "FAIL: bad trace line: " $0; bad = 1 } }
     END { exit bad }' <<<"$lines"
[ "$(awk 'NR == 1 {print $3}' <<<"$lines")" = 1 ] || { echo "FAIL: the first traced product is not product 1"; exit 1; }
echo "PASS: $n products traced without -info, printed at MatDestroy"
