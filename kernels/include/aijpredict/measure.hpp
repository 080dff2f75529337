// Timing of y = A x with CUDA events, shared by the benchmark, the warm-up and the accuracy report so that
// every number in the project is measured the same way.
#pragma once

#include <aijpredict/gpu_matrix.hpp>

#include <cuda_runtime_api.h>

#include <vector>

namespace aijp {

struct timing_options {
  int warmup = 5;              ///< untimed products first
  int min_samples = 9;         ///< timed samples (the median is reported)
  /// Each sample is a back-to-back batch at least this long (amortises the event resolution and the
  /// host's launch jitter; the batch size is chosen from a first probe). With 0.2 ms batches, launch-bound
  /// products of one format measured 5-10 % apart from run to run on an H100 (2026-11-22).
  double min_sample_ms = 1.0;
  double max_total_ms = 500;   ///< cap on the whole measurement (shrinks the batch for slow products)
};

struct timing_result {
  double median_us = 0;  ///< median over samples of (batch time / batch size)
  double min_us = 0;
  int samples = 0;
  int batch = 0;
};

/// Times `m.apply(1, x, 0, y)` on `stream` (device pointers). Synchronises the stream. Online timing of `m`
/// (plan_options::online) is paused meanwhile.
template <typename Value>
timing_result time_spmv(gpu_matrix<Value>& m, const Value* x, Value* y, cudaStream_t stream, const timing_options& o = {});

}  // namespace aijp
