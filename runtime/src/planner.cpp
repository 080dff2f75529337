#include <aijpredict/planner.hpp>

#include <aijpredict/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <limits>
#include <sstream>

namespace aijp {

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

/// One past the longest length of bin b.
double bin_upper(int b)
{
  if (b + 1 < strip_bins) return strip_bin_lower(b + 1);
  return static_cast<double>(std::numeric_limits<index_type>::max()) + 1.0;
}

/// planning_us_per_estimate(): running mean of the measured rate (relaxed: a racing update loses one sample).
std::atomic<double> g_us_per_estimate{0.18};
std::atomic<bool> g_rate_measured{false};

}  // namespace

double planning_us_per_estimate() { return g_us_per_estimate.load(std::memory_order_relaxed); }

int strips_within(double budget_us, double us_per_estimate, int candidates, int max_strips)
{
  const double per_block = std::max(us_per_estimate, 1e-6) * std::max(candidates, 1);
  // n (n + 1) / 2 <= budget / per_block
  const double blocks = std::max(budget_us, 0.0) / per_block;
  int n = static_cast<int>(std::floor((std::sqrt(1.0 + 8.0 * blocks) - 1.0) / 2.0));
  while (n > 0 && 0.5 * n * (n + 1.0) > blocks) --n;  // rounding of the square root
  return std::clamp(n, 0, std::max(max_strips, 0));
}

size_type strip_rows_for(size_type rows, int max_strips)
{
  AIJP_ENSURE(max_strips >= 1, bad_input, "max_strips must be at least 1");
  const size_type per = (rows + max_strips - 1) / max_strips;
  return std::max<size_type>(stats_warp_size, (per + stats_warp_size - 1) / stats_warp_size * stats_warp_size);
}

template <typename Value>
std::vector<strip_summary> compute_strip_summaries(const csr_view<Value>& a, size_type rows_per_strip)
{
  AIJP_ENSURE(rows_per_strip > 0 && rows_per_strip % stats_warp_size == 0, bad_input,
              "rows per strip must be a positive multiple of 32");
  std::vector<strip_summary> out;
  for (size_type b = 0; b < a.rows; b += rows_per_strip) {
    strip_summary s;
    s.row_begin = b;
    s.rows = std::min(rows_per_strip, a.rows - b);
    s.min_len = std::numeric_limits<index_type>::max();
    index_type warp_max = 0;
    unsigned long long warp_nnz = 0, chain = 0;
    size_type sum_sq = 0;  // exact, as on the device (at most nnz^2 < 2^62)
    for (size_type r = b; r < b + s.rows; ++r) {
      const index_type len = a.row_ptr[r + 1] - a.row_ptr[r];
      AIJP_ENSURE(len >= 0, bad_input, "row_ptr is not non-decreasing at row " + std::to_string(r));
      s.nnz += len;
      sum_sq += static_cast<size_type>(len) * len;
      s.min_len = std::min(s.min_len, len);
      s.max_len = std::max(s.max_len, len);
      s.empty_rows += len == 0;
      const int bin = strip_bin_of(len);
      ++s.bin_rows[bin];
      s.bin_nnz[bin] += len;
      warp_max = std::max(warp_max, len);
      warp_nnz += static_cast<unsigned long long>(len);
      if ((r - b) % stats_warp_size == stats_warp_size - 1 || r + 1 == b + s.rows) {
        s.n_iter_natural += warp_max;
        if (warp_max > 0) chain = std::max(chain, chain_key(warp_max, warp_nnz));
        warp_max = 0;
        warp_nnz = 0;
      }
    }
    s.chain_warp_nnz = chain_key_nnz(chain);
    s.sum_sq = static_cast<double>(sum_sq);
    out.push_back(s);
  }
  return out;
}

template std::vector<strip_summary> compute_strip_summaries<double>(const csr_view<double>&, size_type);
template std::vector<strip_summary> compute_strip_summaries<float>(const csr_view<float>&, size_type);

