// Host unit tests of the partition planner: strip bins, strip summaries merged vs the host statistics,
// the DP vs brute-force enumeration, heterogeneous / homogeneous synthetic cases, planning time, plan
// strings, and the block-diagonal (stack:) generator.
#include <aijpredict/error.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/planner.hpp>
#include <aijpredict/predict.hpp>
#include <aijpredict/stats.hpp>

#include "test_matrices.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <vector>

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

using aijp::test::with_lengths;

// Rows [begin, end) of a, as a matrix of its own (for the host reference statistics of a block).
aijp::csr_matrix<double> rows_of(const aijp::csr_matrix<double>& a, aijp::size_type begin, aijp::size_type end)
{
  std::vector<int> lengths;
  for (aijp::size_type r = begin; r < end; ++r) lengths.push_back(a.row_ptr[r + 1] - a.row_ptr[r]);
  return with_lengths(lengths, a.cols);
}

std::vector<int> random_lengths(int rows, int max_len, std::uint64_t seed, double empty_fraction)
{
  aijp::gen::prng g(seed);
  std::vector<int> l(rows);
  for (auto& x : l) x = g.uniform() < empty_fraction ? 0 : static_cast<int>(g.below(max_len + 1));
  return l;
}

TEST(StripBins, EveryLengthFallsInsideItsBin)
{
  for (aijp::index_type len : {0, 1, 31, 63, 64, 65, 79, 80, 127, 128, 1000, 65535, 1 << 20, (1 << 30) + 7,
                               std::numeric_limits<aijp::index_type>::max()}) {
    const int b = aijp::strip_bin_of(len);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, aijp::strip_bins);
    EXPECT_LE(aijp::strip_bin_lower(b), len) << len;
    if (b + 1 < aijp::strip_bins) {
      EXPECT_LT(len, aijp::strip_bin_lower(b + 1)) << len;
    }
  }
  for (int b = 1; b < aijp::strip_bins; ++b) EXPECT_EQ(aijp::strip_bin_of(aijp::strip_bin_lower(b)), b) << b;
}

TEST(StripSummaries, StripRowsAreWarpMultiplesWithinTheBound)
{
  EXPECT_EQ(aijp::strip_rows_for(0, 128), 32);
  EXPECT_EQ(aijp::strip_rows_for(100, 128), 32);
  EXPECT_EQ(aijp::strip_rows_for(1000000, 128), 7840);
  for (aijp::size_type rows : {1, 31, 33, 4096, 4097, 123456789}) {
    const auto r = aijp::strip_rows_for(rows, 100);
    EXPECT_EQ(r % 32, 0);
    EXPECT_LE((rows + r - 1) / r, 100);
  }
}

// Merging strips i..j gives the host statistics of those rows: exactly when every row is shorter than 64,
// and on the exact fields otherwise.
void check_merges(const aijp::csr_matrix<double>& a, aijp::size_type strip_rows, bool all_exact)
{
  const auto strips = aijp::compute_strip_summaries(a.view(), strip_rows);
  ASSERT_EQ(static_cast<aijp::size_type>(strips.size()), (a.rows + strip_rows - 1) / strip_rows);
  for (std::size_t i = 0; i < strips.size(); ++i) {
    aijp::strip_accumulator acc;
    for (std::size_t j = i; j < strips.size(); ++j) {
      acc.add(strips[j]);
      const auto got = acc.stats(a.cols);
      const auto want = aijp::compute_row_stats(rows_of(a, strips[i].row_begin, strips[j].row_begin + strips[j].rows).view());
      const std::string what = "strips " + std::to_string(i) + ".." + std::to_string(j);
      EXPECT_EQ(got.rows, want.rows) << what;
      EXPECT_EQ(got.nnz, want.nnz) << what;
      EXPECT_EQ(got.min_len, want.min_len) << what;
      EXPECT_EQ(got.max_len, want.max_len) << what;
      EXPECT_EQ(got.empty_rows, want.empty_rows) << what;
      EXPECT_EQ(got.n_iter_natural, want.n_iter_natural) << what;
      EXPECT_EQ(got.chain_warp_nnz, want.chain_warp_nnz) << what;
      EXPECT_EQ(got.n_p, want.n_p) << what;
      EXPECT_DOUBLE_EQ(got.mean, want.mean) << what;
      EXPECT_NEAR(got.stddev, want.stddev, 1e-9 * (1 + want.stddev)) << what;
      if (all_exact) {
        EXPECT_EQ(got.mode_len, want.mode_len) << what;
        EXPECT_EQ(got.mode_count, want.mode_count) << what;
        EXPECT_EQ(got.n_iter_sorted, want.n_iter_sorted) << what;
        EXPECT_EQ(got.hyb_ell_width, want.hyb_ell_width) << what;
        EXPECT_EQ(got.hyb_coo_nnz, want.hyb_coo_nnz) << what;
      } else {
        // Approximate from the quarter-octave bins: within the bins' 25 %, and inside the hard bounds.
        EXPECT_LE(got.n_iter_sorted, got.n_iter_natural) << what;
        EXPECT_NEAR(static_cast<double>(got.n_iter_sorted), static_cast<double>(want.n_iter_sorted),
                    0.25 * want.n_iter_sorted + 1) << what;
        EXPECT_NEAR(got.hyb_ell_width, want.hyb_ell_width, 0.25 * want.hyb_ell_width + 1) << what;
      }
    }
  }
}

