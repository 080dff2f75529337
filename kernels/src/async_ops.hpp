// Pieces for device work that must not block the thread issuing it (staged steps, gpu_matrix.hpp):
// read-backs into pinned host memory completed by a polled event, and stream-ordered temporaries.
//
// Why each exists: cudaMemcpyAsync into pageable host memory returns only once the copy is done (the
// stream is drained); cudaFree waits for the whole device; cudaEventSynchronize waits for the stream. A
// staged step issues its kernels and read-backs, returns, and a later call polls the event.
#pragma once

#include "cuda_check.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace aijp::detail {

/// Process-wide reuse of page-locked host blocks: cudaHostAlloc costs about a millisecond and cudaFreeHost
/// synchronises the device, both far more than a staged step may add to a product. Blocks come in
/// power-of-two sizes (at least 4 KiB) and go back to the pool, never to the driver, until the process ends.
/// Thread-safe. A block must be released only once no copy into it is pending.
class pinned_pool {
 public:
  static pinned_pool& instance();
  /// A block of at least `bytes` (its size in *size).
  void* acquire(std::size_t bytes, std::size_t* size);
  void release(void* p, std::size_t size) noexcept;
  /// Allocates `count` blocks of `bytes` ahead (a context does it once, outside the products).
  void reserve(std::size_t bytes, int count);

 private:
  pinned_pool() = default;
  ~pinned_pool();
  struct impl;
  impl* impl_ = nullptr;
  impl& get();
};

/// Page-locked host array from pinned_pool; a device-to-host cudaMemcpyAsync into it does not wait. Its
/// owner must know that no copy into it is pending when it is destroyed or resized.
template <typename T>
class pinned_buffer {
 public:
  pinned_buffer() = default;
  explicit pinned_buffer(std::size_t count) { resize(count); }
  ~pinned_buffer() { release(); }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  /// Keeps the block when it is large enough (contents undefined either way).
  void resize(std::size_t count)
  {
    const std::size_t bytes = (count > 0 ? count : 1) * sizeof(T);
    if (ptr_ && bytes <= bytes_) return;
    release();
    ptr_ = static_cast<T*>(pinned_pool::instance().acquire(bytes, &bytes_));
  }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  T& operator[](std::size_t i) { return ptr_[i]; }
  const T& operator[](std::size_t i) const { return ptr_[i]; }

 private:
  void release() noexcept
  {
    if (ptr_) pinned_pool::instance().release(ptr_, bytes_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// An event marking where a stream's read-back ends: done() polls it, wait() blocks.
class poll_event {
 public:
  poll_event() = default;
  ~poll_event()
  {
    if (event_) (void)cudaEventDestroy(event_);
  }
  poll_event(const poll_event&) = delete;
  poll_event& operator=(const poll_event&) = delete;
  void record(cudaStream_t stream)
  {
    if (!event_) AIJP_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
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
    if (event_) AIJP_CUDA_CHECK(cudaEventSynchronize(event_));
  }

 private:
  cudaEvent_t event_ = nullptr;
};

/// Whether the current device has stream-ordered allocation (cudaMallocAsync); asked once per process.
inline bool stream_ordered_allocation()
{
  static const bool supported = [] {
    int device = 0, pools = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return pools != 0;
  }();
  return supported;
}

/// Device temporary allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync on the stream it
/// was made on, which must outlive it), so neither call waits for the device; plain cudaMalloc / cudaFree
/// where the device has no memory pools.
template <typename T>
class stream_buffer {
 public:
  stream_buffer() = default;
  stream_buffer(std::size_t count, cudaStream_t stream) { resize(count, stream); }
  ~stream_buffer() { release(); }
  stream_buffer(const stream_buffer&) = delete;
  stream_buffer& operator=(const stream_buffer&) = delete;
  /// Discards the contents (the old allocation is freed in stream order first).
  void resize(std::size_t count, cudaStream_t stream)
  {
    if (ptr_ && count <= size_ && stream == stream_) return;
    release();
    void* p = nullptr;
    const std::size_t bytes = (count > 0 ? count : 1) * sizeof(T);
    if (stream_ordered_allocation()) {
      AIJP_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
      async_ = true;
    } else {
      AIJP_CUDA_CHECK(cudaMalloc(&p, bytes));
      async_ = false;
    }
    ptr_ = static_cast<T*>(p);
    size_ = count;
    stream_ = stream;
  }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  std::size_t size() const { return size_; }

 private:
  void release() noexcept
  {
    if (ptr_) (void)(async_ ? cudaFreeAsync(ptr_, stream_) : cudaFree(ptr_));
    ptr_ = nullptr;
    size_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
  bool async_ = false;
};

}  // namespace aijp::detail
