#!/usr/bin/env bash
# Builds a variant of the PETSc plugin, libaijpredict.so, for measurement only: petsc_plugin/aijpredict.cxx with
# a patch applied, compiled and linked exactly as the build does (its flags.make and link.txt, against the same
# static libraries), into OUTDIR/libaijpredict.so. The examples find a library through LD_LIBRARY_PATH before
# their RUNPATH, so `LD_LIBRARY_PATH=OUTDIR:... aijp_solve_ab ... -time_mult` measures the variant's product.
# Session 35 found aijpredict's product on cuSPARSE CSR +0.68-0.85 us of host time over aijcusparse's inside
# one-CPU solves; the patches in bench/experiments/plugin_variants/ remove one suspect at a time:
#   a_no_product_extras.patch  the product is Sync + Apply only (no trace check, reuse step, SpMV event, install step)
#   b_no_gpu_log.patch         a, and no PetscLogGpuTimeBegin/End or PetscLogGpuFlops
#   c_stream_once.patch        b, and the CUDA stream queried once per process
#   d_direct_cusparse.patch    the product by cuSPARSE on a CSR copy of the plugin's own, as aijcusparse issues it (session 36)
#   e_cuda_vec_accessors.patch a, with VecCUDAGetArrayRead/Write as aijcusparse uses them (device vectors only)
# Variants are not products: a drops the analysis altogether (no step ever starts).
# Usage: bench/experiments/plugin_variant.sh PATCH OUTDIR   (after scripts/build.sh; --help)
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ] || [ $# -ne 2 ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -eq 2 ] || [ "${1:-}" = --help ] || [ "${1:-}" = -h ] || exit 2
  exit 0
fi
patch_file="$(readlink -f "$1")"; out="$(mkdir -p "$2" && cd "$2" && pwd)"
source "$(dirname "$0")/../../scripts/env.sh"
dir="$AIJP_BUILD/petsc_plugin"
[ -f "$dir/CMakeFiles/aijpredict.dir/flags.make" ] || { echo "plugin_variant.sh: no plugin build in $dir (run scripts/build.sh)" >&2; exit 1; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/petsc_plugin"
cp "$AIJP_ROOT/petsc_plugin/aijpredict.cxx" "$work/petsc_plugin/"
(cd "$work" && patch -s -p0 < "$patch_file")
flag() { sed -n "s/^$1 = //p" "$dir/CMakeFiles/aijpredict.dir/flags.make"; }
# shellcheck disable=SC2046
c++ $(flag CXX_DEFINES) $(flag CXX_INCLUDES) $(flag CXX_FLAGS) -c "$work/petsc_plugin/aijpredict.cxx" -o "$work/aijpredict.cxx.o"
# The build's link line, with the variant's object and output (relative paths are the build directory's).
link="$(cat "$dir/CMakeFiles/aijpredict.dir/link.txt")"
link="${link/CMakeFiles\/aijpredict.dir\/aijpredict.cxx.o/$work/aijpredict.cxx.o}"
link="${link/-o libaijpredict.so/-o $out/libaijpredict.so}"
(cd "$dir" && eval "$link")
strip --strip-debug "$out/libaijpredict.so"
echo "plugin_variant.sh: $(basename "$patch_file") -> $out/libaijpredict.so"