double strip_locality_of(const strip_locality_group* groups, int n)
{
  double sectors = 0, nnz = 0;
  for (int q = 0; q < n; ++q) {
    if (groups[q].entries == 0) continue;
    sectors += static_cast<double>(groups[q].distinct) / static_cast<double>(groups[q].entries) * static_cast<double>(groups[q].nnz);
    nnz += static_cast<double>(groups[q].nnz);
  }
  return nnz > 0 ? sectors / nnz : -1.0;
}

template <typename Value>
void add_strip_locality_host(const csr_view<Value>& a, std::vector<strip_summary>& strips, int sector_shift)
{
  for (auto& st : strips) {
    const size_type groups = (st.rows + 31) / 32;
    const size_type n = std::min<size_type>(groups, strip_locality_groups);
    std::vector<strip_locality_group> g(static_cast<std::size_t>(n));
    for (size_type q = 0; q < n; ++q) {
      const size_type r0 = st.row_begin + 32 * (q * groups / n);
      const size_type r1 = std::min(r0 + 32, st.row_begin + st.rows);
      const index_type begin = a.row_ptr[r0];
      const index_type end = std::min<index_type>(a.row_ptr[r1], begin + strip_locality_max_entries);
      std::vector<index_type> sectors;
      for (index_type k = begin; k < end; ++k) sectors.push_back(a.col_idx[k] >> sector_shift);
      std::sort(sectors.begin(), sectors.end());
      g[q].distinct = static_cast<std::uint64_t>(std::unique(sectors.begin(), sectors.end()) - sectors.begin());
      g[q].entries = static_cast<std::uint64_t>(end - begin);
      g[q].nnz = static_cast<std::uint64_t>(a.row_ptr[r1] - a.row_ptr[r0]);
    }
    st.x_sectors_per_nnz = strip_locality_of(g.data(), static_cast<int>(n));
  }
}

template void add_strip_locality_host<double>(const csr_view<double>&, std::vector<strip_summary>&, int);
template void add_strip_locality_host<float>(const csr_view<float>&, std::vector<strip_summary>&, int);

template <typename Value>
void add_strip_columns_host(const csr_view<Value>& a, std::vector<strip_summary>& strips)
{
  for (auto& st : strips) {
    st.max_column_step = 0;
    st.unsorted_steps = 0;
    for (size_type r = st.row_begin; r < st.row_begin + st.rows; ++r) {
      for (index_type k = a.row_ptr[r] + 1; k < a.row_ptr[r + 1]; ++k) {
        const index_type step = a.col_idx[k] - a.col_idx[k - 1];
        st.unsorted_steps += step <= 0;
        st.max_column_step = std::max(st.max_column_step, step);
      }
    }
  }
}

template void add_strip_columns_host<double>(const csr_view<double>&, std::vector<strip_summary>&);
template void add_strip_columns_host<float>(const csr_view<float>&, std::vector<strip_summary>&);

void strip_accumulator::add(const strip_summary& s)
{
  if (s.x_sectors_per_nnz >= 0) {
    sampled_sectors_ += s.x_sectors_per_nnz * static_cast<double>(s.nnz);
    sampled_nnz_ += static_cast<double>(s.nnz);
    const int b = std::clamp(static_cast<int>(s.x_sectors_per_nnz * gather_mixture::bins), 0, gather_mixture::bins - 1);
    mix_nnz_[b] += static_cast<double>(s.nnz);
    mix_sectors_[b] += s.x_sectors_per_nnz * static_cast<double>(s.nnz);
  }
  if (!any_) {
    s_ = s;
    any_ = true;
    return;
  }
  s_.row_begin = std::min(s_.row_begin, s.row_begin);
  s_.rows += s.rows;
  s_.nnz += s.nnz;
  s_.empty_rows += s.empty_rows;
  s_.n_iter_natural += s.n_iter_natural;
  s_.sum_sq += s.sum_sq;
  s_.min_len = std::min(s_.min_len, s.min_len);
  if (s.max_len > s_.max_len || (s.max_len == s_.max_len && s.chain_warp_nnz > s_.chain_warp_nnz)) {
    s_.chain_warp_nnz = s.chain_warp_nnz;
  }
  s_.max_len = std::max(s_.max_len, s.max_len);
  s_.max_column_step = s_.max_column_step < 0 || s.max_column_step < 0 ? -1 : std::max(s_.max_column_step, s.max_column_step);
  s_.unsorted_steps += s.unsorted_steps;
  // Only the strip's occupied bins (between its shortest and longest row): most strips span few.
  for (int b = strip_bin_of(s.min_len), last = strip_bin_of(s.max_len); b <= last; ++b) {
    s_.bin_rows[b] += s.bin_rows[b];
    s_.bin_nnz[b] += s.bin_nnz[b];
  }
}

