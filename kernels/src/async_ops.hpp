// Pieces for device work that must not block the thread issuing it (staged steps, gpu_matrix.hpp):
// read-backs into pinned host memory completed by a polled event, and pooled temporaries.
//
// Why each exists: cudaMemcpyAsync into pageable host memory returns only once the copy is done (the
// stream is drained); cudaFree waits for the whole device; cudaEventSynchronize waits for the stream. A
// staged step issues its kernels and read-backs, returns, and a later call polls the event.
#pragma once

#include "cuda_check.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace aijp::detail {

/// The CPU the calling thread runs on now (-1 where the platform does not say).
inline int current_cpu()
{
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

/// Process-wide reuse of small blocks for staged steps (gpu_matrix.hpp): page-locked host blocks for
/// read-backs and device blocks for temporaries. Allocating costs far more than a staged step may add to a
/// product: cudaHostAlloc about a millisecond, the first cudaMallocAsync of a process milliseconds (its
/// memory pool), and cudaFreeHost and cudaFree synchronise the device. Blocks come in power-of-two sizes
/// (at least 4 KiB) and go back to the pool, never to the driver, until the process ends; blocks above
/// max_pooled_bytes are allocated and freed each time (a conversion's temporaries for a matrix of millions of
/// rows stay out of the pool). Thread-safe. A block must be released only once no device work or copy
/// using it is pending.
enum class pool_kind { pinned_host, device };
class block_pool {
 public:
  static block_pool& instance(pool_kind kind);
  /// A block of at least `bytes` (its size in *size).
  void* acquire(std::size_t bytes, std::size_t* size);
  void release(void* p, std::size_t size) noexcept;
  /// Allocates `count` blocks of `bytes` ahead (a context does it once, outside the products).
  void reserve(std::size_t bytes, int count);
  static constexpr std::size_t max_pooled_bytes = std::size_t(64) << 20;
  ~block_pool();
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;

 private:
  explicit block_pool(pool_kind kind) : kind_(kind) {}
  void* allocate(std::size_t size);
  struct impl;
  pool_kind kind_;
  impl* impl_ = nullptr;
  impl& get();
};

/// An array in a block_pool block. Its owner must know that nothing pending uses it when it is destroyed or
/// resized (a device-to-host cudaMemcpyAsync into a pinned one does not wait for the stream).
template <typename T, pool_kind Kind>
class pool_buffer {
 public:
  pool_buffer() = default;
  explicit pool_buffer(std::size_t count) { resize(count); }
  ~pool_buffer() { release(); }
  pool_buffer(const pool_buffer&) = delete;
  pool_buffer& operator=(const pool_buffer&) = delete;
  /// Keeps the block when it is large enough (contents undefined either way).
  void resize(std::size_t count)
  {
    const std::size_t bytes = (count > 0 ? count : 1) * sizeof(T);
    if (ptr_ && bytes <= bytes_) return;
    release();
    ptr_ = static_cast<T*>(block_pool::instance(Kind).acquire(bytes, &bytes_));
  }
  /// Gives the block back to the pool (nothing pending may use it).
  void reset() noexcept { release(); }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  T& operator[](std::size_t i) { return ptr_[i]; }
  const T& operator[](std::size_t i) const { return ptr_[i]; }

 private:
  void release() noexcept
  {
    if (ptr_) block_pool::instance(Kind).release(ptr_, bytes_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};
template <typename T>
using pinned_buffer = pool_buffer<T, pool_kind::pinned_host>;
template <typename T>
using scratch_buffer = pool_buffer<T, pool_kind::device>;

/// Process-wide reuse of CUDA events, per device: creating one costs ~1-2 us, and a plan's timer holds 64
/// (spmv_timer), which took 55-116 us of a staged step's decision part on the H100
/// (bench/results/2026-11-24_h100_session16_short_solves_trace.txt). An event goes back to the pool even
/// while recorded work is pending: its next owner records it again before it reads it. Thread-safe.
enum class event_kind { timing, no_timing };
class event_pool {
 public:
  static event_pool& instance(event_kind kind);
  /// An event of the current device.
  cudaEvent_t acquire();
  /// `count` events of `device` (the current one) under one lock (a plan's timer takes 64), appended to `out`;
  /// on failure `out` is left as it was.
  void acquire(int device, int count, std::vector<cudaEvent_t>& out);
  void release(int device, cudaEvent_t e) noexcept;
  /// Creates `count` events of the current device ahead (a context does it once, outside the products).
  void reserve(int count);
  ~event_pool();
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

 private:
  explicit event_pool(event_kind kind) : kind_(kind) {}
  struct impl;
  event_kind kind_;
  impl* impl_ = nullptr;
  impl& get();
};

/// The stream a staged analysis issues its passes on (statistics, locality samples, histogram, strips) with
/// plan_options::analysis_stream: per device and process, non-blocking, at the device's lowest priority,
/// created at the first call (the context makes it). It was meant to keep the passes' device latency out of
/// the solver's next synchronising read-back, but short solves paid the same for the passes on either stream
/// (H100, sessions 23 and 24), so it is off by default. The passes only read the CSR copy's row pointers and
/// column indices and write pooled temporaries and pinned read-backs, which later parts poll; the step makes
/// this stream wait for the products' stream first.
cudaStream_t analysis_stream();

/// The thread that runs background_mode::thread steps: one per process, started once (the context starts
/// it, outside the products: creating a thread inside a short solve costs tens of microseconds there), each
/// step run on its own stream (per device, non-blocking, the device's lowest priority). Before a step it
/// takes every CPU of the process's affinity mask except the one the step was submitted from, when the mask
/// has another, so that the step's host work never competes with the products' thread for its CPU. (On the
/// H100 machine, session 25, the solve holding a step read the same with the placement left to the
/// scheduler: what it pays is the driver and the device, bench/results/2026-11-24_h100_session25_thread_steps.txt.)
/// Never destroyed: the process may end with it waiting.
class step_worker {
 public:
  static step_worker& instance();
  /// Starts the thread (idempotent) and makes the current device's stream.
  void start();
  /// Runs `task` on the worker with the current device's stream; `avoid_cpu` (sched_getcpu() of the caller,
  /// or -1) is left to the caller. Starts the thread if start() was not called.
  void submit(std::function<void(cudaStream_t)> task, int avoid_cpu);
  step_worker(const step_worker&) = delete;
  step_worker& operator=(const step_worker&) = delete;

 private:
  step_worker() = default;
  struct impl;
  std::atomic<impl*> impl_{nullptr};
  std::mutex start_mu_;
};

/// On the step_worker's thread, waits for the device poll and sleep (~20 us per poll) rather than spin in
/// the driver's synchronising calls, leaving its CPU to others while it waits (the short solves beside it
/// read the same either way on the H100, session 25). Elsewhere they are cudaStreamSynchronize and
/// cudaEventSynchronize. (AIJPREDICT_STEP_WORKER_SLEEP=0: the worker spins too.)
void wait_stream(cudaStream_t stream);
void wait_event(cudaEvent_t event);

/// An event marking where a stream's read-back ends: done() polls it, wait() blocks.
class poll_event {
 public:
  poll_event() = default;
  ~poll_event()
  {
    if (event_) event_pool::instance(event_kind::no_timing).release(device_, event_);
  }
  poll_event(const poll_event&) = delete;
  poll_event& operator=(const poll_event&) = delete;
  void record(cudaStream_t stream)
  {
    if (!event_) {
      AIJP_CUDA_CHECK(cudaGetDevice(&device_));
      event_ = event_pool::instance(event_kind::no_timing).acquire();
    }
    AIJP_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  /// Whether the work before record() has completed (true when nothing was recorded).
  bool done() const
  {
    if (!event_) return true;
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: clear it so later checks do not see it
      return false;
    }
    AIJP_CUDA_CHECK(e);
    return true;
  }
  void wait() const
  {
    if (event_) wait_event(event_);
  }
  /// The recorded event (nullptr before the first record()).
  cudaEvent_t get() const { return event_; }
  /// wait() for destructors: before pooled blocks that the recorded work uses go back to their pool. An
  /// error (which the stream's next checked call reports) is ignored here.
  void settle() const noexcept
  {
    if (event_) (void)cudaEventSynchronize(event_);
  }

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = 0;
};

/// The CUDA calls of a staged pass, queued and issued one at a time. Inside a short solve each call costs
/// ~5-9 us of host time on the H100 machine, so a part that issues two or three of them (a memset, a kernel
/// and a read-back) took 11-28 us and was 1-2.5 % of a 1.1 ms solve on its own (session 22): a staged step
/// issues one per part. `kind` tells the pacing which calls put a kernel in the products' stream.
enum class piece_kind { memset, launch, copy, event };
class piece_queue {
 public:
  void push(piece_kind kind, std::function<void()> call) { q_.push_back({kind, std::move(call)}); }
  std::size_t pending() const { return q_.size() - next_; }
  bool empty() const { return pending() == 0; }
  /// Issues the next call; false when none was pending.
  bool issue_one()
  {
    if (empty()) return false;
    piece& p = q_[next_++];
    last_ = p.kind;
    past_event_ = p.kind != piece_kind::event;
    if (empty()) {
      auto call = std::move(p.call);
      q_.clear();
      next_ = 0;
      call();
    } else {
      p.call();
    }
    return true;
  }
  void issue_all()
  {
    while (issue_one()) {
    }
  }
  /// issue_one() with `one`, else issue_all().
  void issue(bool one)
  {
    if (one) {
      issue_one();
    } else {
      issue_all();
    }
  }
  /// For destructors, before the pooled blocks the calls use go back to their pool: waits for `event` (the
  /// pass's, recorded by its event call) or, where calls were issued after it, for all of `stream`.
  void settle(const poll_event& event, cudaStream_t stream) const noexcept
  {
    if (past_event_) {
      (void)cudaStreamSynchronize(stream);
    } else {
      event.settle();
    }
  }
  /// The kind of the call issue_one issued last.
  piece_kind last() const { return last_; }

 private:
  struct piece {
    piece_kind kind;
    std::function<void()> call;
  };
  std::vector<piece> q_;
  std::size_t next_ = 0;
  piece_kind last_ = piece_kind::memset;
  bool past_event_ = false;  // calls issued after the last event call
};

}  // namespace aijp::detail
