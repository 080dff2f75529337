// The analysis' device passes in steps that never wait (staged steps, gpu_matrix.hpp): each start()
// issues kernels and a read-back into pinned memory; poll() checks the read-back's event and, when it is
// done, issues what depends on it or finishes on the host. The synchronous forms
// (compute_row_stats_device, sample_locality) run the same code and wait.
#pragma once

#include <aijpredict/gpu_matrix.hpp>

#include "async_ops.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

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
  /// `d_row_ptr` (rows + 1 entries) must stay valid and unchanged until done. With `pieces`, start() and
  /// every later issue_pending() or poll() issue one CUDA call of the pass (a memset, a kernel, a read-back,
  /// its event: piece_queue): inside a short solve each costs ~5-9 us of host time on the H100 machine.
  void start(size_type rows, size_type cols, const index_type* d_row_ptr, cudaStream_t stream, bool pieces = false);
  /// Issues the next call start() or poll() left pending (with `pieces`); false when none was.
  bool issue_pending();
  /// The kind of the call issued last (piece_queue::last).
  piece_kind last_piece() const;
  /// Without waiting: true once result() holds the statistics (issues what is pending first, and the
  /// histogram on `stream` when the first pass is found done).
  bool poll(cudaStream_t stream);
  /// Waits for what is left.
  const row_stats& wait(cudaStream_t stream);
  const row_stats& result() const;
  /// 0 not started, 1 first pass in flight, 2 histogram in flight, 3 done.
  int phase() const;

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
  /// With `pieces`, start() issues the first of its calls only (a memset, the two samplers, the read-back,
  /// its event); each later issue_pending() or poll() issues the next one.
  void start(size_type rows, size_type cols, const index_type* d_row_ptr, const index_type* d_col_idx, int value_bytes,
             cudaStream_t stream, int max_groups = 2048, bool pieces = false);
  /// Issues the next pending piece; false when nothing was pending.
  bool issue_pending();
  /// Calls start(..., pieces) left to issue.
  int pending_pieces() const;
  /// The kind of the call issued last (piece_queue::last).
  piece_kind last_piece() const;
  /// Without waiting: true once result() holds the samples (issues a pending piece first).
  bool poll();
  const locality_sample& wait();
  const locality_sample& result() const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

/// The strip summaries pass (stats.cu) in halves: issue_strip_summaries launches it into `d` and reads it
/// back into `h` (strip_summary_buffer_bytes(strip_count(...)) bytes each; `h` pinned for the read-back not
/// to wait), decode_strip_summaries reads `h` once the read-back is done.
size_type strip_count(size_type rows, size_type rows_per_strip);
std::size_t strip_summary_buffer_bytes(size_type strips);
void issue_strip_summaries(size_type rows, const index_type* d_row_ptr, size_type rows_per_strip, void* d, void* h,
                           cudaStream_t stream);
std::vector<strip_summary> decode_strip_summaries(size_type rows, size_type rows_per_strip, const void* h);

/// The strips a partition is planned on, as gpu_matrix's gather_strips computes them synchronously
/// (compute_strip_summaries_device, then with at least two strips add_strip_locality, then with `columns`
/// add_strip_columns), in passes that never wait: each is issued with a read-back into pinned memory and
/// the next one issued by the poll that finds it done. Staged steps plan partitions with it.
class strip_job {
 public:
  strip_job();
  ~strip_job();
  strip_job(const strip_job&) = delete;
  strip_job& operator=(const strip_job&) = delete;
  /// The device CSR arrays must stay valid and unchanged until done.
  void start(size_type rows, const index_type* d_row_ptr, const index_type* d_col_idx, size_type rows_per_strip,
             int value_bytes, bool columns, cudaStream_t stream);
  /// Without waiting: true once result() holds the strips (issues the next pass when one is found done).
  bool poll(cudaStream_t stream);
  /// Waits for what is left.
  std::vector<strip_summary>& wait(cudaStream_t stream);
  std::vector<strip_summary>& result();

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace aijp::detail
