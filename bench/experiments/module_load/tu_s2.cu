#define PROBE_NAME s2
#include "probe_kernels.cuh"
void* probe_s2_tiny() { return reinterpret_cast<void*>(&probe_s2::tiny); }
void* probe_s2_filler() { return nullptr; }
