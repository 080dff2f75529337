// Checked CUDA / cuSPARSE calls: every call goes through one of these macros.
#pragma once

#include <aijpredict/error.hpp>

#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <string>

namespace aijp::detail {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line)
{
  (void)cudaGetLastError();  // clear a sticky-free error so later calls are not poisoned
  const std::string msg = std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " + call;
  if (e == cudaErrorMemoryAllocation) throw device_out_of_memory(msg, file, line);
  throw device_error(msg, file, line);
}

[[noreturn]] inline void throw_cusparse(cusparseStatus_t s, const char* call, const char* file, int line)
{
  const std::string msg = std::string("cuSPARSE error ") + cusparseGetErrorName(s) + " (" + cusparseGetErrorString(s) + ") in " + call;
  if (s == CUSPARSE_STATUS_ALLOC_FAILED || s == CUSPARSE_STATUS_INSUFFICIENT_RESOURCES) throw device_out_of_memory(msg, file, line);
  throw device_error(msg, file, line);
}

}  // namespace aijp::detail

#define AIJP_CUDA_CHECK(call)                                                              \
  do {                                                                                     \
    const cudaError_t aijp_err_ = (call);                                                  \
    if (aijp_err_ != cudaSuccess) ::aijp::detail::throw_cuda(aijp_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define AIJP_CUSPARSE_CHECK(call)                                                              \
  do {                                                                                         \
    const cusparseStatus_t aijp_st_ = (call);                                                  \
    if (aijp_st_ != CUSPARSE_STATUS_SUCCESS) ::aijp::detail::throw_cusparse(aijp_st_, #call, __FILE__, __LINE__); \
  } while (0)

/// After every kernel launch: catches launch-configuration errors without synchronising.
#define AIJP_CHECK_LAUNCH() AIJP_CUDA_CHECK(cudaPeekAtLastError())
