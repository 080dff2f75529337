// Row-partitioned multi-format plans (Guo, Wang & Chen 2014; DESIGN.md section 5).
//
// The rows are cut into strips of R consecutive rows (R a multiple of 32, so the strips' per-warp
// iteration counts add up exactly). The device summarizes each strip in one pass over row_ptr
// (aijp::compute_strip_summaries_device, kernels/); this header merges the summaries of strips i..j into
// the row statistics of that block, asks a cost callback for every candidate format's predicted time of
// the block, and finds the optimal contiguous partition by dynamic programming:
//
//   E[i, j] = min over formats of the predicted time of block i..j (infeasible formats excluded)
//   T_b[j]  = min over k of T_{b-1}[k] + E[k+1, j]    (at most b blocks ending at strip j)
//
// Each block's predicted time includes its own launches, so a split is only proposed when the saving
// pays for the extra launches. Host-only: no CUDA, no PETSc.
#pragma once

#include <aijpredict/csr.hpp>
#include <aijpredict/formats.hpp>
#include <aijpredict/predict.hpp>
#include <aijpredict/stats.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace aijp {

/// Row-length bins of a strip summary: lengths 0..63 exactly, then 4 bins per octave [2^k, 2^(k+1)) for
/// k = 6..30 (relative width 1/4: the padding estimates of the long-row tail stay within ~25 %).
constexpr int strip_exact_bins = 64;
constexpr int strip_bins = strip_exact_bins + 4 * 25;

/// The bin of a row length (>= 0). Shared by the device kernel (constexpr, called from device code).
constexpr int strip_bin_of(index_type len)
{
  if (len < strip_exact_bins) return len;
  int octave = 6;
  while (octave < 30 && (len >> (octave + 1)) != 0) ++octave;
  return strip_exact_bins + 4 * (octave - 6) + ((len >> (octave - 2)) & 3);
}

/// Smallest length of bin b.
constexpr index_type strip_bin_lower(int b)
{
  if (b < strip_exact_bins) return b;
  const int octave = 6 + (b - strip_exact_bins) / 4;
  const int quarter = (b - strip_exact_bins) % 4;
  return static_cast<index_type>((4 + quarter) * (index_type(1) << (octave - 2)));
}

/// Mergeable summary of the rows [row_begin, row_begin + rows) of one strip.
struct strip_summary {
  size_type row_begin = 0;
  size_type rows = 0;
  size_type nnz = 0;
  size_type empty_rows = 0;
  size_type n_iter_natural = 0;  ///< sum over the strip's 32-row groups of the longest row (exact, additive)
  double sum_sq = 0;             ///< sum of squared row lengths
  index_type min_len = 0;
  index_type max_len = 0;
  size_type chain_warp_nnz = 0;  ///< row_stats::chain_warp_nnz of the strip (exact under merging with max_len)
  std::array<size_type, strip_bins> bin_rows{};  ///< rows per length bin
  std::array<size_type, strip_bins> bin_nnz{};   ///< nonzeros of those rows
  /// Sampled locality of the strip's x gathers (distinct 32-byte sectors of x per nonzero over sampled
  /// groups of 32 rows: strip_locality_groups), negative when not sampled. A block's locality is the
  /// nonzero-weighted mean of its sampled strips': a circuit's random-column body and its dense rows differ
  /// by 10x, which one sample of the whole matrix averages away.
  double x_sectors_per_nnz = -1.0;
  /// Column facts of the strip's rows (add_strip_columns, kernels/; add_strip_columns_host): the largest step
  /// between consecutive columns of a row, and the steps that do not increase (0: every row's columns strictly
  /// increase). max_column_step is -1 when not inspected: a block holding such a strip has the whole matrix's
  /// facts. A stencil stacked on a power-law block fits sell_delta16's 16-bit steps in its stencil rows only.
  index_type max_column_step = -1;
  size_type unsorted_steps = 0;
};

/// Rows [first, last) of the sampled groups of a strip: up to `groups` evenly spaced groups of 32 rows of
/// rows [row_begin, row_begin + rows), group q starting at row row_begin + 32 * (q * G / n) (G the strip's
/// groups, n = min(groups, G)). Shared by the device sampler and its host reference.
constexpr int strip_locality_groups = 32;
/// Entries of a sampled group looked at (its first ones), as the whole-matrix sampler.
constexpr int strip_locality_max_entries = 4096;

/// One sampled group of a strip: distinct x sectors among its first (at most strip_locality_max_entries)
/// entries, those entries, and the group's nonzeros.
struct strip_locality_group {
  std::uint64_t distinct = 0, entries = 0, nnz = 0;
};
/// The strip's locality from its sampled groups: each group's sectors per entry weighted by the group's
/// nonzeros (a strip of a circuit holding its dense rows has them in one group, which carries nearly all of
/// its nonzeros); negative when the groups hold no entries. Shared by the device sampler and the host
/// reference so that both give the same double.
double strip_locality_of(const strip_locality_group* groups, int n);

