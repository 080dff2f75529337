#!/usr/bin/env bash
# Issue 4's offline check of a model change: refits the placeholder on every committed gated pair of one GPU kind
# (bench/results/*_<gpu>_*_gated_cache.json with the same run's *_warmup_gated_samples.jsonl.xz and
# *_accuracy_gated_samples.jsonl.xz) with build/bench/aijp_refit, and prints per pair how many formats meet mean <= 5 %
# and p95 <= 12 % on the held-out set, the selection regret, then each format's mean / p95 (%). Run it before and after
# a change to predict.cpp and compare; no GPU needed.
# Usage: bash bench/refit_pairs.sh [--gpu h100|h200] [--since YYYY-MM-DD] [--build DIR]
set -uo pipefail
gpu=h100; since=0000-00-00; build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --gpu) gpu="$2"; shift ;;
    --since) since="$2"; shift ;;
    --build) build="$2"; shift ;;
    --help|-h) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "refit_pairs.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
here="$(cd "$(dirname "$0")/.." && pwd)"
refit="${build:-$here/build}/bench/aijp_refit"
[ -x "$refit" ] || { echo "refit_pairs.sh: $refit not found: build the project first (or pass --build DIR)" >&2; exit 1; }
results="$here/bench/results"
found=0
for cache in "$results"/*_"$gpu"_*_gated_cache.json; do
  [ -f "$cache" ] || continue
  run="${cache%_gated_cache.json}"
  name="$(basename "$run")"
  [[ "${name:0:10}" < "$since" ]] && continue
  train="${run}_warmup_gated_samples.jsonl.xz"; test="${run}_accuracy_gated_samples.jsonl.xz"
  [ -f "$train" ] && [ -f "$test" ] || continue
  found=$((found + 1))
  out="$("$refit" --cache "$cache" --train "$train" --test "$test" --models guo_wang 2>&1)" || { echo "$name: aijp_refit failed" >&2; continue; }
  echo "$out" | awk -f "$here/bench/refit_meet.awk" -v report=line -v name="$name"
done
[ "$found" -gt 0 ] || { echo "refit_pairs.sh: no complete $gpu gated pair in $results" >&2; exit 1; }
