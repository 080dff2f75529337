#!/usr/bin/env bash
# Packs what the GPU machine lacks into the git-ignored folder .device/ (<= 64 MiB): the PETSc libraries,
# the non-CUDA shared libraries they and our binaries need (MPICH, UCX, hwloc, BLAS/LAPACK, ...), the build
# tree without object files, the shared test matrices, and the paths needed to recreate this machine's
# absolute paths there. The device copy of the checkout runs it with scripts/device_run.sh.
# Usage: scripts/pack_device.sh [--help]
# The working tree and .device travel together under 64 MiB; to pack less, set (see below for each):
#   AIJP_PACK_EXPERIMENTS="<names>"  only these experiment binaries of bench/experiments (empty: none)
#   AIJP_PACK_EXCLUDE="<patterns>"   more build-tree paths to leave out (tar patterns, e.g. ./bench ./tests/unit/test_runtime)
#   AIJP_PACK_LAUNCHER=0             no MPICH launcher (a call that starts no second rank)
#   AIJP_PACK_PETSC=0                no PETSc, MPI or what links them (a call that runs only the GPU tests)
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  echo "Then call the device tool with carry [\".device\"] and the command: bash scripts/device_run.sh [-- COMMAND]"
  exit 0
fi
[ -f "$AIJP_BUILD/CMakeCache.txt" ] || { echo "pack_device.sh: no build at $AIJP_BUILD (run scripts/build.sh)" >&2; exit 1; }
PETSC_DIR="$("$AIJP_ROOT/scripts/setup_petsc.sh" --print-dir 2>/dev/null || true)"
# AIJP_PACK_PETSC=0: a call that runs only the GPU tests of the C++ library packs neither PETSc, nor what links
# it (examples, the plugin, the PETSc tests), nor MPI: ~9 MB less of the 64 MiB.
no_petsc=0
if [ "${AIJP_PACK_PETSC:-1}" = 0 ]; then PETSC_DIR=""; no_petsc=1
elif [ -z "$PETSC_DIR" ]; then echo "pack_device.sh: WARNING: no PETSc build found; packing without PETSc" >&2; fi
out="${AIJP_DEVICE_DIR:-$AIJP_ROOT/.device}"
rm -rf "$out"; mkdir -p "$out/lib" "$out/petsc"
grep -qx '/.device/' "$AIJP_ROOT/.git/info/exclude" 2>/dev/null || grep -qx '/.device/' "$AIJP_ROOT/.gitignore" || {
  echo "pack_device.sh: .device/ must be git-ignored" >&2; exit 1; }

# Build tree without objects and static archives, nor CMake's compiler checks and dependency lists (nothing
# there runs them); binaries stripped of debug info. The experiment binaries of bench/experiments (4-5 MB each)
# only where AIJP_PACK_EXPERIMENTS names them (space-separated, e.g. "aijp_csell_switch aijp_wake_cost"; unset:
# all of them): the working tree and .device travel together under 64 MiB.
experiments=$(sed -n 's/^add_executable(\(aijp_[a-z0-9_]*\) experiments\/.*/\1/p' "$AIJP_ROOT/bench/CMakeLists.txt")
excludes=()
if [ -n "${AIJP_PACK_EXPERIMENTS+set}" ]; then
  for e in $experiments; do
    case " $AIJP_PACK_EXPERIMENTS " in *" $e "*) ;; *) excludes+=(--exclude="./bench/$e") ;; esac
  done
fi
# AIJP_PACK_EXCLUDE: more paths of the build tree to leave out (space-separated tar patterns, e.g.
# "./tests/unit ./tests/io" for a call that runs no unit test).
set -f  # the patterns are tar's, not the shell's (./tests/unit/test_* would match the sources here)
for e in ${AIJP_PACK_EXCLUDE:-}; do excludes+=(--exclude="$e"); done
set +f
if [ $no_petsc = 1 ]; then  # their binaries only: ctest still reads their directories' test lists
  while IFS= read -r f; do excludes+=(--exclude="./$f"); done < <(cd "$AIJP_BUILD" && find examples petsc_plugin tests/petsc CMakeFiles/FindMPI -type f \( -perm -u+x -o -name '*.so*' \) 2>/dev/null)
