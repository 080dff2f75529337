#include <aijpredict/stats.hpp>

#include <aijpredict/error.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

namespace aijp {

row_stats stats_from_histogram(size_type rows, size_type cols, const size_type* hist, size_type hist_size,
                               size_type n_iter_natural, size_type chain_warp_nnz)
{
  row_stats s;
  s.rows = rows;
  s.cols = cols;
  s.n_iter_natural = n_iter_natural;
  s.chain_warp_nnz = chain_warp_nnz;
  if (rows == 0) return s;
  AIJP_ENSURE(hist_size > 0, error, "row-length histogram is empty for a matrix with rows");

  size_type counted = 0;
  long double sum = 0, sum_sq = 0;
  s.min_len = -1;
  for (size_type len = 0; len < hist_size; ++len) {
    const size_type h = hist[len];
    if (h == 0) continue;
    counted += h;
    sum += static_cast<long double>(h) * len;
    sum_sq += static_cast<long double>(h) * len * len;
    if (s.min_len < 0) s.min_len = static_cast<index_type>(len);
    s.max_len = static_cast<index_type>(len);
    if (h > s.mode_count) {
      s.mode_count = h;
      s.mode_len = static_cast<index_type>(len);
    }
  }
  AIJP_ENSURE(counted == rows, error, "row-length histogram does not add up to the number of rows");
  s.nnz = static_cast<size_type>(sum);
  s.empty_rows = hist[0];
  s.mean = static_cast<double>(sum / rows);
  const long double var = sum_sq / rows - (sum / rows) * (sum / rows);
  s.stddev = static_cast<double>(std::sqrt(std::max<long double>(var, 0)));
  s.n_p = 2 * s.nnz - (rows - s.empty_rows);

  // Sorted order (decreasing length): with c(L) = rows of length >= L, the rows of length L occupy
  // positions [c(L+1), c(L)); a warp starts every 32 positions, and its longest row is the first one.
  // Bell-Garland HYB width: c(K) is non-increasing, so K = the number of K >= 1 with c(K) >= threshold.
  const size_type threshold = std::max<size_type>(4096, rows / 3);
  const auto warps_before = [](size_type c) { return (c + stats_warp_size - 1) / stats_warp_size; };
  size_type c_next = 0;  // c(L+1)
  for (size_type len = hist_size - 1; len >= 1; --len) {
    const size_type c = c_next + hist[len];
    s.n_iter_sorted += len * (warps_before(c) - warps_before(c_next));
    if (c >= threshold && s.hyb_ell_width == 0) s.hyb_ell_width = static_cast<index_type>(len);
    c_next = c;
  }
  for (size_type len = s.hyb_ell_width + 1; len < hist_size; ++len) {
    s.hyb_coo_nnz += hist[len] * (len - s.hyb_ell_width);
  }
  return s;
}

template <typename Value>
row_stats compute_row_stats(const csr_view<Value>& a)
{
  AIJP_ENSURE(a.rows >= 0 && a.cols >= 0, bad_input, "negative matrix dimensions");
  if (a.rows == 0) return stats_from_histogram(0, a.cols, nullptr, 0, 0);
  AIJP_ENSURE(a.row_ptr != nullptr, bad_input, "row_ptr is null");
  index_type max_len = 0;
  for (size_type r = 0; r < a.rows; ++r) {
    const index_type len = a.row_ptr[r + 1] - a.row_ptr[r];
    AIJP_ENSURE(len >= 0, bad_input, "row_ptr is not non-decreasing at row " + std::to_string(r));
    max_len = std::max(max_len, len);
  }
  std::vector<size_type> hist(static_cast<size_t>(max_len) + 1, 0);
  size_type n_iter = 0;
  unsigned long long chain = 0;
  for (size_type w = 0; w < a.rows; w += stats_warp_size) {
    index_type warp_max = 0;
    unsigned long long warp_nnz = 0;
    for (size_type r = w; r < std::min<size_type>(w + stats_warp_size, a.rows); ++r) {
      const index_type len = a.row_ptr[r + 1] - a.row_ptr[r];
      ++hist[len];
      warp_max = std::max(warp_max, len);
      warp_nnz += static_cast<unsigned long long>(len);
    }
    n_iter += warp_max;
    if (warp_max > 0) chain = std::max(chain, chain_key(warp_max, warp_nnz));
  }
  return stats_from_histogram(a.rows, a.cols, hist.data(), static_cast<size_type>(hist.size()), n_iter,
                              chain_key_nnz(chain));
}

template row_stats compute_row_stats<double>(const csr_view<double>&);
template row_stats compute_row_stats<float>(const csr_view<float>&);

double chain_lanes(const row_stats& s)
{
  if (s.max_len <= 0 || s.chain_warp_nnz == 0) return 1.0;
  return std::clamp(static_cast<double>(s.chain_warp_nnz) / static_cast<double>(s.max_len), 1.0,
                    static_cast<double>(stats_warp_size));
}

std::string row_stats::to_string() const
{
  std::ostringstream os;
  os << "rows " << rows << ", cols " << cols << ", nnz " << nnz << ", mean " << mean << ", sigma " << stddev
     << ", min " << min_len << ", max " << max_len << ", max-min " << spread() << ", mode " << mode_len << " ("
     << mode_count << " rows), empty rows " << empty_rows << ", N_iter natural " << n_iter_natural
     << ", N_iter sorted " << n_iter_sorted << ", N_p " << n_p << ", HYB K " << hyb_ell_width << " (COO nnz "
     << hyb_coo_nnz << "), longest row's group " << chain_warp_nnz << " nnz";
  return os.str();
}

}  // namespace aijp