TEST(StripSummaries, MergedShortRowsEqualHostStatistics)
{
  // 1000 rows (last strip partial), lengths 0..40 with empty rows.
  check_merges(with_lengths(random_lengths(1000, 40, 3, 0.1), 64), 96, true);
}

TEST(StripSummaries, MergedLongRowsKeepExactFields)
{
  auto lengths = random_lengths(900, 3000, 5, 0.05);
  for (int r = 300; r < 400; ++r) lengths[r] = 5;  // a short region between long ones
  check_merges(with_lengths(lengths, 4000), 64, false);
}

// All partitions of 0..n-1 into at most max_blocks blocks, the best sum.
double brute_force(int n, const std::function<double(int, int)>& cost, int max_blocks)
{
  double best = inf;
  for (unsigned mask = 0; mask < (1u << (n - 1)); ++mask) {  // bit k: a block starts at k + 1
    if (__builtin_popcount(mask) + 1 > max_blocks) continue;
    double total = 0;
    int start = 0;
    for (int k = 0; k < n; ++k) {
      if (k == n - 1 || (mask >> k & 1u)) {
        total += cost(start, k);
        start = k + 1;
      }
    }
    best = std::min(best, total);
  }
  return best;
}

TEST(Planner, DynamicProgramEqualsBruteForce)
{
  aijp::gen::prng g(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(g.below(10));
    const int max_blocks = 1 + static_cast<int>(g.below(n + 1));
    std::vector<double> table(n * n);
    for (auto& v : table) v = g.uniform() < 0.1 ? inf : g.uniform(1, 10);
    const auto cost = [&](int i, int j) { return table[i * n + j]; };
    const auto starts = aijp::optimal_split(n, cost, max_blocks);
    ASSERT_FALSE(starts.empty());
    ASSERT_EQ(starts[0], 0);
    ASSERT_LE(static_cast<int>(starts.size()), max_blocks);
    double total = 0;
    for (std::size_t k = 0; k < starts.size(); ++k) {
      const int j = k + 1 < starts.size() ? starts[k + 1] - 1 : n - 1;
      ASSERT_LE(starts[k], j);
      total += cost(starts[k], j);
    }
    const double want = brute_force(n, cost, max_blocks);
    if (std::isinf(want)) {
      EXPECT_TRUE(std::isinf(total)) << "trial " << trial;
    } else {
      EXPECT_NEAR(total, want, 1e-9 * want) << "trial " << trial << ", n " << n << ", max blocks " << max_blocks;
    }
  }
}

TEST(Planner, TiesKeepFewerBlocks)
{
  // Additive costs: every partition costs the same, so the single block must win.
  const auto starts = aijp::optimal_split(6, [](int i, int j) { return double(j - i + 1); }, 6);
  EXPECT_EQ(starts, std::vector<int>{0});
}

// Toy cost: format 0 ("padded") pays for rows x max_len, format 1 ("per-entry") pays for nnz at twice the
// rate; both pay a launch of 5.
void toy_cost(const aijp::block_facts& b, std::vector<double>& us)
{
  const aijp::row_stats& s = b.stats;
  us[0] = 5 + 1e-3 * static_cast<double>(s.rows) * s.max_len;
  us[1] = 5 + 2e-3 * static_cast<double>(s.nnz);
}

