// block_pool (async_ops.hpp): page-locked host and device blocks kept for reuse.
#include "async_ops.hpp"

#include <map>
#include <mutex>
#include <vector>

namespace aijp::detail {

struct block_pool::impl {
  std::mutex mutex;
  std::map<std::size_t, std::vector<void*>> free;  // by block size
  std::vector<void*> all;
};

block_pool& block_pool::instance(pool_kind kind)
{
  static block_pool pinned(pool_kind::pinned_host);
  static block_pool device(pool_kind::device);
  return kind == pool_kind::pinned_host ? pinned : device;
}

block_pool::impl& block_pool::get()
{
  static std::once_flag once[2];
  std::call_once(once[kind_ == pool_kind::device], [this] { impl_ = new impl; });
  return *impl_;
}

block_pool::~block_pool()
{
  // At exit the CUDA runtime may already be torn down: the errors are ignored.
  if (!impl_) return;
  for (void* p : impl_->all) (void)(kind_ == pool_kind::pinned_host ? cudaFreeHost(p) : cudaFree(p));
  delete impl_;
}

namespace {
std::size_t block_size_for(std::size_t bytes)
{
  std::size_t size = 4096;
  while (size < bytes) size *= 2;
  return size;
}
}  // namespace

void* block_pool::acquire(std::size_t bytes, std::size_t* size)
{
  impl& m = get();
  const std::size_t s = block_size_for(bytes);
  *size = s;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto& list = m.free[s];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
  }
  void* p = nullptr;
  if (kind_ == pool_kind::pinned_host) {
    AIJP_CUDA_CHECK(cudaHostAlloc(&p, s, cudaHostAllocDefault));
  } else {
    AIJP_CUDA_CHECK(cudaMalloc(&p, s));
  }
  std::lock_guard<std::mutex> lock(m.mutex);
  m.all.push_back(p);
  return p;
}

void block_pool::release(void* p, std::size_t size) noexcept
{
  impl& m = get();
  std::lock_guard<std::mutex> lock(m.mutex);
  try {
    m.free[size].push_back(p);
  } catch (...) {  // out of host memory for the list: the block stays allocated, unused
  }
}

void block_pool::reserve(std::size_t bytes, int count)
{
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (int i = 0; i < count; ++i) {
    std::size_t size = 0;
    blocks.emplace_back(acquire(bytes, &size), size);
  }
  for (const auto& b : blocks) release(b.first, b.second);
}

}  // namespace aijp::detail
