#define PROBE_NAME s4
#include "probe_kernels.cuh"
void* probe_s4_tiny() { return reinterpret_cast<void*>(&probe_s4::tiny); }
void* probe_s4_filler() { return nullptr; }