fi
tar -C "$AIJP_BUILD" --exclude='*.o' --exclude='*.a' --exclude='CMakeFiles/*.dir' --exclude='*.log' \
    --exclude='CMakeFiles/3.*' --exclude='compiler_depend.*' "${excludes[@]}" -cf - . |
  (mkdir -p "$out/build" && tar -C "$out/build" -xf -)
find "$out/build" -type f -perm -u+x -exec sh -c 'file -b "$1" | grep -q ELF && strip --strip-debug "$1"' _ {} \; 2>/dev/null || true

# PETSc shared libraries (headers are not needed to run).
if [ -n "$PETSC_DIR" ]; then
  cp -a "$PETSC_DIR"/lib/libpetsc.so* "$out/petsc/"
  strip --strip-debug "$out"/petsc/libpetsc.so.*.*.* 2>/dev/null || true
fi

# MPICH's launcher for multi-rank runs (with libslurm, which only it needs: 0.8 MB compressed, found by the ldd below). AIJP_PACK_LAUNCHER=0
# leaves it out for a call that starts no second rank.
launchers="mpiexec.hydra hydra_pmi_proxy"
[ "${AIJP_PACK_LAUNCHER:-1}" = 0 ] || [ $no_petsc = 1 ] && launchers=""
for t in $launchers; do
  p=$(command -v $t || true)
  if [ -n "$p" ]; then cp -L "$p" "$out/lib/$t"; fi
done
# Non-CUDA, non-libc dependencies of everything we ship (the launcher needs libslurm, for one).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libresolv|libnss|libstdc\+\+|libgcc_s|libcuda|libcudart|libcusparse|libcublas|libcublasLt|libcusolver|libcufft|libcurand|libnvJitLink|libnvrtc)'
{ ldd "$out"/petsc/libpetsc.so.*.*.* "$out"/lib/mpiexec.hydra "$out"/lib/hydra_pmi_proxy 2>/dev/null; find "$out/build" -type f -perm -u+x -exec sh -c 'file -b "$1" | grep -q ELF && ldd "$1"' _ {} \; ; } 2>/dev/null |
  awk '/=> \//{print $1" "$3}' | sort -u | while read -r name path; do
    if echo "$name" | grep -Eq "$skip"; then continue; fi
    case "$path" in "$out"/*|"$AIJP_BUILD"/*) continue ;; esac
    if [ -n "$PETSC_DIR" ]; then case "$path" in "$PETSC_DIR"/*) continue ;; esac; fi
    cp -L "$path" "$out/lib/$name"
  done || true
strip --strip-debug "$out"/lib/*.so* 2>/dev/null || true

# Compress the large parts (libmpich alone is 41 MB): device_run.sh unpacks them there.
( cd "$out" && XZ_OPT="-T0 -9e" tar -cJf bundle.tar.xz build lib petsc && rm -rf build lib petsc )
cp -a "$AIJP_SHARED/matrices" "$out/matrices"
# The tests read the matrix directory compiled into the build (AIJP_MATRIX_DIR); link that one there.
matrix_dir=$(sed -n 's/^AIJP_MATRIX_DIR:PATH=//p' "$AIJP_BUILD/CMakeCache.txt")
matrix_dir="${matrix_dir:-$AIJP_SHARED/matrices}"
git -C "$AIJP_ROOT" describe --always --dirty > "$out/commit" 2>/dev/null || echo unknown > "$out/commit"
cat > "$out/paths.env" <<PATHS
AIJP_HOST_SOURCE_DIR=$AIJP_ROOT
AIJP_HOST_BUILD_DIR=$AIJP_BUILD
AIJP_HOST_PETSC_DIR=$PETSC_DIR
AIJP_HOST_MATRIX_DIR=$matrix_dir
PATHS
size=$(du -sm "$out" | cut -f1)
echo "pack_device.sh: packed $out (${size} MiB)" >&2
if [ "$size" -gt 60 ]; then echo "pack_device.sh: WARNING: ${size} MiB is close to the 64 MiB transfer limit" >&2; fi
