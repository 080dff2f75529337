// Owning, move-only device allocation (device_allocate/cudaFree); no-throw release in the destructor. A
// borrowed buffer (device_buffer::borrow, or resize from a layout_reserve) names part of another
// allocation and frees nothing.
#pragma once

#include "cuda_check.hpp"
#include "layout_reserve.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>
#include <utility>

namespace aijp::detail {

/// Allocations from the driver (cudaMalloc, cudaHostAlloc) by device_buffer and the block pools so far, and
/// the sizes of the last few (bytes; negative: page-locked host memory): a staged part that made one says
/// so in its report (each costs ~0.1 ms or more).
struct allocation_log {
  static constexpr int kept = 8;
  std::atomic<long> count{0};
  std::atomic<long long> bytes[kept] = {};
  std::atomic<long long> device_bytes{0};  ///< all device bytes allocated so far (frees not counted)
  void note(long long signed_bytes)
  {
    if (signed_bytes > 0) device_bytes.fetch_add(signed_bytes, std::memory_order_relaxed);
    const long k = count.fetch_add(1, std::memory_order_relaxed);
    bytes[k % kept].store(signed_bytes, std::memory_order_relaxed);
  }
  /// The sizes of the allocations made since count was `before` (the last `kept` of them, oldest first) into
  /// `out`; returns how many it wrote.
  int last(long before, long long (&out)[kept]) const
  {
    const long end = count.load(std::memory_order_relaxed);
    const long first = std::max(before, end - kept);
    int n = 0;
    for (long k = first; k < end; ++k) out[n++] = bytes[k % kept].load(std::memory_order_relaxed);
    return n;
  }
};
inline allocation_log& driver_allocations()
{
  static allocation_log log;
  return log;
}

/// cudaMalloc of `bytes` (noted in driver_allocations). Out of memory, it first gives the unused blocks of the
/// matrix-storage pool back to the driver (async_ops.hpp: a destroyed matrix's CSR copy kept for the next
/// upload) and tries once more; then throws device_out_of_memory.
void* device_allocate(std::size_t bytes);

template <typename T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t count) { resize(count); }
  ~device_buffer() { release(); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)), owned_(std::exchange(o.owned_, true))
  {
  }
  device_buffer& operator=(device_buffer&& o) noexcept
  {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
      owned_ = std::exchange(o.owned_, true);
    }
    return *this;
  }

  /// `count` elements at `p`, inside an allocation someone else owns and keeps alive longer than this.
  static device_buffer borrow(T* p, std::size_t count)
  {
    device_buffer b;
    b.ptr_ = p;
    b.size_ = count;
    b.owned_ = false;
    return b;
  }

  /// Discards the contents; allocates at least one element so the pointer is never null.
  void resize(std::size_t count)
  {
    if (count == size_ && ptr_ && owned_) return;
    release();
    ptr_ = static_cast<T*>(device_allocate((count > 0 ? count : 1) * sizeof(T)));
    size_ = count;
  }
  /// The same, from `reserve` when it is not null and still has room (no cudaMalloc: the buffer then
  /// borrows its region, freeing nothing), else from the driver.
  void resize(std::size_t count, layout_reserve* reserve)
  {
    if (reserve) {
      if (void* p = reserve->take((count > 0 ? count : 1) * sizeof(T))) {
        *this = borrow(static_cast<T*>(p), count);
        return;
      }
    }
    resize(count);
  }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  /// Allocated by this buffer (false: borrowed).
  bool owned() const { return owned_; }

 private:
  void release() noexcept
  {
    if (ptr_ && owned_) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    owned_ = true;
  }
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
  bool owned_ = true;
};

/// An owned non-blocking stream (cudaStreamCreateWithFlags), destroyed without throwing.
class stream_guard {
 public:
  stream_guard() { AIJP_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~stream_guard() { cudaStreamDestroy(s_); }
  stream_guard(const stream_guard&) = delete;
  stream_guard& operator=(const stream_guard&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_{};
};

}  // namespace aijp::detail
