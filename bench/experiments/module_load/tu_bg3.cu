#define PROBE_NAME bg3
#include "probe_kernels.cuh"
void* probe_bg3_tiny() { return reinterpret_cast<void*>(&probe_bg3::tiny); }
void* probe_bg3_filler() { return nullptr; }
