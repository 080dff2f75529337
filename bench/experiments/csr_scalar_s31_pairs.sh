#!/bin/bash
# Session 31 (docs/models.md, "Session 31: csr_scalar (offline)"): aijp_refit on the five H100 gated pairs A-E.
# usage: csr_scalar_s31_pairs.sh AIJP_REFIT CACHE OUTDIR   (the patch csr_scalar_s31_terms.patch switches its
# variants on with S31_L2REFETCH=1 and / or S31_REM=1 in the environment)
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ] || [ $# -ne 3 ]; then
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
  [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; exit $?
fi
BIN=$1; CACHE=$2; OUT=$3
[ -x "$BIN" ] || { echo "csr_scalar_s31_pairs.sh: $BIN is not an executable (build aijp_refit)" >&2; exit 1; }
[ -f "$CACHE" ] || { echo "csr_scalar_s31_pairs.sh: no cache file $CACHE" >&2; exit 1; }
mkdir -p "$OUT"
R=$(cd "$(dirname "$0")/../results" && pwd)
declare -A TR TE
TR[A]=2026-11-25_h100_session28_warmup_gated; TE[A]=2026-11-25_h100_session28_accuracy_gated
TR[B]=2026-11-25_h100_session28_run2_warmup_gated; TE[B]=2026-11-25_h100_session28_run2_accuracy_gated
TR[C]=2026-11-25_h100_session28_head_warmup_gated; TE[C]=2026-11-25_h100_session28_head_accuracy_gated
TR[D]=2026-11-25_h100_session27_block_placed_warmup_gated; TE[D]=2026-11-25_h100_session27_block_placed_accuracy_gated
TR[E]=2026-11-28_h100_session30_warmup_gated; TE[E]=2026-11-28_h100_session30_accuracy_gated
for p in A B C D E; do
  $BIN --cache $CACHE --train $R/${TR[$p]}_samples.jsonl.xz --test $R/${TE[$p]}_samples.jsonl.xz --models aijp --explain $OUT/$p.explain.tsv > $OUT/$p.txt 2>&1
  # also self-fit explain on warmup
  $BIN --cache $CACHE --train $R/${TR[$p]}_samples.jsonl.xz --test $R/${TR[$p]}_samples.jsonl.xz --models aijp --explain $OUT/$p.warm.explain.tsv > $OUT/$p.warm.txt 2>&1
done
for p in A B C D E; do
  echo -n "$p "; awk '/^placeholder/ && NF>=6 {printf "%s %s/%s  ", $2, $4, $6}' $OUT/$p.txt; grep -A3 "^model.*regret" $OUT/$p.txt | awk '/^placeholder/{printf " regret %s %s (%s %s)", $3,$4,$5,$6}'; echo
done
