#include <aijpredict/measure.hpp>

#include "cuda_check.hpp"
#include "vector_ops.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace aijp {


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
  detail::event_timer ev;
  const auto run = [&](int n) {
    for (int i = 0; i < n; ++i) m.apply(Value(1), x, Value(0), y, stream);
  };
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
  for (int i = 0; i < (slow ? 3 : std::max(1, o.min_samples)); ++i) {
    t.push_back(ev.time_ms(stream, [&] { run(r.batch); }) * 1e3 / r.batch);
  }
  std::sort(t.begin(), t.end());
  r.samples = static_cast<int>(t.size());
  r.median_us = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  r.min_us = t.front();
  return r;
}

template timing_result time_spmv<double>(gpu_matrix<double>&, const double*, double*, cudaStream_t, const timing_options&);
template timing_result time_spmv<float>(gpu_matrix<float>&, const float*, float*, cudaStream_t, const timing_options&);

}  // namespace aijp
