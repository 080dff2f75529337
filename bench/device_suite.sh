#!/usr/bin/env bash
# The GPU-machine measurement suite (run through scripts/device_run.sh): format benchmark on the shared real
# matrices and the large generated set, cache warm-up (quick and full, timed), model accuracy report with
# its plot (back to back, and gated: device time, from a gated warm-up in OUTDIR/cache_gated), online refinement from a mis-calibrated cache, and the end-to-end PETSc checks. Every output
# file starts with the date, device and command.
# Usage: bash bench/device_suite.sh OUTDIR [--skip-bench] [--skip-warmup] [--skip-accuracy] [--skip-online] [--skip-e2e]
#          [--gated-only] [--base BINDIR] [--short MATRICES] [--e2e-solves] [--tar]
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  cat <<'HELP'
  --skip-X        leave out that part (bench: aijp_bench; warmup: the quick, full and gated warm-ups; accuracy: both
                  accuracy reports; online: aijp_online; e2e: bench/e2e_skeleton.sh)
  --gated-only    no back-to-back accuracy report (the warm-ups still run and are timed): issue 4's table is the gated one
  --base BINDIR   first the gated warm-up and accuracy report with BINDIR's aijp_warmup and aijp_accuracy (another
                  build, e.g. of the commit before a kernel change), into OUTDIR/base_*: an A/B in the same lease
  --short LIST    also issue 6's short solves (bench/short_solves.sh, 41 rounds, one CPU, aijcusparse beside itself as
                  the floor) on the comma-separated matrices of LIST, into OUTDIR/short_solves.txt
  --e2e-solves    also bench/e2e_petsc.py --only mm_,short_lap7 --types aijcusparse,aijpredict --control --repeat 5
  --tar           end by bundling OUTDIR into OUTDIR.tar (its sample files compressed) and removing OUTDIR: one file to
                  copy back from a remote GPU machine instead of dozens
HELP
  echo "Runs on the GPU machine from the checkout's root (it reads .device/paths.env, written by scripts/pack_device.sh)."
  echo "Without --skip-warmup, AIJPREDICT_CACHE_DIR is OUTDIR/cache from the warm-up on; otherwise the caller's."
  echo "Example (one device call of ~3 min, issue 4's gated table and the warm-up timings):"
  echo "  bash scripts/device_run.sh --no-tests -- bash bench/device_suite.sh \$OUT/suite --skip-bench --skip-online --skip-e2e --gated-only --tar"
  exit 0
fi
out="${1:?usage: device_suite.sh OUTDIR [options] (--help)}"; shift
skip=" "; gated_only=0; base=""; short=""; e2e_solves=0; bundle=0
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-bench|--skip-warmup|--skip-accuracy|--skip-online|--skip-e2e) skip+="${1#--skip-} " ;;
    --gated-only) gated_only=1 ;;
    --base) base="${2:?--base needs a folder}"; shift ;;
    --short) short="${2:?--short needs a comma-separated matrix list}"; shift ;;
    --e2e-solves) e2e_solves=1 ;;
    --tar) bundle=1 ;;
    *) echo "device_suite.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$base" ]; then
  for t in aijp_warmup aijp_accuracy; do
    [ -x "$base/$t" ] || { echo "device_suite.sh: --base $base has no executable $t" >&2; exit 2; }
  done
fi
mkdir -p "$out"
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/.device/paths.env"
B="$AIJP_HOST_BUILD_DIR/bench"; M="$AIJP_HOST_MATRIX_DIR"
dev="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
stamp() { echo "# date: $(date -u +%Y-%m-%dT%H:%MZ); device: $dev; commit: $(cat "$here/.device/commit" 2>/dev/null)"; echo "# command: $*"; }
skipped() { [[ "$skip" == *" $1 "* ]]; }
real=(); while IFS=$'\t' read -r name rows cols nnz sym field rest; do
  [ "$name" = name ] && continue; [ "$field" = complex ] && continue; real+=("$M/$name.mtx.gz"); done < "$M/MANIFEST.tsv"
large=(gen:lap7:200x200x200 gen:lap27:130x130x130 gen:fem3:90x90x90 gen:banded:rows=8000000,bw=3
       gen:normal:rows=2000000,mean=24,sigma=6 gen:uniform:rows=2000000,mean=24,width=12
       gen:powerlaw:rows=2000000,deg=12,exp=2.1 gen:circuit:rows=2000000,dense=20,len=200000)
