#!/usr/bin/env bash
# Install PETSc (with CUDA and MPI) the way PETSc documents for pip, into a cache
# directory outside the checkout, keyed by version and configure options.
#
# Usage: scripts/setup_petsc.sh [--print-dir] [--force] [--help]
#   Prints the resulting PETSC_DIR on its last line. Reuses an existing build.
set -euo pipefail

PETSC_VERSION="${AIJP_PETSC_VERSION:-3.26.1}"
CUDA_ARCH="${AIJP_CUDA_ARCH:-90}"
# Configure options passed to PETSc's configure through pip (see PETSc's pip documentation).
# MPI compilers are taken from mpicc/mpicxx (MPICH from Debian), BLAS/LAPACK from Debian.
CONFIGURE_OPTIONS="--with-cuda=1 --with-cuda-arch=${CUDA_ARCH} --with-cudac=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)} \
--with-fc=0 --with-x=0 --with-debugging=0 --with-shared-libraries=1 \
--COPTFLAGS=-O2 --CXXOPTFLAGS=-O2 --CUDAOPTFLAGS=-O2"

usage() {
  cat <<USAGE
Usage: $0 [--print-dir] [--force] [--help]

Builds PETSc ${PETSC_VERSION} from the Python package registry ('pip install petsc') with
  PETSC_CONFIGURE_OPTIONS="${CONFIGURE_OPTIONS}"
into \${AIJP_CACHE_ROOT:-\${XDG_CACHE_HOME:-\$HOME/.cache}/aijpredict}/petsc-<version>-<key>, where <key>
hashes the version, options, nvcc and mpicc versions. An existing build there is reused; a fresh machine
builds once (16 minutes measured on 2 cores). The last line printed is the PETSC_DIR.

  --print-dir   only print the PETSC_DIR the current options map to (exit 1 if not built)
  --force       rebuild even if a build exists
  --help        this text

Environment: AIJP_PETSC_VERSION, AIJP_CUDA_ARCH (default 90), AIJP_CACHE_ROOT, CUDACXX.
USAGE
}

print_only=0; force=0
for a in "$@"; do
  case "$a" in
    --print-dir) print_only=1 ;;
    --force) force=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup_petsc.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done

for tool in mpicc mpicxx nvcc python3 make; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ "$tool" != nvcc ]; then
    echo "setup_petsc.sh: '$tool' not found; run scripts/install_deps.sh first" >&2; exit 1
  fi
done
NVCC="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$NVCC" ] || { echo "setup_petsc.sh: nvcc not found (set CUDACXX)" >&2; exit 1; }

cache_root="${AIJP_CACHE_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/aijpredict}"
key=$( { echo "$PETSC_VERSION"; echo "$CONFIGURE_OPTIONS"; "$NVCC" --version | tail -1; mpicc -show; mpicc --version | head -1; } | sha256sum | cut -c1-12)
prefix="$cache_root/petsc-${PETSC_VERSION}-${key}"
petsc_dir="$prefix/site/petsc"

if [ "$print_only" = 1 ]; then
  [ -f "$petsc_dir/.aijp-complete" ] || { echo "setup_petsc.sh: no PETSc build at $petsc_dir" >&2; exit 1; }
  echo "$petsc_dir"; exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.petsc-${key}.lock"
# Another process (a parallel CI job, a second clone) may be building the same key: wait for it.
if ! flock -n 9; then echo "setup_petsc.sh: waiting for another build of $prefix ..." >&2; flock 9; fi

# PETSc's pip install does not ship the tutorial sources; the tests build PETSc's own KSP ex2 (and others)
# unmodified, so take them from the same source distribution into share/petsc/examples/src.
install_tutorials() {
  local ex="$petsc_dir/share/petsc/examples/src"
  [ -f "$ex/ksp/ksp/tutorials/ex2.c" ] && return 0
  echo "setup_petsc.sh: adding PETSc's tutorial sources to $ex" >&2
  local tmp; tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp" "petsc==${PETSC_VERSION}" >&2
  tar -xzf "$tmp"/petsc-*.tar.gz -C "$tmp" --wildcards '*/src/ksp/ksp/tutorials/*' '*/src/snes/tutorials/*'
  mkdir -p "$ex/ksp/ksp" "$ex/snes"
  cp -r "$tmp"/petsc-*/src/ksp/ksp/tutorials "$ex/ksp/ksp/"
  cp -r "$tmp"/petsc-*/src/snes/tutorials "$ex/snes/"
  rm -rf "$tmp"
}

if [ -f "$petsc_dir/.aijp-complete" ] && [ "$force" = 0 ]; then
  echo "setup_petsc.sh: reusing PETSc $PETSC_VERSION at $petsc_dir" >&2
  install_tutorials
  echo "$petsc_dir"; exit 0
fi

rm -rf "$prefix"; mkdir -p "$prefix"
log="$prefix/build.log"
echo "setup_petsc.sh: building PETSc $PETSC_VERSION (CUDA sm_${CUDA_ARCH}, MPI) into $prefix" >&2
echo "setup_petsc.sh: full log in $log" >&2
start=$(date +%s)
(
  export PETSC_CONFIGURE_OPTIONS="$CONFIGURE_OPTIONS"
  export MPICC=mpicc MPICXX=mpicxx
  python3 -m pip install -v --no-cache-dir --no-deps --no-binary petsc --target "$prefix/site" "petsc==${PETSC_VERSION}"
) >"$log" 2>&1 &
pid=$!
# Progress: one line a minute with the phase and the number of objects compiled so far.
while kill -0 "$pid" 2>/dev/null; do
  sleep 60 & wait $! || true
  kill -0 "$pid" 2>/dev/null || break
  el=$(( $(date +%s) - start ))
  phase="configure"; grep -q "PETSc: build" "$log" 2>/dev/null && phase="build"
  grep -q "PETSc: install" "$log" 2>/dev/null && phase="install"
  nobj=$(grep -cE '^ +(CC|CXX|CUDAC) ' "$log" 2>/dev/null || true)
  printf 'setup_petsc.sh: [%3d min] %s, %s sources compiled\n' $((el / 60)) "$phase" "${nobj:-0}" >&2
done
if ! wait "$pid"; then
  echo "setup_petsc.sh: PETSc build FAILED; last lines of $log:" >&2
  tail -40 "$log" >&2
  exit 1
fi
[ -f "$petsc_dir/include/petscconf.h" ] || { echo "setup_petsc.sh: build finished but $petsc_dir/include/petscconf.h is missing" >&2; exit 1; }
grep -q "define PETSC_HAVE_CUDA 1" "$petsc_dir/include/petscconf.h" || { echo "setup_petsc.sh: PETSc built without CUDA" >&2; exit 1; }
el=$(( $(date +%s) - start ))
echo "$el" > "$prefix/build_seconds"
install_tutorials
touch "$petsc_dir/.aijp-complete"
echo "setup_petsc.sh: PETSc built in $((el / 60)) min $((el % 60)) s" >&2
echo "$petsc_dir"