gather_mixture strip_accumulator::x_mixture() const
{
  gather_mixture m;
  if (!(sampled_nnz_ > 0)) return m;
  for (int b = 0; b < gather_mixture::bins; ++b) {
    if (!(mix_nnz_[b] > 0)) continue;
    m.share[b] = mix_nnz_[b] / sampled_nnz_;
    m.ratio[b] = mix_sectors_[b] / mix_nnz_[b];
  }
  return m;
}

row_stats strip_accumulator::stats(size_type cols) const
{
  row_stats r;
  r.rows = s_.rows;
  r.cols = cols;
  r.nnz = s_.nnz;
  r.n_iter_natural = s_.n_iter_natural;
  r.chain_warp_nnz = s_.chain_warp_nnz;
  if (s_.rows == 0) return r;
  const double rows = static_cast<double>(s_.rows);
  r.mean = static_cast<double>(s_.nnz) / rows;
  r.stddev = std::sqrt(std::max(0.0, s_.sum_sq / rows - r.mean * r.mean));
  r.min_len = s_.min_len;
  r.max_len = s_.max_len;
  r.empty_rows = s_.empty_rows;
  r.n_p = 2 * s_.nnz - (s_.rows - s_.empty_rows);

  // A bin's rows at the bin's mean length (exact for the one-length bins below 64).
  const auto length_of = [&](int b) {
    return b < strip_exact_bins ? static_cast<double>(b)
                                : static_cast<double>(s_.bin_nnz[b]) / static_cast<double>(s_.bin_rows[b]);
  };
  const int first_bin = strip_bin_of(s_.min_len), last_bin = strip_bin_of(s_.max_len);
  for (int b = first_bin; b <= last_bin; ++b) {
    if (s_.bin_rows[b] > r.mode_count) {
      r.mode_count = s_.bin_rows[b];
      r.mode_len = static_cast<index_type>(std::lround(length_of(b)));
    }
  }
  // Sorted order and the Bell-Garland width, as in stats_from_histogram, walking the bins downwards.
  const size_type threshold = std::max<size_type>(4096, s_.rows / 3);
  const auto warps_before = [](size_type c) { return (c + stats_warp_size - 1) / stats_warp_size; };
  double sorted = 0;
  size_type c_next = 0;
  int width_bin = -1;
  for (int b = last_bin; b >= std::max(first_bin, 1); --b) {
    const size_type n = s_.bin_rows[b];
    if (n == 0) continue;
    const size_type c = c_next + n;
    sorted += length_of(b) * static_cast<double>(warps_before(c) - warps_before(c_next));
    if (c >= threshold && width_bin < 0) {
      width_bin = b;
      if (b < strip_exact_bins) {
        r.hyb_ell_width = b;
      } else {
        // Rows spread evenly over the bin's lengths: c(K) = c_next + n (upper - K) / (upper - lower).
        const double lo = strip_bin_lower(b), hi = bin_upper(b);
        const double k = hi - static_cast<double>(threshold - c_next) / static_cast<double>(n) * (hi - lo);
        r.hyb_ell_width = static_cast<index_type>(std::clamp(std::floor(k), lo, hi - 1));
      }
    }
    c_next = c;
  }
  const double lower = static_cast<double>(warps_before(s_.nnz));
  r.n_iter_sorted = static_cast<size_type>(std::llround(
      std::clamp(sorted, std::min(lower, static_cast<double>(s_.n_iter_natural)), static_cast<double>(s_.n_iter_natural))));
  // COO part: the entries beyond K of every row (K = 0 when no width reaches the threshold: all of them).
  const double k = r.hyb_ell_width;
  double coo = 0;
  for (int b = std::max({width_bin, first_bin, 1}); b <= last_bin; ++b) {
    const double n = static_cast<double>(s_.bin_rows[b]);
    if (n == 0) continue;
    const double lo = strip_bin_lower(b), hi = bin_upper(b);
    if (lo > k) {
      coo += static_cast<double>(s_.bin_nnz[b]) - n * k;
    } else if (hi - 1 > k) {  // the bin holding K: the rows above K, spread evenly
      coo += n * (hi - 1 - k) / (hi - lo) * (hi - k) / 2;
    }
  }
  r.hyb_coo_nnz = static_cast<size_type>(std::llround(std::min(coo, static_cast<double>(s_.nnz))));
  return r;
}

