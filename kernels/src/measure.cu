#include <aijpredict/measure.hpp>

#include "cuda_check.hpp"
#include "vector_ops.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <string>

namespace aijp {
namespace {

__device__ unsigned long long global_ns()
{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Holds its stream until the host writes a non-zero `*release` (page-locked host memory), or
/// `timeout_ns` passes; then `*timed_out` says which.
__global__ void gate_kernel(const volatile int* release, unsigned long long timeout_ns, volatile int* timed_out)
{
  const unsigned long long t0 = global_ns();
  while (*release == 0) {
    if (global_ns() - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
  }
}

/// The gate's two flags in mapped page-locked memory.
class gate {
 public:
  gate()
  {
    AIJP_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flags_), 2 * sizeof(int), cudaHostAllocMapped));
    flags_[0] = flags_[1] = 0;
    const cudaError_t e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflags_), flags_, 0);
    if (e != cudaSuccess) {
      cudaFreeHost(flags_);
      detail::throw_cuda(e, "cudaHostGetDevicePointer", __FILE__, __LINE__);
    }
  }
  ~gate()
  {
    release_flag() = 1;  // a gate left closed by an exception opens (cudaFreeHost waits for the device)
    cudaFreeHost(flags_);
  }
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  /// Queues the gate on `s` (closed).
  void close(cudaStream_t s, double timeout_ms)
  {
    release_flag() = 0;
    timed_out_flag() = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    gate_kernel<<<1, 1, 0, s>>>(dflags_, static_cast<unsigned long long>(timeout_ms * 1e6), dflags_ + 1);
    AIJP_CUDA_CHECK(cudaGetLastError());
  }
  void open()
  {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    release_flag() = 1;
  }
  /// After the stream passed the gate: whether it opened by the timeout.
  bool timed_out() const { return timed_out_flag() != 0; }

 private:
  volatile int& release_flag() const { return reinterpret_cast<volatile int*>(flags_)[0]; }
  volatile int& timed_out_flag() const { return reinterpret_cast<volatile int*>(flags_)[1]; }
  int* flags_ = nullptr;
  int* dflags_ = nullptr;
};

// Times `run(n)` (n products back to back on `stream`) as time_spmv describes: a probe, untimed products, then
// batches of at least min_sample_ms, gated or not.
template <typename Run>
timing_result time_batches(const Run& run, cudaStream_t stream, const timing_options& o)
{
  detail::event_timer ev;
  // Probe first: a product slower than a tenth of the budget (a thread-per-row layout on a matrix with a
  // huge row) gets one warm-up and three samples, so a pathological format costs seconds, not minutes.
  const double probe_ms = ev.time_ms(stream, [&] { run(1); });
  const bool slow = probe_ms > o.max_total_ms / 10;
  run(slow ? 1 : std::max(1, o.warmup));
  timing_result r;
  // Batches of at least min_sample_ms each, but the whole measurement within about max_total_ms.
  const double per = std::max(probe_ms, 1e-4);
  const int by_sample = static_cast<int>(std::ceil(o.min_sample_ms / per));
  const int by_total = static_cast<int>(o.max_total_ms / (per * std::max(1, o.min_samples)));
  r.batch = std::max(1, std::min({1000, by_sample, std::max(1, by_total)}));
  std::vector<double> t;
  const int wanted = slow ? 3 : std::max(1, o.min_samples);
  if (o.gated) {
    // Each sample: gate, start event, the batch, stop event, then the gate opens; the events then bracket
    // products the device runs back to back. A timed-out gate means the host did not issue the batch
    // within the timeout (a full launch queue): that sample is taken again with half the batch.
    gate g;
    g.close(stream, o.gate_timeout_ms);  // first launch of the gate (module load) outside any sample
    g.open();
    AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
    r.batch = std::max(1, std::min(r.batch, o.gate_max_products));
    while (static_cast<int>(t.size()) < wanted) {
      g.close(stream, o.gate_timeout_ms);
      ev.start(stream);
      run(r.batch);
      ev.record_stop(stream);
      g.open();
      const double ms = ev.elapsed_ms();
      if (g.timed_out()) {
        ++r.gate_timeouts;
        if (r.batch == 1 || r.gate_timeouts > 8 * wanted) {
          throw device_error("time_spmv: the gate timed out with " + std::to_string(r.batch) +
                                 " products behind it; raise timing_options::gate_timeout_ms",
                             __FILE__, __LINE__);
        }
        r.batch = std::max(1, r.batch / 2);
        continue;
      }
      t.push_back(ms * 1e3 / r.batch);
    }
  } else {
    for (int i = 0; i < wanted; ++i) {
      t.push_back(ev.time_ms(stream, [&] { run(r.batch); }) * 1e3 / r.batch);
    }
  }
  std::sort(t.begin(), t.end());
  r.samples = static_cast<int>(t.size());
  r.median_us = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  r.min_us = t.front();
  return r;
}

// The kernel of measure_launch_gap: does nothing.
__global__ void empty_kernel() {}

}  // namespace

template <typename Value>
timing_result time_spmv(gpu_matrix<Value>& m, const Value* x, Value* y, cudaStream_t stream, const timing_options& o)
{
  // Online timing would add event records between the back-to-back products and feed these forced runs to
  // the corrections: pause it for the measurement.
  struct pause_online {
    gpu_matrix<Value>& plan;
    bool was;
    explicit pause_online(gpu_matrix<Value>& g) : plan(g), was(g.online_timing()) { plan.set_online_timing(false); }
    ~pause_online() { plan.set_online_timing(was); }
  } pause(m);
  return time_batches([&](int n) {
    for (int i = 0; i < n; ++i) m.apply(Value(1), x, Value(0), y, stream);
  }, stream, o);
}

timing_result measure_launch_gap(cudaStream_t stream, const device_properties& device, const timing_options& o)
{
  // As many blocks as a small product launches: one wave of 128-thread blocks.
  const unsigned blocks = static_cast<unsigned>(std::max(1, device.sm_count));
  return time_batches([&](int n) {
    for (int i = 0; i < n; ++i) empty_kernel<<<blocks, 128, 0, stream>>>();
    AIJP_CUDA_CHECK(cudaGetLastError());
  }, stream, o);
}

template timing_result time_spmv<double>(gpu_matrix<double>&, const double*, double*, cudaStream_t, const timing_options&);
template timing_result time_spmv<float>(gpu_matrix<float>&, const float*, float*, cudaStream_t, const timing_options&);

}  // namespace aijp
