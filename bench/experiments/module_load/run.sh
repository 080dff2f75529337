#!/usr/bin/env bash
# Builds (if BIN is not given) and runs the module-load probe: lazy loading on one and on two CPUs, then eager.
# Usage: bench/experiments/module_load/run.sh [BIN]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-}"
if [ -z "$bin" ]; then
  bin="$(mktemp -d)/module_load_probe"
  nvcc -O2 -std=c++17 -arch=sm_90 -o "$bin" "$here/module_load_probe.cu" "$here"/tu_*.cu -lpthread
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "=== LAZY, one CPU (taskset -c 15)"; CUDA_MODULE_LOADING=LAZY taskset -c 15 "$bin"
echo "=== LAZY, two CPUs (taskset -c 14,15)"; CUDA_MODULE_LOADING=LAZY taskset -c 14,15 "$bin"
echo "=== LAZY, two CPUs, again"; CUDA_MODULE_LOADING=LAZY taskset -c 14,15 "$bin"
echo "=== EAGER, two CPUs"; CUDA_MODULE_LOADING=EAGER taskset -c 14,15 "$bin"
