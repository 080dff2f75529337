// block_pool and event_pool (async_ops.hpp): page-locked host and device blocks, and events, kept for reuse.
#include "async_ops.hpp"
#include "device_buffer.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace aijp::detail {

struct block_pool::impl {
  std::mutex mutex;
  std::map<std::pair<int, std::size_t>, std::vector<void*>> free;  // by device (-1: host) and block size
  std::vector<void*> all;                                         // every block kept, for the destructor
  std::size_t idle = 0;                                           // bytes in `free`
};

block_pool& block_pool::instance(pool_kind kind)
{
  static block_pool pinned(pool_kind::pinned_host);
  static block_pool device(pool_kind::device);
  static block_pool storage(pool_kind::matrix_storage);
  switch (kind) {
    case pool_kind::pinned_host: return pinned;
    case pool_kind::device: return device;
    default: return storage;
  }
}

block_pool::impl& block_pool::get() const
{
  static std::once_flag once[3];
  std::call_once(once[static_cast<int>(kind_)], [this] { impl_ = new impl; });
  return *impl_;
}

block_pool::~block_pool()
{
  // At exit the CUDA runtime may already be torn down: the errors are ignored.
  if (!impl_) return;
  for (void* p : impl_->all) free_to_driver(p);
  delete impl_;
}

std::size_t block_pool::block_size(pool_kind kind, std::size_t bytes)
{
  std::size_t size = 4096;
  while (size < bytes) size *= 2;
  if (kind != pool_kind::matrix_storage || size <= 32768) return size;
  const std::size_t step = size / 16;  // bytes > size / 2: eight sizes between size / 2 and size
  return (bytes + step - 1) / step * step;
}

void block_pool::free_to_driver(void* p) noexcept
{
  (void)(kind_ == pool_kind::pinned_host ? cudaFreeHost(p) : cudaFree(p));
}

void* block_pool::acquire(std::size_t bytes, std::size_t* size, bool* reused)
{
  impl& m = get();
  const std::size_t s = block_size(kind_, bytes);
  *size = s;
  if (reused) *reused = false;
  if (s > max_pooled_bytes) return allocate(s);  // not kept: released to the driver
  int device = -1;
  if (kind_ != pool_kind::pinned_host) AIJP_CUDA_CHECK(cudaGetDevice(&device));
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.free.find({device, s});
    if (it != m.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      m.idle -= s;
      if (reused) *reused = true;
      return p;
    }
  }
  void* p = allocate(s);
  std::lock_guard<std::mutex> lock(m.mutex);
  try {
    m.all.push_back(p);
  } catch (...) {
    free_to_driver(p);
    throw;
  }
  return p;
}

void* device_allocate(std::size_t bytes)
{
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    if (block_pool::instance(pool_kind::matrix_storage).trim() > 0) e = cudaMalloc(&p, bytes);
  }
  if (e != cudaSuccess) throw_cuda(e, "cudaMalloc", __FILE__, __LINE__);
  driver_allocations().note(static_cast<long long>(bytes));
  return p;
}

void* block_pool::allocate(std::size_t size)
{
  if (kind_ != pool_kind::pinned_host) return device_allocate(size);
  void* p = nullptr;
  AIJP_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocDefault));
  driver_allocations().note(-static_cast<long long>(size));
  return p;
}

void block_pool::release(void* p, std::size_t size) noexcept
{
  if (size > max_pooled_bytes) {  // freeing waits for the device: nothing pending can still use it
    free_to_driver(p);
    return;
  }
  int device = -1;
  if (kind_ != pool_kind::pinned_host && cudaGetDevice(&device) != cudaSuccess) device = -2;  // never matched
  impl& m = get();
  std::unique_lock<std::mutex> lock(m.mutex);
  const bool over = kind_ == pool_kind::matrix_storage && m.idle + size > max_idle_storage_bytes;
  if (!over) {
    try {
      m.free[{device, size}].push_back(p);
      m.idle += size;
      return;
    } catch (...) {  // out of host memory for the list: back to the driver
    }
  }
  m.all.erase(std::remove(m.all.begin(), m.all.end(), p), m.all.end());
  lock.unlock();
  free_to_driver(p);
}

std::size_t block_pool::trim() noexcept
{
  if (!impl_) return 0;
  impl& m = get();
  std::vector<void*> unused;
  std::size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    try {
      for (auto& entry : m.free) {
        for (void* p : entry.second) unused.push_back(p);
        bytes += entry.first.second * entry.second.size();
      }
    } catch (...) {  // out of host memory for the list: nothing trimmed
      return 0;
    }
    m.free.clear();
    m.idle = 0;
    m.all.erase(std::remove_if(m.all.begin(), m.all.end(),
                               [&](void* p) { return std::find(unused.begin(), unused.end(), p) != unused.end(); }),
                m.all.end());
  }
  for (void* p : unused) free_to_driver(p);
  return bytes;
}

