// Kernels of the module-load probe (module_load_probe.cu). Each translation unit that includes this file with
// a different PROBE_NAME is a CUDA module of its own; PROBE_INSTANCES adds that many instantiations of a
// kernel of ~100 instructions to make the module larger.
#pragma once
#include <cuda_runtime.h>

#define PROBE_CAT2(a, b) a##b
#define PROBE_CAT(a, b) PROBE_CAT2(a, b)

namespace PROBE_CAT(probe_, PROBE_NAME) {
__global__ void tiny(float* p) { p[threadIdx.x] += 1.0f; }

template <int N>
__global__ void filler(const float* __restrict__ a, float* __restrict__ b, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = a[i];
#pragma unroll
  for (int k = 0; k < 24; ++k) v = v * (1.0f + N * 1e-3f) + a[(i + k * (N + 1)) % n];
  b[i] = v;
}

template <int... Ns>
struct instantiate {
  static void* first() { void* f[] = {reinterpret_cast<void*>(&filler<Ns>)...}; return f[0]; }
};
}  // namespace
