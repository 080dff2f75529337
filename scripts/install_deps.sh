#!/usr/bin/env bash
# Installs the system packages aijpredict needs (Debian), skipping those already present.
# Usage: scripts/install_deps.sh [--help]
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  echo "Usage: $0"
  echo "Installs with apt-get (as root): cmake g++ make pkg-config GoogleTest/GoogleMock, nlohmann-json, zlib,"
  echo "MPICH, BLAS/LAPACK, patchelf. The CUDA toolkit (nvcc) must already be installed (/usr/local/cuda)."
  exit 0
fi
pkgs=(cmake g++ make pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev zlib1g-dev libmpich-dev mpich
      libblas-dev liblapack-dev patchelf python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps.sh: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "install_deps.sh: nvcc is at /usr/local/cuda/bin; add it to PATH (the scripts do)" >&2
  else
    echo "install_deps.sh: the CUDA toolkit (nvcc) is required and was not found" >&2; exit 1
  fi
fi
echo "install_deps.sh: system dependencies present" >&2