TEST(Planner, HeterogeneousMatrixSplitsAtTheBoundary)
{
  // 4096 rows of 7 above 4096 rows of 0..30 with every 64th row 300 long: padded wins on top, per-entry
  // below (and on the whole matrix).
  std::vector<int> lengths(4096, 7);
  auto tail = random_lengths(4096, 30, 9, 0.0);
  for (std::size_t r = 0; r < tail.size(); r += 64) tail[r] = 300;
  lengths.insert(lengths.end(), tail.begin(), tail.end());
  const auto a = with_lengths(lengths, 400);
  const auto strips = aijp::compute_strip_summaries(a.view(), aijp::strip_rows_for(a.rows, 64));
  const std::vector<aijp::format_id> cands{aijp::format_id::ell, aijp::format_id::coo};
  const auto plan = aijp::plan_partition(strips, a.cols, cands, toy_cost);
  ASSERT_EQ(plan.blocks.size(), 2u) << plan.to_string();
  EXPECT_EQ(plan.blocks[0].row_begin, 0);
  EXPECT_EQ(plan.blocks[0].row_end, 4096);
  EXPECT_EQ(plan.blocks[0].format, aijp::format_id::ell);
  EXPECT_EQ(plan.blocks[1].row_end, a.rows);
  EXPECT_EQ(plan.blocks[1].format, aijp::format_id::coo);
  EXPECT_LT(plan.predicted_us, plan.single_us);
  EXPECT_EQ(plan.to_string(), "ell[0,4096)+coo[4096,8192)");
}

TEST(Planner, HomogeneousMatrixDoesNotSplit)
{
  const auto a = with_lengths(std::vector<int>(10000, 7), 100);
  const auto strips = aijp::compute_strip_summaries(a.view(), aijp::strip_rows_for(a.rows, 128));
  const std::vector<aijp::format_id> cands{aijp::format_id::ell, aijp::format_id::coo};
  const auto plan = aijp::plan_partition(strips, a.cols, cands, toy_cost);
  ASSERT_EQ(plan.blocks.size(), 1u) << plan.to_string();
  EXPECT_EQ(plan.blocks[0].format, aijp::format_id::ell);
  EXPECT_DOUBLE_EQ(plan.predicted_us, plan.single_us);
}

TEST(Planner, ExactWholeStatisticsReplaceTheMergedOnes)
{
  const auto a = with_lengths(random_lengths(2000, 200, 11, 0.0), 300);
  const auto strips = aijp::compute_strip_summaries(a.view(), 64);
  auto whole = aijp::compute_row_stats(a.view());
  whole.max_len = 1;  // a marker: the single-format baseline must read it
  const std::vector<aijp::format_id> cands{aijp::format_id::ell, aijp::format_id::coo};
  const auto plan = aijp::plan_partition(strips, a.cols, cands, toy_cost, {}, &whole);
  EXPECT_EQ(plan.single_format, aijp::format_id::ell);
  EXPECT_DOUBLE_EQ(plan.single_us, 5 + 1e-3 * 2000);
}

TEST(Planner, InfeasibleEverywhereGivesOneCusparseBlock)
{
  const auto a = with_lengths(std::vector<int>(1000, 3), 10);
  const auto strips = aijp::compute_strip_summaries(a.view(), 64);
  const auto plan = aijp::plan_partition(strips, a.cols, {aijp::format_id::ell},
                                         [](const aijp::block_facts&, std::vector<double>& us) { us[0] = inf; });
  ASSERT_EQ(plan.blocks.size(), 1u);
  EXPECT_EQ(plan.blocks[0].format, aijp::format_id::cusparse_csr);
  EXPECT_EQ(plan.blocks[0].row_end, 1000);
}

// A banded block of 4096 rows (columns in order: 1 sector per 4 entries at most) above 4096 rows of 8 random
// columns of 2^20 (1 sector per entry).
aijp::csr_matrix<double> banded_over_random()
{
  const auto top = aijp::gen::banded(4096, 4);
  const auto body = aijp::gen::row_length_distribution(4096, 1 << 20, aijp::gen::row_length_dist::constant, 8, 0, 5);
  return aijp::gen::block_diagonal({top, body});
}

