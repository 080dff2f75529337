#define PROBE_NAME bg2
#include "probe_kernels.cuh"
void* probe_bg2_tiny() { return reinterpret_cast<void*>(&probe_bg2::tiny); }
void* probe_bg2_filler() { return nullptr; }