std::size_t block_pool::idle_bytes() const
{
  impl& m = get();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.idle;
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

struct event_pool::impl {
  std::mutex mutex;
  std::map<int, std::vector<cudaEvent_t>> free;  // by device
  std::vector<std::pair<int, cudaEvent_t>> all;
};

event_pool& event_pool::instance(event_kind kind)
{
  static event_pool timing(event_kind::timing);
  static event_pool no_timing(event_kind::no_timing);
  return kind == event_kind::timing ? timing : no_timing;
}

event_pool::impl& event_pool::get()
{
  static std::once_flag once[2];
  std::call_once(once[kind_ == event_kind::no_timing], [this] { impl_ = new impl; });
  return *impl_;
}

event_pool::~event_pool()
{
  // At exit the CUDA runtime may already be torn down: the errors are ignored.
  if (!impl_) return;
  for (const auto& e : impl_->all) (void)cudaEventDestroy(e.second);
  delete impl_;
}

cudaEvent_t event_pool::acquire()
{
  impl& m = get();
  int device = 0;
  AIJP_CUDA_CHECK(cudaGetDevice(&device));
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto& list = m.free[device];
    if (!list.empty()) {
      cudaEvent_t e = list.back();
      list.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  // Timing events: default flags (no blocking sync); the others also without timing, which records faster.
  AIJP_CUDA_CHECK(cudaEventCreateWithFlags(&e, kind_ == event_kind::timing ? cudaEventDefault : cudaEventDisableTiming));
  std::lock_guard<std::mutex> lock(m.mutex);
  try {
    m.all.emplace_back(device, e);
  } catch (...) {
    (void)cudaEventDestroy(e);
    throw;
  }
  return e;
}

void event_pool::acquire(int device, int count, std::vector<cudaEvent_t>& out)
{
  impl& m = get();
  const std::size_t before = out.size();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto& list = m.free[device];
    while (count > 0 && !list.empty()) {
      out.push_back(list.back());
      list.pop_back();
      --count;
    }
  }
  try {
    for (; count > 0; --count) out.push_back(acquire());  // beyond what the pool held: created
  } catch (...) {  // gives back what this call took: `out` is as it was
    for (std::size_t k = before; k < out.size(); ++k) release(device, out[k]);
    out.resize(before);
    throw;
  }
}

void event_pool::release(int device, cudaEvent_t e) noexcept
{
  impl& m = get();
  std::lock_guard<std::mutex> lock(m.mutex);
  try {
    m.free[device].push_back(e);
  } catch (...) {  // out of host memory for the list: the event stays created, unused
  }
}

void event_pool::reserve(int count)
{
  int device = 0;
  AIJP_CUDA_CHECK(cudaGetDevice(&device));
  std::vector<cudaEvent_t> events;
  acquire(device, count, events);
  for (cudaEvent_t e : events) release(device, e);
}

namespace {
// A non-blocking stream of the current device at its lowest priority.
cudaStream_t make_background_stream()
{
  int least = 0, greatest = 0;
  AIJP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nullptr;
  AIJP_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, least));
  return s;
}
}  // namespace

cudaStream_t analysis_stream()
{
  int device = 0;
  AIJP_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mu;
  static std::map<int, cudaStream_t> streams;  // never destroyed: the runtime may be gone at exit
  std::lock_guard<std::mutex> lock(mu);
  const auto it = streams.find(device);
  if (it != streams.end()) return it->second;
  const cudaStream_t s = make_background_stream();
  streams.emplace(device, s);
  return s;
}

}  // namespace aijp::detail

