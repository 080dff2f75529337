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
  /// Queue each batch behind a gate: a one-thread kernel spins until the host has issued the whole batch
  /// (or `gate_timeout_ms` passes), so the products run back to back on the device whatever the host's
  /// issue rate, and the sample is the products' device time (as NVBench's blocking kernel does). Without
  /// it, a product shorter than its host issue time (cuSPARSE's ~5-8 us on 4-10 us products) measures the
  /// host's issue rate, which drifted 10-20 % between runs of one H100 (docs/models.md). At most
  /// `gate_max_products` products are queued behind one gate (the driver's launch queue is finite; a full
  /// queue would block the host until the timeout); a gate that timed out is counted and its sample taken
  /// again with half the batch.
  bool gated = false;
  int gate_max_products = 256;
  double gate_timeout_ms = 200;
};

struct timing_result {
  double median_us = 0;  ///< median over samples of (batch time / batch size)
  double min_us = 0;
  int samples = 0;
  int batch = 0;
  int gate_timeouts = 0;  ///< gated samples retaken because the host did not issue the batch in time
};

/// Times `m.apply(1, x, 0, y)` on `stream` (device pointers). Synchronises the stream. Online timing of `m`
/// (plan_options::online) is paused meanwhile.
template <typename Value>
timing_result time_spmv(gpu_matrix<Value>& m, const Value* x, Value* y, cudaStream_t stream, const timing_options& o = {});

/// The gap between two kernels run back to back on `stream` now: an empty kernel (one block of 128 threads per
/// SM of `device`) timed as time_spmv times a product, batches and options alike (`o.gated` as the products it
/// is compared with were timed). The fitted terms of a cache describe products at the gap its warm-up measured
/// (bandwidth_model_params::launch_gap_us); context::measure_launch_gap moves predictions by the difference.
/// Costs ~10 ms with the default options. Synchronises the stream.
timing_result measure_launch_gap(cudaStream_t stream, const device_properties& device, const timing_options& o = {});

}  // namespace aijp
