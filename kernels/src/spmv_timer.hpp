// Event timing of sampled products that never waits on the hot path (online refinement).
//
// A ring of CUDA event pairs: `begin` records a start event on the caller's stream, `end` the stop event
// after the product; `harvest` reads back, in recording order, the pairs whose stop event has completed
// (cudaEventQuery) and stops at the first one still pending. Only `drain` waits (cudaEventSynchronize on
// the newest pair), for the end of a solve or a report, never inside a product.
//
// What the pair measures: the time the stream spends from the start event to the stop event. When the GPU
// is idle at the start event (launch-bound products issued one at a time) this includes the host's launch
// latency of the product's kernels: the cost the application actually pays, and slightly more than the
// back-to-back time aijp::time_spmv reports.
#pragma once

#include "async_ops.hpp"
#include "cuda_check.hpp"

#include <cuda_runtime_api.h>

#include <vector>

namespace aijp::detail {

class spmv_timer {
 public:
  struct sample {
    long tag;   ///< the caller's tag at begin() (the plan's format epoch)
    double us;  ///< stop - start
  };

  explicit spmv_timer(int slots = 32) : ring_(static_cast<std::size_t>(slots))
  {
    AIJP_CUDA_CHECK(cudaGetDevice(&device_));
    // Timing events (cudaEventDisableTiming would make the pair useless) from the process' pool, all or none.
    std::vector<cudaEvent_t> events;
    events.reserve(2 * ring_.size());
    event_pool::instance(event_kind::timing).acquire(device_, static_cast<int>(2 * ring_.size()), events);
    for (std::size_t k = 0; k < ring_.size(); ++k) {
      ring_[k].start = events[2 * k];
      ring_[k].stop = events[2 * k + 1];
    }
  }
  ~spmv_timer() { destroy(); }
  spmv_timer(const spmv_timer&) = delete;
  spmv_timer& operator=(const spmv_timer&) = delete;

  /// Records the start event of a timed product on `stream`; false (record nothing, do not call end) when
  /// every slot is still pending or the stream is being captured into a graph (events recorded during
  /// capture become graph nodes and cannot be queried).
  bool begin(cudaStream_t stream, long tag)
  {
    if (pending_ == static_cast<int>(ring_.size())) return false;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    const cudaError_t e = cudaStreamIsCapturing(stream, &capture);
    if (e == cudaErrorStreamCaptureImplicit) {
      (void)cudaGetLastError();  // the legacy stream while another stream captures: not an error of ours
      return false;
    }
    AIJP_CUDA_CHECK(e);
    if (capture != cudaStreamCaptureStatusNone) return false;
    slot& s = ring_[(head_ + pending_) % ring_.size()];
    AIJP_CUDA_CHECK(cudaEventRecord(s.start, stream));
    s.tag = tag;
    return true;
  }

  /// Records the stop event of the product begun last.
  void end(cudaStream_t stream)
  {
    slot& s = ring_[(head_ + pending_) % ring_.size()];
    AIJP_CUDA_CHECK(cudaEventRecord(s.stop, stream));
    ++pending_;
  }

  int pending() const { return pending_; }

  /// Appends the completed pairs to `out` in recording order; never waits.
  void harvest(std::vector<sample>& out)
  {
    while (pending_ > 0) {
      slot& s = ring_[head_];
      const cudaError_t e = cudaEventQuery(s.stop);
      if (e == cudaErrorNotReady) {
        // Not an error; clear it from the last-error slot in case the runtime recorded it there, so that a
        // later cudaPeekAtLastError after a launch does not report it (as PyTorch does, pytorch#18584).
        if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
        return;
      }
      AIJP_CUDA_CHECK(e);
      float ms = 0;
      AIJP_CUDA_CHECK(cudaEventElapsedTime(&ms, s.start, s.stop));
      out.push_back({s.tag, static_cast<double>(ms) * 1e3});
      head_ = (head_ + 1) % ring_.size();
      --pending_;
    }
  }

  /// Waits for every pending pair and appends them to `out` (not for the hot path).
  void drain(std::vector<sample>& out)
  {
    while (pending_ > 0) {  // in order: pairs may sit on different streams
      AIJP_CUDA_CHECK(cudaEventSynchronize(ring_[head_].stop));
      harvest(out);
    }
  }

 private:
  struct slot {
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    long tag = 0;
  };
  void destroy() noexcept
  {
    auto& pool = event_pool::instance(event_kind::timing);
    for (auto& s : ring_) {
      if (s.start) pool.release(device_, s.start);
      if (s.stop) pool.release(device_, s.stop);
      s.start = s.stop = nullptr;
    }
  }

  std::vector<slot> ring_;
  int device_ = 0;
  std::size_t head_ = 0;  // oldest pending slot
  int pending_ = 0;
};

}  // namespace aijp::detail
