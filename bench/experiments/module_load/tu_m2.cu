#define PROBE_NAME m2
#include "probe_kernels.cuh"
void* probe_m2_tiny() { return reinterpret_cast<void*>(&probe_m2::tiny); }
void* probe_m2_filler() { return probe_m2::instantiate<0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39>::first(); }
