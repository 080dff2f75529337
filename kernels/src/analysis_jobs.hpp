// The analysis' device passes in steps that never wait (staged steps, gpu_matrix.hpp): each start()
// issues kernels and a read-back into pinned memory; poll() checks the read-back's event and, when it is
// done, issues what depends on it or finishes on the host. The synchronous forms
// (compute_row_stats_device, sample_locality) run the same code and wait.
#pragma once

#include <aijpredict/gpu_matrix.hpp>

#include <cuda_runtime_api.h>

#include <memory>

namespace aijp::detail {

/// Launches every kernel of the analysis (statistics, locality samples, strip summaries) and of the layout
/// staged steps split (sell_delta16, double) once on a small matrix, so that CUDA's lazy loading loads their
/// modules then (each first launch costs 0.1-0.2 ms) rather than inside the product that first analyses a
/// matrix. The context does it at its creation.
void preload_analysis_kernels();

/// Row statistics: the per-warp pass (N_iter, longest row), then the histogram of row lengths, whose bin
/// count is the longest row read back by the first pass.
class row_stats_job {
 public:
  row_stats_job();
  ~row_stats_job();
  row_stats_job(const row_stats_job&) = delete;
  row_stats_job& operator=(const row_stats_job&) = delete;
  /// `d_row_ptr` (rows + 1 entries) must stay valid and unchanged until done.
  void start(size_type rows, size_type cols, const index_type* d_row_ptr, cudaStream_t stream);
  /// Without waiting: true once result() holds the statistics (issues the histogram on `stream` when the
  /// first pass is found done).
  bool poll(cudaStream_t stream);
  /// Waits for what is left.
  const row_stats& wait(cudaStream_t stream);
  const row_stats& result() const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

/// Locality samples (sample_locality): both samplers and one read-back.
class locality_job {
 public:
  locality_job();
  ~locality_job();
  locality_job(const locality_job&) = delete;
  locality_job& operator=(const locality_job&) = delete;
  void start(size_type rows, size_type cols, const index_type* d_row_ptr, const index_type* d_col_idx, int value_bytes,
             cudaStream_t stream, int max_groups = 2048);
  bool poll();
  const locality_sample& wait();
  const locality_sample& result() const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace aijp::detail
