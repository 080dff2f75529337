// Device memory set aside beside a matrix's CSR copy for the layouts its conversions will build.
//
// Why: a cudaMalloc costs ~0.1-0.3 ms of host time whatever its size (bench/results/
// 2026-11-24_h100_session16_alloc_cost.txt), and in a staged conversion that host time lands inside one
// product of a short solve (a 150 MB layout: 195-286 us in one product of ~80 us device time). The CSR
// copy is uploaded in one allocation at setup anyway; making it larger by the reserve costs nothing more
// there, and a layout taken from the reserve later costs a few nanoseconds. Freeing such a layout costs
// nothing either (cudaFree waits for the whole device).
//
// Regions are handed out from the bottom up and never handed out twice: a layout that was freed (a plan
// replaced, an exploration lost) may still be read by products queued before it went, on any stream, and
// nothing records when they are done. So the reserve serves the first conversions of a matrix, and those
// after it is used up allocate from the driver as before. Plain C++ (no CUDA): it only does arithmetic on
// addresses that its owner allocated. Thread-safe (a background step's worker takes from it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace aijp::detail {

class layout_reserve {
 public:
  /// Regions start at multiples of this many bytes (cudaMalloc's alignment; 16-byte vector loads need 16).
  static constexpr std::size_t alignment = 256;

  /// `bytes` bytes at `base` (aligned to `alignment`), owned by the caller, who keeps them alive longer than
  /// any region taken from here.
  layout_reserve(void* base, std::size_t bytes) : base_(static_cast<unsigned char*>(base)), size_(bytes) {}
  layout_reserve(const layout_reserve&) = delete;
  layout_reserve& operator=(const layout_reserve&) = delete;

  /// `bytes` bytes (at least one) at an aligned address, or nullptr when they no longer fit.
  void* take(std::size_t bytes)
  {
    const std::size_t want = round_up(bytes > 0 ? bytes : 1);
    std::lock_guard<std::mutex> lock(mutex_);
    if (want > size_ - top_) return nullptr;
    void* p = base_ + top_;
    top_ += want;
    ++regions_;
    return p;
  }
  /// Bytes still free for take().
  std::size_t left() const
  {
    std::lock_guard<std::mutex> lock(mutex_);
    return size_ - top_;
  }
  std::size_t size() const { return size_; }
  /// Bytes handed out so far (alignment included) and how many regions.
  std::size_t used() const
  {
    std::lock_guard<std::mutex> lock(mutex_);
    return top_;
  }
  int regions() const
  {
    std::lock_guard<std::mutex> lock(mutex_);
    return regions_;
  }
  static constexpr std::size_t round_up(std::size_t bytes) { return (bytes + alignment - 1) / alignment * alignment; }

 private:
  unsigned char* base_;
  std::size_t size_;
  std::size_t top_ = 0;
  int regions_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace aijp::detail
