#define PROBE_NAME bg1
#include "probe_kernels.cuh"
void* probe_bg1_tiny() { return reinterpret_cast<void*>(&probe_bg1::tiny); }
void* probe_bg1_filler() { return nullptr; }