TEST(Planner, StripLocalitySeparatesTheBlocksAndWeighsByNonzeros)
{
  // The strips' sampled locality tells the banded rows from the random ones, a block's is the nonzero-weighted
  // mean, and the cost callback receives it (the whole matrix's when given).
  const auto top = aijp::gen::banded(4096, 4);
  const auto a = banded_over_random();
  auto strips = aijp::compute_strip_summaries(a.view(), 1024);
  ASSERT_EQ(strips.size(), 8u);
  for (const auto& st : strips) EXPECT_LT(st.x_sectors_per_nnz, 0.0);  // not sampled yet
  aijp::add_strip_locality_host(a.view(), strips, 2);
  for (int k = 0; k < 4; ++k) EXPECT_LT(strips[k].x_sectors_per_nnz, 0.35) << k;
  for (int k = 4; k < 8; ++k) EXPECT_GT(strips[k].x_sectors_per_nnz, 0.9) << k;
  aijp::strip_accumulator acc;
  EXPECT_EQ(acc.x_sectors_per_nnz(), 0.0);
  double num = 0, den = 0;
  for (int k = 3; k < 6; ++k) {
    acc.add(strips[k]);
    num += strips[k].x_sectors_per_nnz * strips[k].nnz;
    den += strips[k].nnz;
  }
  EXPECT_NEAR(acc.x_sectors_per_nnz(), num / den, 1e-12);

  const std::vector<aijp::format_id> cands{aijp::format_id::cusparse_csr};
  double seen_top = -1, seen_all = -1;
  const auto cost = [&](const aijp::block_facts& f, std::vector<double>& us) {
    const aijp::row_stats& b = f.stats;
    if (b.rows == 4096 && b.nnz == top.nnz()) seen_top = f.x_sectors_per_nnz;
    if (b.rows == a.rows) seen_all = f.x_sectors_per_nnz;
    us[0] = 1.0 + b.nnz * 1e-6;
  };
  const auto whole = aijp::compute_row_stats(a.view());
  aijp::plan_partition(strips, a.cols, cands, cost, {}, &whole, 0.5);
  EXPECT_NEAR(seen_top, (strips[0].x_sectors_per_nnz * strips[0].nnz + strips[1].x_sectors_per_nnz * strips[1].nnz +
                         strips[2].x_sectors_per_nnz * strips[2].nnz + strips[3].x_sectors_per_nnz * strips[3].nnz) /
                            top.nnz(),
              1e-12);
  EXPECT_EQ(seen_all, 0.5);
}

// A block's strips binned by their locality into a gather mixture (strip_accumulator::x_mixture), nonzero-weighted as
// the whole-matrix sampler's windows: the banded strip and the random-column strips land in their own bins. The cost
// callback gets it for a partial block and none for the block of all rows (which has the whole matrix's own).
TEST(Planner, BlockMixtureBinsItsStripsByLocality)
{
  const auto a = banded_over_random();
  auto strips = aijp::compute_strip_summaries(a.view(), 1024);
  ASSERT_EQ(strips.size(), 8u);
  aijp::strip_accumulator acc;
  acc.add(strips[0]);  // not sampled yet
  EXPECT_FALSE(acc.x_mixture().known());
  aijp::add_strip_locality_host(a.view(), strips, 2);
  acc.clear();
  for (int k = 3; k < 6; ++k) acc.add(strips[k]);
  const aijp::gather_mixture m = acc.x_mixture();
  ASSERT_TRUE(m.known());
  const int low = static_cast<int>(strips[3].x_sectors_per_nnz * aijp::gather_mixture::bins);
  const int high = aijp::gather_mixture::bins - 1;
  ASSERT_LT(low, high);
  const double nnz = static_cast<double>(strips[3].nnz + strips[4].nnz + strips[5].nnz);
  EXPECT_NEAR(m.share[low], strips[3].nnz / nnz, 1e-12);
  EXPECT_NEAR(m.ratio[low], strips[3].x_sectors_per_nnz, 1e-12);
  EXPECT_NEAR(m.share[high], (strips[4].nnz + strips[5].nnz) / nnz, 1e-12);
  EXPECT_NEAR(m.ratio[high], (strips[4].x_sectors_per_nnz * strips[4].nnz + strips[5].x_sectors_per_nnz * strips[5].nnz) /
                                 (strips[4].nnz + strips[5].nnz), 1e-12);
  EXPECT_NEAR(m.mean(), acc.x_sectors_per_nnz(), 1e-12);
  EXPECT_EQ(m.longest_row_len, 0.0);

  bool partial_known = true, all_known = true;
  const auto cost = [&](const aijp::block_facts& f, std::vector<double>& us) {
    if (f.stats.rows == a.rows) all_known = f.x_mixture.known();
    else partial_known = partial_known && f.x_mixture.known();
    us[0] = 1.0 + f.stats.nnz * 1e-6;
  };
  const auto whole = aijp::compute_row_stats(a.view());
  aijp::plan_partition(strips, a.cols, {aijp::format_id::cusparse_csr}, cost, {}, &whole, 0.5);
  EXPECT_TRUE(partial_known);
  EXPECT_FALSE(all_known);
}

