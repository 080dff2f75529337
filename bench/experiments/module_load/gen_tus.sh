#!/usr/bin/env bash
# Writes the probe's module translation units (tu_<name>.cu): one module each, with <instances> filler kernels.
set -euo pipefail
cd "$(dirname "$0")"
mk() {  # name instances
  local n=$1 k=$2 body="return nullptr;"
  if [ "$k" -gt 0 ]; then
    local list=""
    for ((i = 0; i < k; ++i)); do list+="${list:+,}$i"; done
    body="return probe_${n}::instantiate<$list>::first();"
  fi
  printf '#define PROBE_NAME %s\n#include "probe_kernels.cuh"\nvoid* probe_%s_tiny() { return reinterpret_cast<void*>(&probe_%s::tiny); }\nvoid* probe_%s_filler() { %s }\n' \
    "$n" "$n" "$n" "$n" "$body" > "tu_$n.cu"
}
for n in s1 s2 s3 s4 s5 s6 bg1 bg2 bg3; do mk "$n" 0; done
mk m1 40; mk m2 40
mk b1 200; mk b2 200; mk bgb 200
