// pinned_pool (async_ops.hpp): page-locked host blocks kept for reuse.
#include "async_ops.hpp"

#include <map>
#include <mutex>
#include <vector>

namespace aijp::detail {

struct pinned_pool::impl {
  std::mutex mutex;
  std::map<std::size_t, std::vector<void*>> free;  // by block size
  std::vector<void*> all;
};

pinned_pool& pinned_pool::instance()
{
  static pinned_pool pool;
  return pool;
}

pinned_pool::impl& pinned_pool::get()
{
  static std::once_flag once;
  std::call_once(once, [this] { impl_ = new impl; });
  return *impl_;
}

pinned_pool::~pinned_pool()
{
  // At exit the CUDA runtime may already be torn down: cudaFreeHost's error is ignored.
  if (!impl_) return;
  for (void* p : impl_->all) (void)cudaFreeHost(p);
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

void* pinned_pool::acquire(std::size_t bytes, std::size_t* size)
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
  AIJP_CUDA_CHECK(cudaHostAlloc(&p, s, cudaHostAllocDefault));
  std::lock_guard<std::mutex> lock(m.mutex);
  m.all.push_back(p);
  return p;
}

void pinned_pool::release(void* p, std::size_t size) noexcept
{
  impl& m = get();
  std::lock_guard<std::mutex> lock(m.mutex);
  try {
    m.free[size].push_back(p);
  } catch (...) {  // out of host memory for the list: the block stays allocated, unused
  }
}

void pinned_pool::reserve(std::size_t bytes, int count)
{
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (int i = 0; i < count; ++i) {
    std::size_t size = 0;
    blocks.emplace_back(acquire(bytes, &size), size);
  }
  for (const auto& b : blocks) release(b.first, b.second);
}

}  // namespace aijp::detail