// The prediction input of a block (block_prediction_input): a partial block gets the rest of the matrix's bytes as
// what shares the L2 with it, its strips' mixture (with the whole matrix's longest sampled row only where its own
// longest row has that length), its locality and column facts; the block of all rows keeps the whole matrix's.
TEST(Planner, BlockPredictionInputOfAPartAndOfTheWhole)
{
  aijp::prediction_input whole;
  whole.stats.rows = 1000, whole.stats.nnz = 20000, whole.stats.max_len = 500;
  whole.x_sectors_per_nnz = 0.3;
  whole.x_mixture.share[2] = 1.0, whole.x_mixture.ratio[2] = 0.3;
  whole.x_mixture.longest_row_len = 500, whole.x_mixture.longest_row_ratio = 0.9;
  whole.max_column_step = 900, whole.columns_sorted = false;
  aijp::block_facts part;
  part.stats.rows = 400, part.stats.nnz = 6000, part.stats.max_len = 500;
  part.x_sectors_per_nnz = 0.7;
  part.x_mixture.share[5] = 1.0, part.x_mixture.ratio[5] = 0.7;
  part.max_column_step = 40, part.unsorted_steps = 0;
  auto in = aijp::block_prediction_input(whole, part);
  EXPECT_EQ(in.stats.rows, 400);
  EXPECT_DOUBLE_EQ(in.x_sectors_per_nnz, 0.7);
  EXPECT_DOUBLE_EQ(in.l2_shared_bytes, aijp::rest_of_matrix_bytes(whole.stats, part.stats, whole.value_bytes));
  EXPECT_GT(in.l2_shared_bytes, 0.0);
  EXPECT_EQ(in.x_mixture.share, part.x_mixture.share);
  EXPECT_EQ(in.x_mixture.ratio, part.x_mixture.ratio);
  EXPECT_DOUBLE_EQ(in.x_mixture.longest_row_len, 500.0);  // its longest row is likely the whole matrix's sampled one
  EXPECT_DOUBLE_EQ(in.x_mixture.longest_row_ratio, 0.9);
  EXPECT_EQ(in.max_column_step, 40);
  EXPECT_TRUE(in.columns_sorted);
  part.stats.max_len = 30;  // not that row
  part.max_column_step = -1;
  in = aijp::block_prediction_input(whole, part);
  EXPECT_EQ(in.x_mixture.longest_row_len, 0.0);
  EXPECT_EQ(in.max_column_step, 900);
  EXPECT_FALSE(in.columns_sorted);

  aijp::block_facts all;
  all.stats = whole.stats;
  in = aijp::block_prediction_input(whole, all);
  EXPECT_EQ(in.l2_shared_bytes, 0.0);
  EXPECT_EQ(in.x_mixture.share, whole.x_mixture.share);
  EXPECT_DOUBLE_EQ(in.x_sectors_per_nnz, 0.3);
  EXPECT_DOUBLE_EQ(in.x_mixture.longest_row_ratio, 0.9);
}

TEST(Planner, StripColumnFactsMergeAndReachTheCost)
{
  // A 27-point stencil (steps of at most 16^2 + 16 + 1) above rows of random columns in 2^20: the strips'
  // column steps tell them apart, a block's is the largest of its strips', and an uninspected strip makes a
  // block's unknown (-1).
  const auto top = aijp::gen::laplacian_3d_27pt(16, 16, 16);
  const auto body = aijp::gen::row_length_distribution(4096, 1 << 20, aijp::gen::row_length_dist::constant, 8, 0, 5);
  const auto a = aijp::gen::block_diagonal({top, body});
  auto strips = aijp::compute_strip_summaries(a.view(), 1024);
  ASSERT_EQ(strips.size(), 8u);
  aijp::add_strip_columns_host(a.view(), strips);
  for (int k = 0; k < 4; ++k) {
    EXPECT_GT(strips[k].max_column_step, 0) << k;
    EXPECT_LE(strips[k].max_column_step, 16 * 16 + 16 + 1) << k;
    EXPECT_EQ(strips[k].unsorted_steps, 0) << k;
  }
  for (int k = 4; k < 8; ++k) EXPECT_GT(strips[k].max_column_step, aijp::sell_delta16_max_step) << k;

  aijp::strip_accumulator acc;
  for (int k = 0; k < 4; ++k) acc.add(strips[k]);
  EXPECT_LE(acc.max_column_step(), 16 * 16 + 16 + 1);
  acc.add(strips[4]);
  EXPECT_EQ(acc.max_column_step(), strips[4].max_column_step);
  auto unknown = strips[5];
  unknown.max_column_step = -1;
  acc.add(unknown);
  EXPECT_EQ(acc.max_column_step(), -1);

  // The cost callback sees each block's facts: sell_delta16 (candidate 1) only where the steps fit.
  const std::vector<aijp::format_id> cands{aijp::format_id::cusparse_csr, aijp::format_id::sell_delta16};
  const auto cost = [&](const aijp::block_facts& b, std::vector<double>& us) {
    us[0] = 10 + 1e-3 * static_cast<double>(b.stats.nnz);
    const bool fits = b.max_column_step >= 0 && b.max_column_step <= aijp::sell_delta16_max_step && b.unsorted_steps == 0;
    us[1] = fits ? 10 + 0.5e-3 * static_cast<double>(b.stats.nnz) : inf;
  };
  const auto plan = aijp::plan_partition(strips, a.cols, cands, cost);
  EXPECT_EQ(plan.to_string(), "sell_delta16[0,4096)+cusparse_csr[4096,8192)");
  EXPECT_EQ(plan.single_format, aijp::format_id::cusparse_csr);
}

