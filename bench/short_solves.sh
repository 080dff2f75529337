#!/usr/bin/env bash
# Issue 6's repeated short solves on the GPU machine (run through scripts/device_run.sh, from the checkout's
# root): for each configuration and matrix, aijp_solve_ab times 160 GMRES(10) solves per round against
# aijcusparse in interleaved rounds, each in a process of its own bound to the configuration's CPUs, with an
# empty coefficient cache. Prints the per-solve paired ratios, the worst later solve and the first solve.
# Usage: bash bench/short_solves.sh OUTFILE [--rounds N] [--matrices LIST] [--config NAME:CPUS:OPTIONS]...
#   LIST: comma-separated bcsstk13, delaunay_n15, lap7 (16^3), or any name of ../shared/matrices;
#   OPTIONS: -mat_aijpredict_* options separated by '+' (e.g. pw:14,15:-mat_aijpredict_prefetch+-mat_aijpredict_host_worker)
#   Without --config: default:15: (one CPU, the defaults) and pw2:14,15:-mat_aijpredict_prefetch+-mat_aijpredict_host_worker.
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ] || [ $# -lt 1 ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
out="$1"; shift
rounds=101; matrices=bcsstk13; configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift ;;
    --matrices) matrices="$2"; shift ;;
    --config) configs+=("$2"); shift ;;
    *) echo "short_solves.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#configs[@]} -gt 0 ] || configs=("default:15:" "pw2:14,15:-mat_aijpredict_prefetch+-mat_aijpredict_host_worker")
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/.device/paths.env"
# The packed libraries (PETSc, MPI, ...) as scripts/device_run.sh finds them, so that this runs without it too.
export LD_LIBRARY_PATH="$here/.device/lib:$here/.device/petsc:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
ab="$AIJP_HOST_BUILD_DIR/examples/petsc/aijp_solve_ab"
[ -x "$ab" ] || { echo "short_solves.sh: $ab not built" >&2; exit 1; }
dev="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
{
  echo "# date: $(date -u +%Y-%m-%dT%H:%MZ); device: $dev; commit: $(cat "$here/.device/commit" 2>/dev/null); CPUs: $(nproc)"
  echo "# command: per run AIJPREDICT_CACHE_DIR=<empty> taskset -c <cpus> aijp_solve_ab <matrix> -ksp_max_it 10 -ksp_type gmres -pc_type jacobi -types aijcusparse,aijpredict -interleave -rounds $rounds -solves 160 <options> ('round N:' lines stripped)"
} >> "$out"
rc=0
IFS=',' read -r -a mats <<< "$matrices"
for c in "${configs[@]}"; do
  name="${c%%:*}"; rest="${c#*:}"; cpus="${rest%%:*}"; opts="${rest#*:}"; opts="${opts//+/ }"
  for mat in "${mats[@]}"; do
    case "$mat" in
      lap7) src=(-gen lap7:16x16x16) ;;
      *) src=(-f "$AIJP_HOST_MATRIX_DIR/$mat.mtx.gz") ;;
    esac
    cache="$(mktemp -d)"
    echo "=== ${name}_${mat} (taskset -c $cpus) ${src[*]} $opts" >> "$out"
    # shellcheck disable=SC2086
    AIJPREDICT_CACHE_DIR="$cache" taskset -c "$cpus" "$ab" "${src[@]}" -ksp_max_it 10 -ksp_type gmres -pc_type jacobi \
      -types aijcusparse,aijpredict -interleave -rounds "$rounds" -solves 160 $opts 2>&1 | grep -v '^round ' >> "$out" || {
      rc=1; echo "short_solves.sh: ${name}_${mat} failed (its output is in $out)" >&2; }
    rm -rf "$cache"
  done
done
exit $rc
