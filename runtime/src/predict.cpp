#include <aijpredict/predict.hpp>

#include <algorithm>
#include <limits>

namespace aijp {

namespace {

constexpr int sell_slice_height = 32;  // must match kernels/src/sell.cu

double csr_bytes(const row_stats& s, int vb)
{
  const double matrix = static_cast<double>(s.nnz) * (vb + sizeof(index_type)) + (s.rows + 1) * 4.0;
  const double x = static_cast<double>(std::min<size_type>(s.cols, s.nnz)) * vb;  // each x entry once at best
  const double y = static_cast<double>(s.rows) * vb;
  return matrix + x + y;
}

}  // namespace

std::vector<format_estimate> predict_bandwidth_model(const prediction_input& in, const bandwidth_model_params& p,
                                                     const std::vector<format_id>& candidates)
{
  const row_stats& s = in.stats;
  const int vb = in.value_bytes;
  const double bw = p.stream_read_gbs * 1e3;  // bytes per microsecond
  std::vector<format_estimate> out;
  for (format_id f : candidates) {
    format_estimate e;
    e.format = f;
    switch (f) {
      case format_id::cusparse_csr:
        e.feasible = true;
        e.bytes = csr_bytes(s, vb);
        e.predicted_us = std::max(p.cusparse_csr_overhead_us, p.launch_us + e.bytes / (bw * p.cusparse_csr_efficiency));
        break;
      case format_id::sell_c_sigma: {
        // Natural row order (sigma = 1): slices are the groups of 32 consecutive rows, so the padded entry
        // count is exactly 32 x N_iter (Eq. 1 of the PELLR paper).
        const double padded = static_cast<double>(sell_slice_height) * s.n_iter_natural;
        const size_type slices = (s.rows + sell_slice_height - 1) / sell_slice_height;
        e.device_bytes = padded * (vb + sizeof(index_type)) + (slices + 1) * 8.0;
        e.bytes = e.device_bytes + static_cast<double>(std::min<size_type>(s.cols, s.nnz)) * vb + s.rows * double(vb);
        if (padded > static_cast<double>(std::numeric_limits<index_type>::max()) * 64) {
          e.reason = "padded size exceeds the index range";
        } else if (in.free_memory_bytes > 0 && e.device_bytes > 0.8 * static_cast<double>(in.free_memory_bytes)) {
          e.reason = "padded layout needs " + std::to_string(static_cast<long long>(e.device_bytes / 1048576)) +
                     " MiB, more than 80% of free device memory";
        } else {
          e.feasible = true;
        }
        const bool in_l2 = in.device.l2_bytes > 0 && e.device_bytes < in.device.l2_bytes;
        const double serial_us = s.max_len * (in_l2 ? p.serial_entry_l2_ns : p.serial_entry_dram_ns) * 1e-3;
        e.predicted_us = p.launch_us + std::max(e.bytes / bw, serial_us);
        break;
      }
    }
    out.push_back(e);
  }
  return out;
}

int select_best(const std::vector<format_estimate>& estimates)
{
  int best = -1;
  for (int i = 0; i < static_cast<int>(estimates.size()); ++i) {
    const auto& e = estimates[i];
    if (!e.feasible) continue;
    if (best < 0 || e.predicted_us < estimates[best].predicted_us) best = i;
  }
  return best;
}

}  // namespace aijp