timed() { local t0; t0=$(date +%s%N); "$@"; local r=$?; echo "wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"; return $r; }
rc=0
# The gated runs (device time), in files and a cache directory of their own, PREFIX before each name: BINDIR's gated
# full warm-up into OUTDIR/PREFIXcache_gated, and BINDIR's gated accuracy report from that cache into
# OUTDIR/PREFIXaccuracy_gated.*. The main run uses this build's tools and no prefix; --base, BINDIR and "base_".
gated_warmup() {  # PREFIX BINDIR
  local p="$1" bin="$2" tool="${1:+$2/}aijp_warmup"
  { stamp "$tool --full --restart --gated --cache-dir ${p}cache_gated";
    timed "$bin/aijp_warmup" --full --restart --gated --cache-dir "$out/${p}cache_gated"; } > "$out/${p}warmup_gated.txt" 2>&1 || rc=1
}
gated_accuracy() {  # PREFIX BINDIR
  local p="$1" bin="$2" tool="${1:+$2/}aijp_accuracy"
  { stamp "$tool --gated --cache-dir ${p}cache_gated --min-nnz 10000 --csv ${p}accuracy_gated.csv --json ${p}accuracy_gated.json --samples ${p}accuracy_gated_samples.jsonl <real shared matrices> ${large[*]}";
    "$bin/aijp_accuracy" --gated --cache-dir "$out/${p}cache_gated" --min-nnz 10000 --csv "$out/${p}accuracy_gated.csv" \
      --json "$out/${p}accuracy_gated.json" --samples "$out/${p}accuracy_gated_samples.jsonl" "${real[@]}" "${large[@]}"; } \
    > "$out/${p}accuracy_gated.txt" 2> "$out/${p}accuracy_gated.err" || rc=1
  python3 "$here/bench/plot_accuracy.py" "$out/${p}accuracy_gated.csv" "$out/${p}accuracy_gated.png" \
    --title "aijpredict model accuracy (device time, gated), $dev, $(date -u +%F)" || rc=1
}
if [ -n "$base" ] && ! skipped warmup && ! skipped accuracy; then
  gated_warmup base_ "$base"
  gated_accuracy base_ "$base"
fi
if ! skipped bench; then
  cmd=("$B/aijp_bench" --online 64 --json "$out/bench_formats.json" "${real[@]}" "${large[@]}")
  { stamp "aijp_bench --online 64 --json bench_formats.json <all real shared matrices> ${large[*]}"; "${cmd[@]}"; } > "$out/bench_formats.txt" 2> "$out/bench_formats.err" || rc=1
fi
if ! skipped warmup; then
  export AIJPREDICT_CACHE_DIR="$out/cache"
  { stamp "aijp_warmup --quick --restart"; timed "$B/aijp_warmup" --quick --restart; } > "$out/warmup_quick.txt" 2>&1 || rc=1
  { stamp "aijp_warmup --full --restart"; timed "$B/aijp_warmup" --full --restart; } > "$out/warmup_full.txt" 2>&1 || rc=1
  # The gated warm-up in a cache directory of its own: the runtime's cache stays back to back.
  gated_warmup "" "$B"
fi
if ! skipped accuracy; then
  export AIJPREDICT_CACHE_DIR="$out/cache"
  if [ $gated_only = 0 ]; then
    { stamp "aijp_accuracy --min-nnz 10000 --csv accuracy.csv --json accuracy.json --samples accuracy_samples.jsonl <real shared matrices> ${large[*]}";
      "$B/aijp_accuracy" --min-nnz 10000 --csv "$out/accuracy.csv" --json "$out/accuracy.json" --samples "$out/accuracy_samples.jsonl" "${real[@]}" "${large[@]}"; } > "$out/accuracy.txt" 2> "$out/accuracy.err" || rc=1
    python3 "$here/bench/plot_accuracy.py" "$out/accuracy.csv" "$out/accuracy.png" --title "aijpredict model accuracy, $dev, $(date -u +%F)" || rc=1
  fi
  if [ -d "$out/cache_gated" ]; then
    gated_accuracy "" "$B"
  fi
fi
if ! skipped online; then
  # Online refinement from a mis-calibrated temporary cache (its own cache directory, never $out/cache).
  online=(); for f in "${real[@]}"; do n=$(awk -F'\t' -v k="$(basename "$f" .mtx.gz)" '$1 == k {print $4}' "$M/MANIFEST.tsv");
    [ "${n:-0}" -ge 10000 ] && online+=("$f"); done
  online+=(gen:lap7:200x200x200 gen:normal:rows=2000000,mean=24,sigma=6 gen:powerlaw:rows=2000000,deg=12,exp=2.1)
  { stamp "aijp_online --json online.json <real shared matrices >= 10000 nnz> ${online[*]: -3}"; "$B/aijp_online" --json "$out/online.json" "${online[@]}"; } > "$out/online.txt" 2> "$out/online.err" || rc=1
  { stamp "aijp_online --foreign cache/defaults/h200.json --json online_foreign.json <same>";
    "$B/aijp_online" --foreign "$here/cache/defaults/h200.json" --json "$out/online_foreign.json" "${online[@]}"; } > "$out/online_foreign.txt" 2> "$out/online_foreign.err" || rc=1
fi
if ! skipped e2e; then
  bash "$here/bench/e2e_skeleton.sh" "$out" > /dev/null 2>&1 || rc=1
fi
if [ -n "$short" ]; then
  bash "$here/bench/short_solves.sh" "$out/short_solves.txt" --rounds 41 --matrices "$short" \
    --config "d1:$(( $(nproc) - 1 )):-types+aijcusparse,aijcusparse,aijpredict" || rc=1
fi
if [ $e2e_solves = 1 ]; then
  mkdir -p "$out/e2e_solves"
  python3 "$here/bench/e2e_petsc.py" --out "$out/e2e_solves" --matrices "$M" --only mm_,short_lap7 --types aijcusparse,aijpredict \
    --control --repeat 5 > "$out/e2e_solves/stdout.txt" 2>&1 || rc=1
fi
if [ $bundle = 1 ]; then
  find "$out" -name '*.jsonl' -exec xz -T0 {} \; 2>/dev/null
  tar -C "$(dirname "$out")" -cf "$out.tar" "$(basename "$out")" && rm -rf "$out" || rc=1
fi
exit $rc
