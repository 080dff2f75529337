#define PROBE_NAME s6
#include "probe_kernels.cuh"
void* probe_s6_tiny() { return reinterpret_cast<void*>(&probe_s6::tiny); }
void* probe_s6_filler() { return nullptr; }
