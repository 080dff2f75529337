#include <aijpredict/stats.hpp>

#include <aijpredict/error.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>
#include <vector>

namespace aijp {

row_stats stats_from_bins(size_type rows, size_type cols, const std::vector<length_bin>& bins, size_type n_iter_natural,
                          size_type chain_warp_nnz)
{
  row_stats s;
  s.rows = rows;
  s.cols = cols;
  s.n_iter_natural = n_iter_natural;
  s.chain_warp_nnz = chain_warp_nnz;
  if (rows == 0) return s;
  AIJP_ENSURE(!bins.empty(), error, "row-length histogram is empty for a matrix with rows");

  size_type counted = 0;
  long double sum = 0, sum_sq = 0;
  index_type prev = -1;
  for (const length_bin& b : bins) {
    AIJP_ENSURE(b.len > prev && b.rows > 0, error, "row-length bins are not increasing and non-empty");
    prev = b.len;
    counted += b.rows;
    sum += static_cast<long double>(b.rows) * b.len;
    sum_sq += static_cast<long double>(b.rows) * b.len * b.len;
    if (b.rows > s.mode_count) {
      s.mode_count = b.rows;
      s.mode_len = b.len;
    }
  }
  AIJP_ENSURE(counted == rows, error, "row-length histogram does not add up to the number of rows");
  s.min_len = bins.front().len;
  s.max_len = bins.back().len;
  s.nnz = static_cast<size_type>(sum);
  s.empty_rows = bins.front().len == 0 ? bins.front().rows : 0;
  s.mean = static_cast<double>(sum / rows);
  const long double var = sum_sq / rows - (sum / rows) * (sum / rows);
  s.stddev = static_cast<double>(std::sqrt(std::max<long double>(var, 0)));
  s.n_p = 2 * s.nnz - (rows - s.empty_rows);

  // Sorted order (decreasing length): with c(L) = rows of length >= L, the rows of length L occupy
  // positions [c(L+1), c(L)); a warp starts every 32 positions, and its longest row is the first one.
  // Bell-Garland HYB width: c(K) is non-increasing, so K = the number of K >= 1 with c(K) >= threshold.
  // c changes only at occupied lengths, so walking those alone gives the same sums and the same K.
  const size_type threshold = std::max<size_type>(4096, rows / 3);
  const auto warps_before = [](size_type c) { return (c + stats_warp_size - 1) / stats_warp_size; };
  size_type c_next = 0;  // c(L+1)
  for (auto b = bins.rbegin(); b != bins.rend() && b->len >= 1; ++b) {
    const size_type c = c_next + b->rows;
    s.n_iter_sorted += b->len * (warps_before(c) - warps_before(c_next));
    if (c >= threshold && s.hyb_ell_width == 0) s.hyb_ell_width = b->len;
    c_next = c;
  }
  // The 32 longest rows, walked from the longest bin down: over the steps [next length, this length) the rows
  // still running are those of length >= this length.
  if (s.max_len > 0) {
    double inverse_sum = 0;
    size_type running = 0;
    for (auto b = bins.rbegin(); b != bins.rend() && b->len >= 1 && running < stats_warp_size; ++b) {
      running = std::min<size_type>(stats_warp_size, running + b->rows);
      const auto next = std::next(b);
      const index_type below = next == bins.rend() || running == stats_warp_size ? 0 : next->len;
      inverse_sum += static_cast<double>(b->len - below) / static_cast<double>(running);
    }
    s.sorted_chain_lanes = static_cast<double>(s.max_len) / inverse_sum;
  }
  for (const length_bin& b : bins) {
    if (b.len > s.hyb_ell_width) s.hyb_coo_nnz += b.rows * (b.len - s.hyb_ell_width);
  }
  return s;
}

row_stats stats_from_histogram(size_type rows, size_type cols, const size_type* hist, size_type hist_size,
                               size_type n_iter_natural, size_type chain_warp_nnz)
{
  std::vector<length_bin> bins;
  for (size_type len = 0; len < hist_size; ++len) {
    AIJP_ENSURE(hist[len] >= 0, error, "negative count in the row-length histogram");
    if (hist[len] > 0) bins.push_back({static_cast<index_type>(len), hist[len]});
  }
  return stats_from_bins(rows, cols, bins, n_iter_natural, chain_warp_nnz);
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

double sorted_chain_lanes(const row_stats& s)
{
  if (!(s.sorted_chain_lanes > 0)) return chain_lanes(s);
  return std::clamp(s.sorted_chain_lanes, 1.0, static_cast<double>(stats_warp_size));
}

std::string row_stats::to_string() const
{
  std::ostringstream os;
  os << "rows " << rows << ", cols " << cols << ", nnz " << nnz << ", mean " << mean << ", sigma " << stddev
     << ", min " << min_len << ", max " << max_len << ", max-min " << spread() << ", mode " << mode_len << " ("
     << mode_count << " rows), empty rows " << empty_rows << ", N_iter natural " << n_iter_natural
     << ", N_iter sorted " << n_iter_sorted << ", N_p " << n_p << ", HYB K " << hyb_ell_width << " (COO nnz "
     << hyb_coo_nnz << "), longest row's group " << chain_warp_nnz << " nnz, sorted lanes " << sorted_chain_lanes;
  return os.str();
}

}  // namespace aijp