std::string partition_plan::to_string() const
{
  std::ostringstream os;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    os << (k ? "+" : "") << format_name(blocks[k].format) << "[" << blocks[k].row_begin << "," << blocks[k].row_end << ")";
  }
  return os.str();
}

partition_plan parse_partition_plan(const std::string& text)
{
  partition_plan p;
  std::size_t pos = 0;
  const auto fail = [&](const std::string& why) {
    AIJP_THROW(bad_input, "bad partition plan '" + text + "': " + why +
                              " (expected FORMAT[BEGIN,END)+FORMAT[BEGIN,END)..., contiguous from row 0)");
  };
  while (pos < text.size()) {
    const auto open = text.find('[', pos);
    const auto comma = text.find(',', open == std::string::npos ? pos : open);
    const auto close = text.find(')', comma == std::string::npos ? pos : comma);
    if (open == std::string::npos || comma == std::string::npos || close == std::string::npos) fail("malformed block");
    plan_block b;
    b.format = parse_format(text.substr(pos, open - pos));
    try {
      std::size_t used = 0;
      const std::string first = text.substr(open + 1, comma - open - 1), second = text.substr(comma + 1, close - comma - 1);
      b.row_begin = std::stoll(first, &used);
      if (used != first.size()) fail("bad row index '" + first + "'");
      b.row_end = std::stoll(second, &used);
      if (used != second.size()) fail("bad row index '" + second + "'");
    } catch (const std::logic_error&) {
      fail("bad row index");
    }
    const size_type expected = p.blocks.empty() ? 0 : p.blocks.back().row_end;
    if (b.row_begin != expected) fail("block begins at row " + std::to_string(b.row_begin) + ", expected " + std::to_string(expected));
    if (b.row_end <= b.row_begin) fail("empty block");
    p.blocks.push_back(b);
    pos = close + 1;
    if (pos < text.size()) {
      if (text[pos] != '+') fail("expected '+' between blocks");
      ++pos;
      if (pos == text.size()) fail("trailing '+'");
    }
  }
  if (p.blocks.empty()) fail("no blocks");
  return p;
}

