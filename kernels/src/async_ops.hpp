// Pieces for device work that must not block the thread issuing it (staged steps, gpu_matrix.hpp):
// read-backs into pinned host memory completed by a polled event, and pooled temporaries.
//
// Why each exists: cudaMemcpyAsync into pageable host memory returns only once the copy is done (the
// stream is drained); cudaFree waits for the whole device; cudaEventSynchronize waits for the stream. A
// staged step issues its kernels and read-backs, returns, and a later call polls the event.
#pragma once

#include "cuda_check.hpp"
#include "device_buffer.hpp"

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

/// Process-wide reuse of device and page-locked host blocks. Allocating costs far more than a staged step may
/// add to a product: cudaHostAlloc about a millisecond, cudaMalloc 0.1 ms whatever its size, the first
/// cudaMallocAsync of a process milliseconds (its memory pool), and cudaFreeHost and cudaFree synchronise the
/// device. Three pools:
/// - pinned_host, device: read-backs and temporaries of staged steps. Blocks come in power-of-two sizes (at
///   least 4 KiB) and go back to the pool, never to the driver, until the process ends.
/// - matrix_storage: the device CSR copies of uploaded matrices (gpu_matrix.hpp), so that a matrix uploaded
///   after another was destroyed reuses its memory instead of paying a cudaMalloc (1-4 us against 100-140 us on
///   the H100, bench/results/2026-11-24_h100_session16_alloc_cost.txt). Finer sizes (eight per power of two
///   above 32 KiB: at most 1/8 wasted) and at most max_idle_storage_bytes kept unused; above it a released
///   block goes back to the driver, and trim() gives back all unused ones (detail::device_allocate, behind every
///   device_buffer and pool allocation, calls it when the driver is out of memory, then tries once more).
/// Blocks above max_pooled_bytes are allocated and freed each time (a conversion's temporaries for a matrix of
/// millions of rows stay out of the pools). Device blocks are kept per device. Thread-safe. A block must be
/// released only once no device work or copy using it is pending.
enum class pool_kind { pinned_host, device, matrix_storage };
class block_pool {
 public:
  static block_pool& instance(pool_kind kind);
  /// A block of at least `bytes` (its size in *size); *reused (if not null): it came from the pool, not
  /// from the driver.
  void* acquire(std::size_t bytes, std::size_t* size, bool* reused = nullptr);
  void release(void* p, std::size_t size) noexcept;
  /// Allocates `count` blocks of `bytes` ahead (a context does it once, outside the products).
  void reserve(std::size_t bytes, int count);
  /// Gives every unused block back to the driver (cudaFree: waits for the device); returns their bytes.
  std::size_t trim() noexcept;
  /// Bytes of the blocks held unused now.
  std::size_t idle_bytes() const;
  /// The block size acquire uses for `bytes` in a pool of `kind`.
  static std::size_t block_size(pool_kind kind, std::size_t bytes);
  static constexpr std::size_t max_pooled_bytes = std::size_t(64) << 20;
  static constexpr std::size_t max_idle_storage_bytes = std::size_t(256) << 20;
  ~block_pool();
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;

 private:
  explicit block_pool(pool_kind kind) : kind_(kind) {}
  void* allocate(std::size_t size);
  void free_to_driver(void* p) noexcept;
  struct impl;
  pool_kind kind_;
  mutable impl* impl_ = nullptr;
  impl& get() const;
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
/// The one allocation of a matrix's device CSR copy and its layout reserve (device_csr::storage): a
/// matrix_storage block, or (pooled false) a cudaMalloc of its own. Releasing it first waits for the device,
/// as the cudaFree it replaces did: products queued on any stream may still read the copy or a layout in its
/// reserve. After a device error the block is not reused (what still reads it is unknown); the pool frees it
/// at exit.
class storage_block {
 public:
  storage_block() = default;
  ~storage_block() { release(); }
  storage_block(const storage_block&) = delete;
  storage_block& operator=(const storage_block&) = delete;
  storage_block(storage_block&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), pooled_(o.pooled_), reused_(o.reused_)
  {
  }
  storage_block& operator=(storage_block&& o) noexcept
  {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      pooled_ = o.pooled_;
      reused_ = o.reused_;
    }
    return *this;
  }
  /// At least `bytes` (what it held is released first); throws device_out_of_memory.
  void allocate(std::size_t bytes, bool pooled)
  {
    release();
    pooled_ = pooled;
    reused_ = false;
    if (pooled) {
      ptr_ = static_cast<unsigned char*>(block_pool::instance(pool_kind::matrix_storage).acquire(bytes, &bytes_, &reused_));
    } else {
      ptr_ = static_cast<unsigned char*>(device_allocate(bytes > 0 ? bytes : 1));
      bytes_ = bytes;
    }
  }
  unsigned char* data() { return ptr_; }
  /// It came from the pool (a destroyed matrix's memory), not from the driver.
  bool reused() const { return reused_; }

 private:
  void release() noexcept
  {
    if (!ptr_) return;
    if (!pooled_) {
      (void)cudaFree(ptr_);
    } else if (cudaDeviceSynchronize() == cudaSuccess) {
      block_pool::instance(pool_kind::matrix_storage).release(ptr_, bytes_);
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }
  unsigned char* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  bool pooled_ = false;
  bool reused_ = false;
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
