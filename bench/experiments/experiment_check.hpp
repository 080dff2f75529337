// Error checks of the experiment programs (bench/experiments): a failed CUDA runtime or cuSPARSE call prints
// the call, its error and where, and exits 1. An experiment has no recovery path; the library's own checks are
// kernels/src/cuda_check.hpp.
#pragma once

#include <cuda_runtime.h>
#include <cusparse.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    cudaError_t e_ = (call);                                                                               \
    if (e_ != cudaSuccess) {                                                                               \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));    \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

#define SCHECK(call)                                                                                       \
  do {                                                                                                     \
    cusparseStatus_t s_ = (call);                                                                          \
    if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cusparseGetErrorString(s_)); \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)