prediction_input block_prediction_input(const prediction_input& whole, const block_facts& block)
{
  prediction_input in = whole;
  in.stats = block.stats;
  if (block.x_sectors_per_nnz > 0) in.x_sectors_per_nnz = block.x_sectors_per_nnz;  // the block's own (planner strips)
  if (block.stats.nnz != whole.stats.nnz || block.stats.rows != whole.stats.rows) {
    // The other blocks pass through the L2 between two products of this one: the 2M-row 7-point Laplacian split into
    // five HYB blocks of 412K rows (34.6 MB each, under the 36.7 MB of the L2 counted as keeping a working set), each
    // priced as L2-resident, measured 0.874x the best single format (H100, session 45).
    in.l2_shared_bytes = rest_of_matrix_bytes(whole.stats, block.stats, in.value_bytes);
    // The block's own mixture from its strips (none would drop the mixture term of the whole matrix's prediction: the
    // 4M-row circuit with 64 dense rows of 400K was planned as cuSPARSE CSR over all but its last 60K rows and ELL
    // below, 281.4 us against 300.4 us for cuSPARSE CSR alone, and measured 0.933x the best single format, H100,
    // session 45). Its longest sampled row stays where the block's longest row is of that length (likely that row:
    // the chain's scatter, predict.cpp).
    const gather_mixture& m = whole.x_mixture;
    in.x_mixture = block.x_mixture;
    if (m.longest_row_len > 0 && m.longest_row_len == static_cast<double>(block.stats.max_len)) {
      in.x_mixture.longest_row_len = m.longest_row_len;
      in.x_mixture.longest_row_ratio = m.longest_row_ratio;
    }
  }
  if (block.max_column_step >= 0) {  // the block's own (add_strip_columns)
    in.max_column_step = block.max_column_step;
    in.columns_sorted = block.unsorted_steps == 0;
  }
  return in;
}

std::vector<int> optimal_split(int n, const std::function<double(int, int)>& cost, int max_blocks)
{
  AIJP_ENSURE(max_blocks >= 1, bad_input, "max_blocks must be at least 1");
  if (n <= 0) return {};
  const int bmax = std::min(max_blocks, n);
  // t[b][j]: best time of strips 0..j in exactly b+1 blocks; from[b][j]: where its last block begins.
  std::vector<std::vector<double>> t(bmax, std::vector<double>(n, infinity));
  std::vector<std::vector<int>> from(bmax, std::vector<int>(n, 0));
  for (int j = 0; j < n; ++j) t[0][j] = cost(0, j);
  for (int b = 1; b < bmax; ++b) {
    for (int j = b; j < n; ++j) {
      for (int k = b - 1; k < j; ++k) {
        const double v = t[b - 1][k] + cost(k + 1, j);
        if (v < t[b][j]) {
          t[b][j] = v;
          from[b][j] = k + 1;
        }
      }
    }
  }
  // Fewest blocks among the best (a split must be strictly better, by a relative 1e-12 against rounding).
  int best = 0;
  for (int b = 1; b < bmax; ++b) {
    if (t[b][n - 1] < t[best][n - 1] * (1 - 1e-12)) best = b;
  }
  std::vector<int> starts;
  for (int b = best, j = n - 1; b > 0; --b) {
    starts.push_back(from[b][j]);
    j = from[b][j] - 1;
  }
  starts.push_back(0);
  std::reverse(starts.begin(), starts.end());
  return starts;
}

partition_planner::partition_planner(std::vector<strip_summary> strips, size_type cols, std::vector<format_id> candidates,
                                     block_cost_fn cost, const planner_options& opts, const row_stats* whole,
                                     double whole_x_sectors_per_nnz)
    : strips_(std::move(strips)),
      cols_(cols),
      candidates_(std::move(candidates)),
      cost_(std::move(cost)),
      opts_(opts),
      whole_x_(whole_x_sectors_per_nnz)
{
  AIJP_ENSURE(opts_.max_strips >= 1 && opts_.max_blocks >= 1, bad_input, "planner options must be positive");
  if (whole) whole_ = *whole;
  n_ = static_cast<int>(strips_.size());
  plan_.strips = n_;
  plan_.strip_rows = n_ > 0 ? strips_[0].rows : 0;
  if (n_ == 0 || candidates_.empty()) {
    done_ = true;
    return;
  }
  // E[i][j] and its format for every block of strips i..j.
  e_.assign(static_cast<std::size_t>(n_) * n_, infinity);
  ef_.assign(static_cast<std::size_t>(n_) * n_, -1);
  us_.resize(candidates_.size());
}

std::size_t partition_planner::blocks_total() const { return static_cast<std::size_t>(n_) * (n_ + 1) / 2; }

