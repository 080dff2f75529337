#!/bin/bash
# Session 34 (docs/models.md, "Session 34, offline: a streaming rate for layouts in the L2"): aijp_refit on the four
# H100 and four H200 gated pairs. usage: stream_l2_share_s34_pairs.sh AIJP_REFIT OUTDIR, run in a build with
# stream_l2_share_s34.patch applied; its variants are switched by S34D_SHARES (grid of shares of the DRAM time, e.g.
# 0.9,0.8,0.7,0.6,0.5,0.4), S34D_FORMATS (formats the share applies to; empty: all), S34D_CRIT=1 (choose by those
# formats' training error, not all samples'), S34D_FORCE=1 (take the grid's last share whatever the error).
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ] || [ $# -ne 2 ]; then
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
  [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; exit $?
fi
BIN=$1; OUT=$2
[ -x "$BIN" ] || { echo "stream_l2_share_s34_pairs.sh: $BIN is not an executable (build aijp_refit)" >&2; exit 1; }
mkdir -p "$OUT"
R=$(cd "$(dirname "$0")/../results" && pwd)
H100=$(cd "$(dirname "$0")/../../cache/defaults" && pwd)/h100.json
run() { "$BIN" --cache "$2" --train "$R/$3_warmup_gated_samples.jsonl.xz" --test "$R/$3_accuracy_gated_samples.jsonl.xz" --models aijp > "$OUT/$1.txt" 2>&1; }
run h100_s32 "$H100" 2026-11-28_h100_session32
run h100_s30 "$H100" 2026-11-28_h100_session30
run h100_s28r2 "$H100" 2026-11-25_h100_session28_run2
run h100_s25r2 "$H100" 2026-11-24_h100_session25_run2
run h200_s33 "$R/2026-11-28_h200_session33_gated_cache.json" 2026-11-28_h200_session33
run h200_s33r2 "$R/2026-11-28_h200_session33_run2_gated_cache.json" 2026-11-28_h200_session33_run2
run h200_s33r3 "$R/2026-11-28_h200_session33_run3_gated_cache.json" 2026-11-28_h200_session33_run3
run h200_s34 "$R/2026-11-28_h200_session34_gated_cache.json" 2026-11-28_h200_session34