TEST(Planner, PlanningTimeWithTheBandwidthModel)
{
  // 64 / 128 / 256 strips x 14 formats through the placeholder model: the host cost of planning.
  auto lengths = random_lengths(256 * 1024, 60, 13, 0.0);
  for (int r = 0; r < 256; ++r) lengths[r] = 20000;  // dense rows at the top
  const auto a = with_lengths(lengths, 30000);
  aijp::prediction_input in;
  in.value_bytes = 8;
  in.device.l2_bytes = 50 << 20;
  const auto cands = aijp::all_formats();
  const aijp::bandwidth_model_params p;
  const auto cost = [&](const aijp::block_facts& b, std::vector<double>& us) {
    in.stats = b.stats;
    const auto est = aijp::predict_bandwidth_model(in, p, cands);
    for (std::size_t k = 0; k < est.size(); ++k) us[k] = est[k].feasible ? est[k].predicted_us : inf;
  };
  for (int max_strips : {64, 128, 256}) {
    aijp::planner_options o;
    o.max_strips = max_strips;
    const auto strips = aijp::compute_strip_summaries(a.view(), aijp::strip_rows_for(a.rows, max_strips));
    ASSERT_EQ(static_cast<int>(strips.size()), max_strips);
    const auto plan = aijp::plan_partition(strips, a.cols, cands, cost, o);
    std::cout << "[ planning ] " << max_strips << " strips x 14 formats: " << plan.planning_ms << " ms; plan "
              << plan.to_string() << " (" << plan.predicted_us << " us vs " << plan.single_us << " us for "
              << aijp::format_name(plan.single_format) << ")\n";
    RecordProperty("planning_ms_" + std::to_string(max_strips), std::to_string(plan.planning_ms));
    EXPECT_GT(plan.planning_ms, 0.0);
    EXPECT_LE(plan.predicted_us, plan.single_us);
  }
}

TEST(Planner, StripsWithinABudget)
{
  // n strips are n (n + 1) / 2 blocks of `candidates` predictions each.
  EXPECT_EQ(aijp::strips_within(0, 0.2, 14, 64), 0);
  EXPECT_EQ(aijp::strips_within(-5, 0.2, 14, 64), 0);
  for (int n : {1, 2, 23, 24, 40, 63}) {
    const double exact = 0.5 * n * (n + 1) * 14 * 0.25;
    EXPECT_EQ(aijp::strips_within(exact, 0.25, 14, 64), n) << n;
    EXPECT_EQ(aijp::strips_within(exact * 0.999, 0.25, 14, 64), n - 1) << n;
  }
  EXPECT_EQ(aijp::strips_within(1e12, 0.25, 14, 64), 64);  // bounded by max_strips
  EXPECT_EQ(aijp::strips_within(1e12, 0.25, 14, 0), 0);
  // Fewer candidates, more strips for the same budget.
  EXPECT_GT(aijp::strips_within(500, 0.25, 2, 64), aijp::strips_within(500, 0.25, 14, 64));
}

