#define PROBE_NAME s5
#include "probe_kernels.cuh"
void* probe_s5_tiny() { return reinterpret_cast<void*>(&probe_s5::tiny); }
void* probe_s5_filler() { return nullptr; }
