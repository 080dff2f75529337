#define PROBE_NAME s1
#include "probe_kernels.cuh"
void* probe_s1_tiny() { return reinterpret_cast<void*>(&probe_s1::tiny); }
void* probe_s1_filler() { return nullptr; }