/// Host reference of the device strip locality (aijp::add_strip_locality, kernels/): sets x_sectors_per_nnz
/// of every strip from the sampled groups; `sector_shift` 2 for doubles, 3 for floats.
template <typename Value>
void add_strip_locality_host(const csr_view<Value>& a, std::vector<strip_summary>& strips, int sector_shift);

/// Host reference of the device column facts (aijp::add_strip_columns, kernels/): sets max_column_step and
/// unsorted_steps of every strip.
template <typename Value>
void add_strip_columns_host(const csr_view<Value>& a, std::vector<strip_summary>& strips);

/// Rows per strip: a multiple of 32 giving at most `max_strips` strips (at least 32 rows).
size_type strip_rows_for(size_type rows, int max_strips);

/// Host reference of the device strip summaries (row_ptr in host memory). rows_per_strip % 32 == 0.
template <typename Value>
std::vector<strip_summary> compute_strip_summaries(const csr_view<Value>& a, size_type rows_per_strip);

/// Adds strips one after another (in either direction) and gives the statistics of their union.
class strip_accumulator {
 public:
  void add(const strip_summary& s);
  void clear() { *this = strip_accumulator(); }
  /// Statistics of the strips added so far, as a block with `cols` columns.
  /// Exact: rows, cols, nnz, mean, stddev (up to rounding), min_len, max_len, empty_rows, n_iter_natural,
  /// n_p. Exact when every row is shorter than 64 (every length has its own bin), otherwise approximated
  /// from the bins (each row of a bin taken at the bin's mean length): mode_len / mode_count,
  /// n_iter_sorted (clamped to [ceil(nnz/32) rounded per warp, n_iter_natural]), hyb_ell_width, hyb_coo_nnz.
  row_stats stats(size_type cols) const;
  /// Nonzero-weighted mean locality of the sampled strips added; 0 (unknown) when none was sampled.
  double x_sectors_per_nnz() const { return sampled_nnz_ > 0 ? sampled_sectors_ / sampled_nnz_ : 0.0; }
  /// The sampled strips' locality as a gather mixture (prediction_input::x_mixture): each strip's nonzeros in the
  /// bin of its x sectors per nonzero, as the whole-matrix sampler bins its windows. Coarser than the whole
  /// matrix's (a strip is one ratio), but it keeps a block's dense rows of scattered columns apart from its banded
  /// bulk. Empty (unknown) when no strip was sampled; the longest-row fields stay unknown.
  gather_mixture x_mixture() const;
  /// Largest column step of the strips added; -1 (unknown) when any of them was not inspected.
  index_type max_column_step() const { return s_.max_column_step; }
  /// Steps that do not increase among the strips added (meaningful when max_column_step() >= 0).
  size_type unsorted_steps() const { return s_.unsorted_steps; }
  size_type rows() const { return s_.rows; }

 private:
  strip_summary s_;
  bool any_ = false;
  double sampled_sectors_ = 0, sampled_nnz_ = 0;
  std::array<double, gather_mixture::bins> mix_nnz_{}, mix_sectors_{};  // sampled strips' nonzeros and sectors per bin
};

/// One block of a partition: rows [row_begin, row_end) in `format`.
struct plan_block {
  size_type row_begin = 0;
  size_type row_end = 0;
  format_id format = format_id::cusparse_csr;
  double predicted_us = 0;
  size_type nnz = 0;  ///< nonzeros of the block (filled by plan_partition; 0 when parsed)
};

/// The planner's result: the blocks (covering all rows in order) and what it compared against.
struct partition_plan {
  std::vector<plan_block> blocks;
  double predicted_us = 0;                           ///< sum of the blocks' predictions
  format_id single_format = format_id::cusparse_csr; ///< best single format for the whole matrix
  double single_us = 0;                              ///< its predicted time (same cost callback)
  int strips = 0;                                    ///< strips the DP worked on
  size_type strip_rows = 0;                          ///< rows per strip
  double planning_ms = 0;                            ///< summaries merge + predictions + DP (host time)
  bool split() const { return blocks.size() > 1; }
  /// "sell_delta16[0,262144)+coo[262144,300000)".
  std::string to_string() const;
};

/// Parses the form of partition_plan::to_string() (predictions left at 0); throws bad_input.
partition_plan parse_partition_plan(const std::string& text);

/// What the planner knows of a block of strips when it asks for the block's predictions.
struct block_facts {
  row_stats stats;                   ///< merged statistics (the whole matrix's exact ones for the block of all rows)
  double x_sectors_per_nnz = 0;      ///< sampled x locality, 0 when unknown
  /// Its strips' locality as a mixture (strip_accumulator::x_mixture); empty for the block of all rows, which
  /// has the whole matrix's own.
  gather_mixture x_mixture;
  index_type max_column_step = -1;   ///< largest column step of its rows, -1 when unknown (use the whole matrix's)
  size_type unsorted_steps = 0;      ///< its column steps that do not increase (meaningful when max_column_step >= 0)
};

