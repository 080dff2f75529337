#!/usr/bin/env bash
# Runs on the GPU machine, in its copy of the checkout with .device/ carried (scripts/pack_device.sh):
# recreates this machine's absolute paths as links, sets the library path, runs the GPU test label (and the
# PETSc label, now with a GPU), then any command given after '--'.
# Usage: bash scripts/device_run.sh [--no-tests] [--sanitize] [--labels REGEX] [--exclude REGEX] [-- COMMAND ...]
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
run_tests=1; sanitize=0; labels='gpu|petsc|unit'; exclude=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-tests) run_tests=0 ;;
    --sanitize) sanitize=1 ;;
    --labels) shift; labels="$1" ;;
    --exclude) shift; exclude=(-E "$1") ;;  # test names to leave out (ctest -E), e.g. the slowest staged tests
    --help|-h) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) echo "device_run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[ -f "$here/.device/paths.env" ] || { echo "device_run.sh: .device/ missing: run scripts/pack_device.sh and carry .device" >&2; exit 1; }
source "$here/.device/paths.env"
if [ -f "$here/.device/bundle.tar.xz" ] && [ ! -d "$here/.device/build" ]; then
  tar -C "$here/.device" -xJf "$here/.device/bundle.tar.xz"
fi
link() {  # link TARGET PATH: make PATH point at TARGET unless it already is TARGET
  [ "$(readlink -f "$2" 2>/dev/null)" = "$(readlink -f "$1")" ] && return 0
  if [ -e "$2" ] && [ ! -L "$2" ]; then echo "device_run.sh: $2 exists and is not a link; not replacing it" >&2; return 1; fi
  mkdir -p "$(dirname "$2")"; rm -f "$2"; ln -s "$1" "$2"
}
link "$here" "$AIJP_HOST_SOURCE_DIR"
link "$here/.device/build" "$AIJP_HOST_BUILD_DIR"
if [ -n "$AIJP_HOST_PETSC_DIR" ]; then
  mkdir -p "$here/.device/petsc_prefix"; link "$here/.device/petsc" "$here/.device/petsc_prefix/lib"
  link "$here/.device/petsc_prefix" "$AIJP_HOST_PETSC_DIR"
fi
link "$here/.device/matrices" "$AIJP_HOST_MATRIX_DIR"
export LD_LIBRARY_PATH="$here/.device/lib:$here/.device/petsc:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$here/.device/lib:$PATH:/usr/local/cuda/bin"
export AIJP_MATRIX_DIR="$AIJP_HOST_MATRIX_DIR"
# Debian's MPICH is not GPU-aware; PETSc with CUDA refuses to start on a GPU machine unless told so.
export PETSC_OPTIONS="${PETSC_OPTIONS:-} -use_gpu_aware_mpi 0"
# The image may carry another MPI's mpiexec; ours (MPICH's hydra) is in .device/lib.
[ -x "$here/.device/lib/mpiexec.hydra" ] && export MPIEXEC="$here/.device/lib/mpiexec.hydra"
export AIJPREDICT_CACHE_DIR="${AIJPREDICT_CACHE_DIR:-/tmp/aijpredict-cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
rc=0
if [ "$run_tests" = 1 ]; then
  ctest --test-dir "$AIJP_HOST_BUILD_DIR" -L "$labels" "${exclude[@]}" --output-on-failure || rc=1
  if [ "$sanitize" = 1 ]; then
    for t in "$AIJP_HOST_BUILD_DIR"/tests/gpu/test_gpu_*; do
      [ -x "$t" ] || continue
      compute-sanitizer --tool memcheck --error-exitcode 9 "$t" || rc=1
    done
  fi
fi
if [ $# -gt 0 ]; then "$@" || rc=1; fi
exit $rc