bool partition_planner::advance(double budget_us)
{
  if (done_) return true;
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed_us = [&] { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count(); };
  const int n = n_;
  block_facts block;
  bool first = true;
  while (j_ < n && (first || elapsed_us() < budget_us)) {
    first = false;
    if (i_ == j_) acc_.clear();
    acc_.add(strips_[i_]);
    const bool all = i_ == 0 && j_ == n - 1;
    block.stats = (whole_ && all) ? *whole_ : acc_.stats(cols_);
    block.x_sectors_per_nnz = (all && whole_x_ >= 0) ? whole_x_ : acc_.x_sectors_per_nnz();
    block.x_mixture = all ? gather_mixture{} : acc_.x_mixture();
    block.max_column_step = acc_.max_column_step();
    block.unsorted_steps = acc_.unsorted_steps();
    std::fill(us_.begin(), us_.end(), infinity);
    cost_(block, us_);
    const std::size_t at = static_cast<std::size_t>(i_) * n + j_;
    for (std::size_t k = 0; k < candidates_.size(); ++k) {
      if (us_[k] < e_[at]) {  // infinity and NaN never win
        e_[at] = us_[k];
        ef_[at] = static_cast<int>(k);
      }
    }
    ++blocks_done_;
    if (i_ == 0) {
      ++j_;
      i_ = j_;
    } else {
      --i_;
    }
  }
  table_us_ += elapsed_us();
  if (j_ == n) finish();
  spent_ms_ += 1e-3 * elapsed_us();
  plan_.planning_ms = spent_ms_;
  return done_;
}

void partition_planner::finish()
{
  const int n = n_;
  // The measured rate of the table (the DP below is n^2 max_blocks additions: negligible).
  const double estimates = 0.5 * n * (n + 1.0) * static_cast<double>(candidates_.size());
  if (estimates >= 64) {  // too few to time
    const double rate = table_us_ / estimates;
    const bool measured = g_rate_measured.exchange(true, std::memory_order_relaxed);
    g_us_per_estimate.store(measured ? 0.5 * (planning_us_per_estimate() + rate) : rate, std::memory_order_relaxed);
  }
  partition_plan& plan = plan_;
  const auto& e = e_;
  const auto& ef = ef_;
  const auto& strips = strips_;
  const int whole_format = ef[n - 1];
  plan.single_format = whole_format >= 0 ? candidates_[whole_format] : format_id::cusparse_csr;
  plan.single_us = e[n - 1];

  const auto starts = optimal_split(n, [&](int i, int j) { return e[i * n + j]; }, opts_.max_blocks);
  double total = 0;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const int i = starts[k];
    const int j = k + 1 < starts.size() ? starts[k + 1] - 1 : n - 1;
    plan_block b;
    b.row_begin = strips[i].row_begin;
    b.row_end = strips[j].row_begin + strips[j].rows;
    b.format = ef[i * n + j] >= 0 ? candidates_[ef[i * n + j]] : format_id::cusparse_csr;
    b.predicted_us = e[i * n + j];
    for (int k2 = i; k2 <= j; ++k2) b.nnz += strips[k2].nnz;
    total += b.predicted_us;
    plan.blocks.push_back(b);
  }
  plan.predicted_us = total;
  if (!std::isfinite(total)) {  // nothing feasible anywhere: one cuSPARSE CSR block
    plan_block all{strips[0].row_begin, strips[n - 1].row_begin + strips[n - 1].rows, format_id::cusparse_csr, infinity, 0};
    for (const auto& st : strips) all.nnz += st.nnz;
    plan.blocks = {all};
  }
  done_ = true;
  e_ = {};
  ef_ = {};
}

partition_plan plan_partition(const std::vector<strip_summary>& strips, size_type cols,
                              const std::vector<format_id>& candidates, const block_cost_fn& cost,
                              const planner_options& opts, const row_stats* whole, double whole_x_sectors_per_nnz)
{
  partition_planner p(strips, cols, candidates, cost, opts, whole, whole_x_sectors_per_nnz);
  p.advance(infinity);
  return p.result();
}

}  // namespace aijp