namespace aijp::detail {

namespace {
thread_local bool worker_thread = false;
bool worker_sleeps()
{
  static const bool sleeps = [] {
    const char* e = std::getenv("AIJPREDICT_STEP_WORKER_SLEEP");
    return !(e && e[0] == '0');
  }();
  return sleeps;
}
}  // namespace

namespace {
// Polls `query` (cudaStreamQuery or cudaEventQuery of one object) with a sleep between polls until it no
// longer says not ready; reports any other error.
template <typename Query>
void poll_and_sleep(Query query)
{
  for (;;) {
    const cudaError_t e = query();
    if (e != cudaErrorNotReady) {
      AIJP_CUDA_CHECK(e);
      return;
    }
    (void)cudaGetLastError();  // not an error: clear it so later checks do not see it
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}
}  // namespace

void wait_stream(cudaStream_t stream)
{
  if (worker_thread && worker_sleeps()) {
    poll_and_sleep([stream] { return cudaStreamQuery(stream); });
  } else {
    AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

void wait_event(cudaEvent_t event)
{
  if (worker_thread && worker_sleeps()) {
    poll_and_sleep([event] { return cudaEventQuery(event); });
  } else {
    AIJP_CUDA_CHECK(cudaEventSynchronize(event));
  }
}

struct step_worker::impl {
  std::mutex mu;
  std::condition_variable cv;
  struct item {
    std::function<void(cudaStream_t)> task;
    int device = 0;
    int avoid_cpu = -1;
  };
  std::deque<item> queue;
  std::map<int, cudaStream_t> streams;  // per device; never destroyed (the runtime may be gone at exit)
  std::set<int> ready_devices;          // devices start() prepared the worker for
#if defined(__linux__)
  cpu_set_t inherited{};  // the mask the thread started with (the process's, from the context's thread)
  bool have_inherited = false;  // false also with AIJPREDICT_STEP_WORKER_PIN=0: the scheduler places it
  int placed_off = -2;    // the CPU its mask leaves out now (-1: none left out; -2: not placed yet)
#endif

  cudaStream_t stream_for(int device)
  {
    const auto it = streams.find(device);
    if (it != streams.end()) return it->second;
    const cudaStream_t s = make_background_stream();
    streams.emplace(device, s);
    return s;
  }

  // Every CPU the thread started with but `avoid` (where that leaves one); else the inherited mask (one
  // system call, only when the CPU to leave out changed). Called by the worker, with mu held.
  void place(int avoid)
  {
#if defined(__linux__)
    if (!have_inherited) return;
    cpu_set_t set = inherited;
    int off = -1;
    if (avoid >= 0 && avoid < CPU_SETSIZE && CPU_ISSET(avoid, &set) && CPU_COUNT(&set) >= 2) {
      CPU_CLR(avoid, &set);
      off = avoid;
    }
    if (off == placed_off) return;
    if (sched_setaffinity(0, sizeof(set), &set) == 0) placed_off = off;  // a refusal leaves the scheduler's choice
#else
    (void)avoid;
#endif
  }

  void loop()
  {
    worker_thread = true;
    for (;;) {
      item it;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [this] { return !queue.empty(); });
        it = std::move(queue.front());
        queue.pop_front();
        place(it.avoid_cpu);
      }
      cudaStream_t s = nullptr;
      try {
        AIJP_CUDA_CHECK(cudaSetDevice(it.device));
        std::lock_guard<std::mutex> lock(mu);
        s = stream_for(it.device);
      } catch (...) {
        s = nullptr;  // the task sees no stream and reports the error itself
      }
      it.task(s);  // tasks catch their own errors
    }
  }
};

step_worker& step_worker::instance()
{
  static step_worker* w = new step_worker();  // never destroyed: its thread may still wait at exit
  return *w;
}

void step_worker::start()
{
  int device = 0;
  AIJP_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(start_mu_);
  if (!impl_.load()) {
    auto* m = new impl();
#if defined(__linux__)
    const char* pin = std::getenv("AIJPREDICT_STEP_WORKER_PIN");
    m->have_inherited = !(pin && pin[0] == '0') && sched_getaffinity(0, sizeof(m->inherited), &m->inherited) == 0;
#endif
    std::thread([m] { m->loop(); }).detach();
    impl_.store(m);
  }
  impl* m = impl_.load();
  {
    std::lock_guard<std::mutex> lk(m->mu);
    if (m->ready_devices.count(device)) return;
  }
  // The worker's own first CUDA calls for this device (its runtime state, the stream, a first use of it)
  // here, outside the products, rather than at its first step inside a solve. Placed off this thread's CPU
  // now (the thread that makes the context runs the products), so that it does not go to sleep on the
  // products' CPU and wake there at its first hand-over. (On the H100 machine this did not change what the
  // staged hand-over costs its product, 25-58 us of host time, where waking a worker asleep on another CPU
  // costs the caller 2-3 us: the cause is still open, bench/results/2026-11-25_h100_session28_trace.txt.)
  auto ready = std::make_shared<std::promise<void>>();
  auto done = ready->get_future();
  submit([ready](cudaStream_t s) {
    if (s) (void)cudaStreamQuery(s);
    ready->set_value();
  }, current_cpu());
  done.wait();
  std::lock_guard<std::mutex> lk(m->mu);
  m->ready_devices.insert(device);
}

void step_worker::submit(std::function<void(cudaStream_t)> task, int avoid_cpu)
{
  int device = 0;
  AIJP_CUDA_CHECK(cudaGetDevice(&device));
  if (!impl_.load(std::memory_order_acquire)) start();
  impl* m = impl_.load(std::memory_order_acquire);
  {
    std::lock_guard<std::mutex> lock(m->mu);
    m->queue.push_back({std::move(task), device, avoid_cpu});
  }
  m->cv.notify_one();
}

}  // namespace aijp::detail
