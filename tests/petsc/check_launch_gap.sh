#!/usr/bin/env bash
# -mat_aijpredict_launch_gap: the per-process context times the gap between back-to-back kernels when it is made.
# With a cache that records no warm-up gap (a fresh directory: calibrated now) the predictions are not moved; once the
# cache file records one (written here into the file the first run saved), they move by the difference, which the
# -info line reports; the solve's iterations are those of -mat_type aij either way. Needs a GPU (exit 77, skipped,
# without one: then no context is made). Usage: check_launch_gap.sh PROGRAM LIBAIJPREDICT [program options]
set -euo pipefail
prog="$1"; lib="$2"; shift 2
dir=$(mktemp -d "${TMPDIR:-/tmp}/aijp-gap-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "$out"; echo "FAIL: $*"; exit 1; }
iterations() { grep -oE "(Number of iterations|iterations) *=? *[0-9]+" <<<"$1" | grep -oE "[0-9]+$" | tail -1; }

out=$("$prog" "$@" -ksp_converged_reason 2>&1) || fail "the -mat_type aij run failed"
ref=$(iterations "$out")
run() { "$prog" -dll_append "$lib" -mat_type aijpredict -mat_aijpredict_cache_dir "$dir" -mat_aijpredict_launch_gap -info "$@" -ksp_converged_reason 2>&1; }
out=$(run "$@") || fail "the first aijpredict run failed"
if ! grep -q "aijpredict: per-process context" <<<"$out"; then
  echo "SKIP: no aijpredict context was made (no usable GPU)"; exit 77
fi
grep -q "launch_gap: the cache records no warm-up gap" <<<"$out" || fail "no 'records no warm-up gap' line with a fresh cache"
[ "$(iterations "$out")" = "$ref" ] || fail "iterations $(iterations "$out") with aijpredict, $ref with aij"
file=$(ls "$dir"/*.json | head -1)
[ -f "$file" ] || fail "the first run saved no cache file in $dir"
python3 - "$file" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
e["device_metrics"]["launch_gap_us"] = 50.0  # a warm-up whose kernels ran far apart: every prediction moves down
e["device_metrics"]["launch_gap_gated"] = 0.0
json.dump(e, open(sys.argv[1], "w"))
PY
out=$(run "$@") || fail "the second aijpredict run failed"
grep -qE "gap between back-to-back kernels [0-9.]+ us, the warm-up's 50.000 us: predictions moved by -[0-9.]+ us per kernel" <<<"$out" ||
  fail "no 'predictions moved' line with the warm-up's gap in the cache"
[ "$(iterations "$out")" = "$ref" ] || fail "iterations $(iterations "$out") with aijpredict and a moved model, $ref with aij"
echo "PASS: -mat_aijpredict_launch_gap moves the predictions only where the cache records the warm-up's gap; iterations unchanged"
