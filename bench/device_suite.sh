#!/usr/bin/env bash
# The GPU-machine measurement suite (run through scripts/device_run.sh): format benchmark on the shared real
# matrices and the large generated set, cache warm-up (quick and full, timed), model accuracy report with
# its plot (back to back, and gated: device time, from a gated warm-up in OUTDIR/cache_gated), online refinement from a mis-calibrated cache, and the end-to-end PETSc checks. Every output
# file starts with the date, device and command.
# Usage: bash bench/device_suite.sh OUTDIR [--skip-bench] [--skip-warmup] [--skip-accuracy] [--skip-online] [--skip-e2e]
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
  echo "Runs on the GPU machine from the checkout's root (it reads .device/paths.env, written by scripts/pack_device.sh)."
  echo "Without --skip-warmup, AIJPREDICT_CACHE_DIR is OUTDIR/cache from the warm-up on; otherwise the caller's."
  exit 0
fi
out="${1:?usage: device_suite.sh OUTDIR [--skip-...]}"; shift; mkdir -p "$out"
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/.device/paths.env"
B="$AIJP_HOST_BUILD_DIR/bench"; M="$AIJP_HOST_MATRIX_DIR"
args=" $* "
dev="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
stamp() { echo "# date: $(date -u +%Y-%m-%dT%H:%MZ); device: $dev; commit: $(cat "$here/.device/commit" 2>/dev/null)"; echo "# command: $*"; }
real=(); while IFS=$'\t' read -r name rows cols nnz sym field rest; do
  [ "$name" = name ] && continue; [ "$field" = complex ] && continue; real+=("$M/$name.mtx.gz"); done < "$M/MANIFEST.tsv"
large=(gen:lap7:200x200x200 gen:lap27:130x130x130 gen:fem3:90x90x90 gen:banded:rows=8000000,bw=3
       gen:normal:rows=2000000,mean=24,sigma=6 gen:uniform:rows=2000000,mean=24,width=12
       gen:powerlaw:rows=2000000,deg=12,exp=2.1 gen:circuit:rows=2000000,dense=20,len=200000)
timed() { local t0; t0=$(date +%s%N); "$@"; local r=$?; echo "wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"; return $r; }
rc=0
if [[ "$args" != *" --skip-bench "* ]]; then
  cmd=("$B/aijp_bench" --online 64 --json "$out/bench_formats.json" "${real[@]}" "${large[@]}")
  { stamp "aijp_bench --online 64 --json bench_formats.json <all real shared matrices> ${large[*]}"; "${cmd[@]}"; } > "$out/bench_formats.txt" 2> "$out/bench_formats.err" || rc=1
fi
if [[ "$args" != *" --skip-warmup "* ]]; then
  export AIJPREDICT_CACHE_DIR="$out/cache"
  { stamp "aijp_warmup --quick --restart"; timed "$B/aijp_warmup" --quick --restart; } > "$out/warmup_quick.txt" 2>&1 || rc=1
  { stamp "aijp_warmup --full --restart"; timed "$B/aijp_warmup" --full --restart; } > "$out/warmup_full.txt" 2>&1 || rc=1
  # The gated warm-up (device time) in a cache directory of its own: the runtime's cache stays back to back.
  { stamp "aijp_warmup --full --restart --gated --cache-dir cache_gated";
    timed "$B/aijp_warmup" --full --restart --gated --cache-dir "$out/cache_gated"; } > "$out/warmup_gated.txt" 2>&1 || rc=1
fi
if [[ "$args" != *" --skip-accuracy "* ]]; then
  export AIJPREDICT_CACHE_DIR="$out/cache"
  { stamp "aijp_accuracy --min-nnz 10000 --csv accuracy.csv --json accuracy.json --samples accuracy_samples.jsonl <real shared matrices> ${large[*]}";
    "$B/aijp_accuracy" --min-nnz 10000 --csv "$out/accuracy.csv" --json "$out/accuracy.json" --samples "$out/accuracy_samples.jsonl" "${real[@]}" "${large[@]}"; } > "$out/accuracy.txt" 2> "$out/accuracy.err" || rc=1
  python3 "$here/bench/plot_accuracy.py" "$out/accuracy.csv" "$out/accuracy.png" --title "aijpredict model accuracy, $dev, $(date -u +%F)" || rc=1
  if [ -d "$out/cache_gated" ]; then
    { stamp "aijp_accuracy --gated --cache-dir cache_gated --min-nnz 10000 --csv accuracy_gated.csv --json accuracy_gated.json --samples accuracy_gated_samples.jsonl <same matrices>";
      "$B/aijp_accuracy" --gated --cache-dir "$out/cache_gated" --min-nnz 10000 --csv "$out/accuracy_gated.csv" --json "$out/accuracy_gated.json" \
        --samples "$out/accuracy_gated_samples.jsonl" "${real[@]}" "${large[@]}"; } > "$out/accuracy_gated.txt" 2> "$out/accuracy_gated.err" || rc=1
    python3 "$here/bench/plot_accuracy.py" "$out/accuracy_gated.csv" "$out/accuracy_gated.png" \
      --title "aijpredict model accuracy (device time, gated), $dev, $(date -u +%F)" || rc=1
  fi
fi
if [[ "$args" != *" --skip-online "* ]]; then
  # Online refinement from a mis-calibrated temporary cache (its own cache directory, never $out/cache).
  online=(); for f in "${real[@]}"; do n=$(awk -F'\t' -v k="$(basename "$f" .mtx.gz)" '$1 == k {print $4}' "$M/MANIFEST.tsv");
    [ "${n:-0}" -ge 10000 ] && online+=("$f"); done
  online+=(gen:lap7:200x200x200 gen:normal:rows=2000000,mean=24,sigma=6 gen:powerlaw:rows=2000000,deg=12,exp=2.1)
  { stamp "aijp_online --json online.json <real shared matrices >= 10000 nnz> ${online[*]: -3}"; "$B/aijp_online" --json "$out/online.json" "${online[@]}"; } > "$out/online.txt" 2> "$out/online.err" || rc=1
  { stamp "aijp_online --foreign cache/defaults/h200.json --json online_foreign.json <same>";
    "$B/aijp_online" --foreign "$here/cache/defaults/h200.json" --json "$out/online_foreign.json" "${online[@]}"; } > "$out/online_foreign.txt" 2> "$out/online_foreign.err" || rc=1
fi
if [[ "$args" != *" --skip-e2e "* ]]; then
  bash "$here/bench/e2e_skeleton.sh" "$out" > /dev/null 2>&1 || rc=1
fi
exit $rc
