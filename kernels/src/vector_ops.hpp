// Small device-vector operations shared by the executor and the formats.
#pragma once

#include <aijpredict/csr.hpp>

#include "cuda_check.hpp"

#include <cuda_runtime_api.h>

namespace aijp::detail {

/// y = beta y on `stream`; beta == 0 zeroes y without reading it (NaN in y does not propagate), beta == 1
/// does nothing.
template <typename Value>
void scale_or_zero(size_type n, Value beta, Value* y, cudaStream_t stream);

/// CUDA-event timing on one stream: start(), then stop_ms() waits for the stop event and returns the time.
class event_timer {
 public:
  event_timer()
  {
    AIJP_CUDA_CHECK(cudaEventCreate(&start_));
    AIJP_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~event_timer()
  {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;
  void start(cudaStream_t s) { AIJP_CUDA_CHECK(cudaEventRecord(start_, s)); }
  double stop_ms(cudaStream_t s)
  {
    record_stop(s);
    return elapsed_ms();
  }
  /// The stop event alone (work may follow on the host before elapsed_ms waits for it).
  void record_stop(cudaStream_t s) { AIJP_CUDA_CHECK(cudaEventRecord(stop_, s)); }
  /// Waits for the stop event; milliseconds since the start event.
  double elapsed_ms()
  {
    AIJP_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    AIJP_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }
  /// Times `f()` enqueued on `s`.
  template <typename F>
  double time_ms(cudaStream_t s, F&& f)
  {
    start(s);
    f();
    return stop_ms(s);
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

}  // namespace aijp::detail