/// The prediction input of a block of rows of the matrix whose input is `whole`: the block's statistics, and its
/// locality and column facts where known (the whole matrix's otherwise). A block of fewer rows or nonzeros than the
/// whole matrix also gets the rest of the matrix's bytes as prediction_input::l2_shared_bytes (it stays in the L2
/// from one product to the next only beside them) and its strips' gather mixture, with the whole matrix's longest
/// sampled row where its own longest row has that length (likely that row). For the block of all rows: `whole` with
/// the block's statistics. The runtime's partition costs and the host planner tool (bench/aijp_plan) both use it.
prediction_input block_prediction_input(const prediction_input& whole, const block_facts& block);

/// Cost callback: fills `us[k]` with the predicted time of `block` in candidates[k] (microseconds, launches
/// included), or +infinity where that format is infeasible for the block. `us` arrives sized to
/// candidates.size().
using block_cost_fn = std::function<void(const block_facts& block, std::vector<double>& us)>;

struct planner_options {
  /// Strips of the DP: max_strips^2 / 2 blocks are predicted. 64 keeps planning near 2 ms of host time with
  /// the placeholder model (7 ms at 128, 40 ms at 256: unit test Planner.PlanningTimeWithTheBandwidthModel
  /// on the 2-core build machine; 5.1 ms at 63 strips on the H100 machine's host) at a boundary resolution of
  /// 1/64 of the rows.
  int max_strips = 64;
  /// Fewest strips the runtime lets a planning budget cut the DP to (plan_options::planning_share): with a
  /// budget too small for these, planning waits until the use pays for it. 24 strips are 300 blocks.
  int min_strips = 24;
  int max_blocks = 8;    ///< blocks of the final partition
};

/// Host time of the DP per predicted (block, candidate) pair in this process, in microseconds: a running mean
/// over the plannings so far (plan_partition measures each), or 0.18 us before the first (5.1 ms for the
/// 2016 blocks x 14 formats of 63 strips on the H100 machine's host).
double planning_us_per_estimate();

/// Largest n <= max_strips whose n (n + 1) / 2 blocks of `candidates` predictions fit in budget_us at
/// us_per_estimate each; 0 when not even one strip fits.
int strips_within(double budget_us, double us_per_estimate, int candidates, int max_strips);

/// Optimal contiguous partition of the strips. `whole`, when given, replaces the merged (partly
/// approximate) statistics of the block spanning every strip with the exact ones, and `whole_x_sectors_per_nnz`
/// (when >= 0) its locality, so the single-format baseline matches the unpartitioned selection. `cols` is the matrix's column count. An empty matrix
/// (no strips) gives an empty plan. Throws bad_input when no candidate is feasible for some block and
/// cuSPARSE CSR is not among the candidates.
partition_plan plan_partition(const std::vector<strip_summary>& strips, size_type cols,
                              const std::vector<format_id>& candidates, const block_cost_fn& cost,
                              const planner_options& opts = {}, const row_stats* whole = nullptr,
                              double whole_x_sectors_per_nnz = -1.0);

/// plan_partition in slices of bounded host time (staged steps, gpu_matrix.hpp): the table of block
/// predictions, the expensive part, is filled block by block across advance() calls, each returning once its
/// budget is spent; the DP runs in the call that completes the table. The strips, the cost callback and what
/// it refers to must outlive the planner. result() equals plan_partition's for the same arguments, except
/// planning_ms, which sums the advance() calls.
class partition_planner {
 public:
  partition_planner(std::vector<strip_summary> strips, size_type cols, std::vector<format_id> candidates, block_cost_fn cost,
                    const planner_options& opts = {}, const row_stats* whole = nullptr, double whole_x_sectors_per_nnz = -1.0);
  /// Works for about `budget_us` of host time (at least one block); true once result() is ready.
  bool advance(double budget_us);
  bool done() const { return done_; }
  const partition_plan& result() const { return plan_; }
  /// Blocks predicted so far and in all.
  std::size_t blocks_done() const { return blocks_done_; }
  std::size_t blocks_total() const;

 private:
  void finish();
  std::vector<strip_summary> strips_;
  size_type cols_;
  std::vector<format_id> candidates_;
  block_cost_fn cost_;
  planner_options opts_;
  std::optional<row_stats> whole_;
  double whole_x_;
  int n_ = 0;
  int j_ = 0, i_ = 0;  // the next block to predict: strips i_..j_ (i_ runs from j_ down to 0)
  std::vector<double> e_;
  std::vector<int> ef_;
  std::vector<double> us_;
  strip_accumulator acc_;
  std::size_t blocks_done_ = 0;
  double table_us_ = 0;  // host time of the table so far
  double spent_ms_ = 0;  // host time of every advance
  bool done_ = false;
  partition_plan plan_;
};

/// The same DP on a table of block costs, exposed for tests: cost(i, j) is E of strips i..j (inclusive,
/// i <= j < n), +infinity if no format is feasible; returns the strip index where each block begins
/// (first is 0) with at most max_blocks blocks, minimizing the sum.
std::vector<int> optimal_split(int n, const std::function<double(int, int)>& cost, int max_blocks);

}  // namespace aijp