TEST(Planner, PlanningMeasuresItsRatePerPrediction)
{
  // Each plan_partition with enough predictions updates the process's rate: a slow cost callback (100 us
  // per block of one candidate) moves it far above any real model's.
  const auto a = with_lengths(random_lengths(32 * 20, 12, 3, 0.0), 640);
  const auto strips = aijp::compute_strip_summaries(a.view(), 32);
  ASSERT_EQ(strips.size(), 20u);  // 210 blocks
  const auto slow = [](const aijp::block_facts& b, std::vector<double>& us) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
    while (std::chrono::steady_clock::now() < until) {
    }
    us[0] = 1.0 + 0.01 * static_cast<double>(b.stats.nnz);
  };
  for (int k = 0; k < 6; ++k) aijp::plan_partition(strips, a.cols, {aijp::format_id::csr_scalar}, slow);
  // After six such plannings the running mean is at least (1 - 2^-6) of 100 us.
  EXPECT_GE(aijp::planning_us_per_estimate(), 95.0);
  EXPECT_LT(aijp::planning_us_per_estimate(), 1e5);
  // A fast callback pulls it back down.
  const auto fast = [](const aijp::block_facts& b, std::vector<double>& us) { us[0] = 1.0 + 0.01 * static_cast<double>(b.stats.nnz); };
  for (int k = 0; k < 12; ++k) aijp::plan_partition(strips, a.cols, {aijp::format_id::csr_scalar}, fast);
  EXPECT_LT(aijp::planning_us_per_estimate(), 5.0);
}

// The runtime's block cost with the placeholder model and the default (H100) constants.
struct placeholder_cost {
  aijp::prediction_input in;
  const aijp::bandwidth_model_params p;
  const std::vector<aijp::format_id> cands = aijp::all_formats();
  placeholder_cost()
  {
    in.value_bytes = 8;
    in.device.l2_bytes = 50 << 20;
    in.device.sm_count = 132;
    in.free_memory_bytes = 70ll << 30;
  }
  aijp::block_cost_fn fn()
  {
    return [this](const aijp::block_facts& b, std::vector<double>& us) {
      in.stats = b.stats;
      const auto est = aijp::predict_bandwidth_model(in, p, cands);
      for (std::size_t k = 0; k < est.size(); ++k) us[k] = est[k].feasible ? est[k].predicted_us : inf;
    };
  }
};

// The whole host pipeline with the placeholder model, as the runtime plans: strips of at most 64, exact
// statistics for the whole matrix.
aijp::partition_plan plan_with_placeholder(const aijp::csr_matrix<double>& a)
{
  placeholder_cost c;
  const auto whole = aijp::compute_row_stats(a.view());
  const aijp::planner_options o;
  const auto strips = aijp::compute_strip_summaries(a.view(), aijp::strip_rows_for(a.rows, o.max_strips));
  return aijp::plan_partition(strips, a.cols, c.cands, c.fn(), o, &whole);
}

TEST(Planner, StencilAbovePowerLawSplitsUnderThePlaceholderModel)
{
  // 27-point stencil (262144 rows) above 30000 power-law rows: sell_delta16 for the stencil, a format for
  // long rows below (~7 % predicted gain over HYB alone).
  const auto a = aijp::gen::from_spec("stack:lap27:64x64x64+powerlaw:rows=30000,deg=16,exp=2.1");
  const auto plan = plan_with_placeholder(a);
  std::cout << "[ planning ] " << plan.to_string() << ": " << plan.predicted_us << " us vs " << plan.single_us << " us for "
            << aijp::format_name(plan.single_format) << ", " << plan.planning_ms << " ms\n";
  ASSERT_EQ(plan.blocks.size(), 2u) << plan.to_string();
  EXPECT_EQ(plan.blocks[0].format, aijp::format_id::sell_delta16);
  EXPECT_NEAR(static_cast<double>(plan.blocks[0].row_end), 262144.0, static_cast<double>(plan.strip_rows));
  EXPECT_LT(plan.predicted_us, 0.97 * plan.single_us);
  EXPECT_EQ(plan.blocks[0].nnz + plan.blocks[1].nnz, a.nnz());
}

