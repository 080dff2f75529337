#!/usr/bin/env bash
# The checks a change needs on the GPU machine before it is called done, in one or two calls (run through
# scripts/device_run.sh --no-tests, from the checkout's root), most important first so that a call cut short by
# its limit keeps what ran: every GPU and PETSc test; issue 4's gated warm-up and held-out table
# (bench/device_suite.sh --gated-only); issue 6's one-CPU short solves with the shipped default, the partition set
# (session 16's nine matrices, from an empty cache) and online refinement from a mis-calibrated cache and another GPU's. Each part
# has a time limit and writes OUTDIR/<part>.txt with its exit status and seconds at the end; OUTDIR/summary.txt
# collects the lines to read first. About 500 s on an H100 with a fast host; the tests alone took over 280 s (68 of
# 110) where the host was slow (session 45), so calls of at most 600 s run `--skip table,short,partition,online` (the tests) and
# `--skip tests` apart. The device tool returns at most 8 files: --tar packs OUTDIR into OUTDIR.tar (sample files
# xz-compressed) beside a copy of its summary, OUTDIR.summary.txt, and removes the folder.
# Usage: bash bench/device_validate.sh OUTDIR [--skip PARTS] [--tar]   (PARTS: comma-separated of tests,table,short,partition,online)
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ] || [ $# -lt 1 ]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
out="$1"; shift
skip=","; tar=0
while [ $# -gt 0 ]; do
  case "$1" in
    --skip) skip=",$2,"; shift ;;
    --tar) tar=1 ;;
    *) echo "device_validate.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
here="$(cd "$(dirname "$0")/.." && pwd)"; cd "$here"
[ -f .device/paths.env ] || { echo "device_validate.sh: .device/ missing: run scripts/pack_device.sh and carry .device" >&2; exit 1; }
source .device/paths.env
[ -n "${AIJP_MATRIX_DIR:-}" ] || { echo "device_validate.sh: run it through scripts/device_run.sh --no-tests -- (it sets AIJP_MATRIX_DIR and the library path)" >&2; exit 1; }
B="$AIJP_HOST_BUILD_DIR/bench"
mkdir -p "$out"
{ date -u +%FT%TZ; cat .device/commit 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$out/stamp.txt"
# part NAME LIMIT_S COMMAND...: runs COMMAND under the limit unless skipped, appending "NAME rc=R S s" to its file.
part() {
  local name="$1" limit="$2"; shift 2
  case "$skip" in *",$name,"*) return 0 ;; esac
  local t0; t0=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$out/$name.txt" >> "$out/summary.txt"
}
part tests 450 ctest --test-dir "$AIJP_HOST_BUILD_DIR" -L 'gpu|petsc' --output-on-failure
part table 200 bash bench/device_suite.sh "$out/suite" --skip-bench --skip-online --skip-e2e --gated-only
part short 90 bash bench/short_solves.sh "$out/short_solves_table.txt" --rounds 21 \
  --matrices mbeacxc,email-Eu-core,zenios,Pd,bcspwr10,lap7,airfoil1,fe_4elt2,ego-Facebook --config "d1:15:"
partition_set=(gen:stack:lap27:100x100x100+powerlaw:rows=100000,deg=16,exp=2.1 gen:stack:lap7:128x128x128+circuit:rows=100000,dense=16,len=100000
               gen:stack:circuit:rows=100000,dense=32,len=50000+lap27:64x64x64 gen:stack:lap27:64x64x64+powerlaw:rows=30000,deg=16,exp=2.1
               gen:stack:lap7:128x128x128+powerlaw:rows=2097152,deg=16,exp=2.1 gen:stack:constant:rows=4096,len=2000,cols=1000000+lap7:128x128x128
               gen:circuit:rows=2000000,dense=20,len=200000 gen:circuit:rows=4000000,dense=64,len=400000 gen:lap7:128x128x128)
part partition 80 env AIJPREDICT_CACHE_DIR="$out/empty_cache" "$B/aijp_bench" --online 64 --json "$out/partition.json" "${partition_set[@]}"
# device_suite.sh's online part: the mis-calibrated cache, then another GPU's (cache/defaults/h200.json).
part online 120 bash bench/device_suite.sh "$out/online" --skip-bench --skip-warmup --skip-accuracy --skip-e2e
rm -rf "$out/empty_cache" "$out"/suite/*.png
{
  grep -h -E "tests passed|\*\*\*Failed" "$out/tests.txt" 2>/dev/null
  sed -n '/^model /,/^$/p' "$out/suite/accuracy_gated.txt" 2>/dev/null | grep -E "^model|^placeholder"
  # The gap between back-to-back kernels: the warm-up's (cache) and the one measured before the held-out matrices;
  # then the same pair refitted offline with the held-out predictions not moved (as the table) and moved by the gaps.
  grep -h -E "^# launch gap" "$out/suite/accuracy_gated.txt" 2>/dev/null
  gcache=$(ls "$out"/suite/cache_gated/*.json 2>/dev/null | head -1)
  gtrain=$(ls "$out"/suite/cache_gated/*.gated.samples.jsonl 2>/dev/null | head -1)
  if [ -n "$gcache" ] && [ -n "$gtrain" ] && [ -f "$out/suite/accuracy_gated_samples.jsonl" ]; then
    for shift_opt in "" "--sample-gaps"; do
      what="not moved"; [ -n "$shift_opt" ] && what="moved by the gaps ($shift_opt)"
      # shellcheck disable=SC2086
      "$B/aijp_refit" --cache "$gcache" --train "$gtrain" --test "$out/suite/accuracy_gated_samples.jsonl" --models guo_wang $shift_opt 2>&1 |
        awk -f "$here/bench/refit_meet.awk" -v report=of | sed "s/^/refit of the gated pair, held-out predictions $what: /"
    done
  fi
  # Per short-solve matrix: aijpredict's first and later solve against aijcusparse's (paired medians) and its worst later solve.
  awk '/^=== /{m=$2} $1=="aijpredict" && NF==8 {printf "short solves %-22s first paired x %s, later %s", m, $5, $6}
       $1=="aijpredict" && $2=="worst" {print ", worst later " $7}' \
    "$out/short_solves_table.txt" 2>/dev/null
  grep -h -A6 "^# summary" "$out/partition.txt" 2>/dev/null
  grep -h -E "^# (final format|mean prediction error)" "$out/online/online.txt" "$out/online/online_foreign.txt" 2>/dev/null
} >> "$out/summary.txt"
cat "$out/summary.txt"
if [ $tar = 1 ]; then
  find "$out" -name '*.jsonl' -exec xz -T0 -f {} \;
  cp "$out/summary.txt" "$out.summary.txt"
  tar cf "$out.tar" -C "$(dirname "$out")" "$(basename "$out")" && rm -rf "$out"
fi
