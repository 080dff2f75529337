// Timing several plans of one matrix in interleaved rounds (aijp_bench's head to head, aijp_accuracy): round
// r times every plan once, in the order rotated by r, so that a disturbance of the (shared) machine hits one
// round of every plan alike instead of one plan's only measurement.
#pragma once

#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/measure.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace aijp::bench {

/// Per plan, its `rounds` times (aijp::time_spmv's median with `to`, microseconds); empty for a null plan.
template <typename T>
std::vector<std::vector<double>> interleaved_rounds(const std::vector<std::unique_ptr<gpu_matrix<T>>>& plans, int rounds,
                                                    const T* x, T* y, cudaStream_t s, const timing_options& to = {})
{
  const std::size_t n = plans.size();
  std::vector<std::vector<double>> us(n);
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t k = (i + static_cast<std::size_t>(r)) % n;
      if (plans[k]) us[k].push_back(time_spmv(*plans[k], x, y, s, to).median_us);
    }
  }
  return us;
}

}  // namespace aijp::bench