TEST(Planner, SlicedPlanningGivesTheSamePlan)
{
  // partition_planner in slices of (at least) one block each equals plan_partition in one go: blocks,
  // formats, predictions, the single-format baseline.
  const auto a = aijp::gen::from_spec("stack:lap27:64x64x64+powerlaw:rows=30000,deg=16,exp=2.1");
  placeholder_cost c;
  const auto& cands = c.cands;
  const auto cost = c.fn();
  const auto whole = aijp::compute_row_stats(a.view());
  aijp::planner_options o;
  o.max_strips = 24;
  const auto strips = aijp::compute_strip_summaries(a.view(), aijp::strip_rows_for(a.rows, o.max_strips));
  const auto once = aijp::plan_partition(strips, a.cols, cands, cost, o, &whole);
  aijp::partition_planner sliced(strips, a.cols, cands, cost, o, &whole);
  EXPECT_EQ(sliced.blocks_total(), strips.size() * (strips.size() + 1) / 2);
  int calls = 0;
  while (!sliced.advance(0.0)) ++calls;
  ++calls;
  EXPECT_EQ(static_cast<std::size_t>(calls), sliced.blocks_total()) << "a zero budget predicts one block per call";
  EXPECT_EQ(sliced.blocks_done(), sliced.blocks_total());
  const auto& r = sliced.result();
  EXPECT_EQ(r.to_string(), once.to_string());
  EXPECT_DOUBLE_EQ(r.predicted_us, once.predicted_us);
  EXPECT_DOUBLE_EQ(r.single_us, once.single_us);
  EXPECT_EQ(r.single_format, once.single_format);
  EXPECT_EQ(r.strips, once.strips);
  ASSERT_EQ(r.blocks.size(), once.blocks.size());
  for (std::size_t k = 0; k < r.blocks.size(); ++k) EXPECT_EQ(r.blocks[k].nnz, once.blocks[k].nnz);
  EXPECT_GT(r.planning_ms, 0.0);
  EXPECT_TRUE(sliced.advance(0.0)) << "done stays done";
}

TEST(Planner, StencilAloneDoesNotSplitUnderThePlaceholderModel)
{
  const auto plan = plan_with_placeholder(aijp::gen::laplacian_3d_27pt(64, 64, 64));
  ASSERT_EQ(plan.blocks.size(), 1u) << plan.to_string();
  EXPECT_EQ(plan.blocks[0].format, plan.single_format);
  EXPECT_DOUBLE_EQ(plan.predicted_us, plan.single_us);
}

TEST(PartitionPlan, StringsRoundTripAndBadOnesThrow)
{
  const auto p = aijp::parse_partition_plan("sell_delta16[0,262144)+coo[262144,300000)");
  ASSERT_EQ(p.blocks.size(), 2u);
  EXPECT_EQ(p.blocks[1].format, aijp::format_id::coo);
  EXPECT_EQ(p.blocks[1].row_begin, 262144);
  EXPECT_EQ(p.to_string(), "sell_delta16[0,262144)+coo[262144,300000)");
  for (const char* bad : {"", "coo[1,5)", "coo[0,5)+ell[6,9)", "coo[0,5)+", "coo[0,0)", "nope[0,5)", "coo[0,x)", "coo[0,5)ell[5,6)"}) {
    EXPECT_THROW(aijp::parse_partition_plan(bad), aijp::bad_input) << bad;
  }
}

TEST(Generators, StackIsBlockDiagonalAndDeterministic)
{
  const auto top = aijp::gen::laplacian_3d_7pt(4, 4, 4);
  const auto bottom = aijp::gen::power_law(100, 5, 2.1, 3);
  const auto a = aijp::gen::from_spec("stack:lap7:4x4x4+powerlaw:rows=100,deg=5,exp=2.1,seed=3");
  EXPECT_EQ(a.rows, top.rows + bottom.rows);
  EXPECT_EQ(a.cols, top.cols + bottom.cols);
  EXPECT_EQ(a.nnz(), top.nnz() + bottom.nnz());
  ASSERT_EQ(a.row_ptr.size(), static_cast<std::size_t>(a.rows) + 1);
  for (aijp::size_type r = 0; r < bottom.rows; ++r) {
    const auto b = a.row_ptr[top.rows + r], e = a.row_ptr[top.rows + r + 1];
    ASSERT_EQ(e - b, bottom.row_ptr[r + 1] - bottom.row_ptr[r]);
    for (auto k = b; k < e; ++k) {
      EXPECT_EQ(a.col_idx[k], top.cols + bottom.col_idx[bottom.row_ptr[r] + (k - b)]);
      EXPECT_EQ(a.values[k], bottom.values[bottom.row_ptr[r] + (k - b)]);
    }
  }
  const auto again = aijp::gen::from_spec("stack:lap7:4x4x4+powerlaw:rows=100,deg=5,exp=2.1,seed=3");
  EXPECT_EQ(again.row_ptr, a.row_ptr);
  EXPECT_EQ(again.col_idx, a.col_idx);
  EXPECT_EQ(again.values, a.values);
  EXPECT_THROW(aijp::gen::from_spec("stack:lap7:4x4x4+"), aijp::bad_input);
  EXPECT_THROW(aijp::gen::from_spec("stack:lap7:4x4x4+stack:lap5:3x3"), aijp::bad_input);
  EXPECT_THROW(aijp::gen::from_spec("stack:"), aijp::bad_input);
  EXPECT_NE(aijp::gen::spec_help().find("stack:"), std::string::npos);
}

}  // namespace
