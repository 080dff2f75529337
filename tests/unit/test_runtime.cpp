// Host unit tests of the runtime: statistics, strip geometry, formats, placeholder prediction, reference.
#include <aijpredict/device_geometry.hpp>
#include <aijpredict/error.hpp>
#include <aijpredict/formats.hpp>
#include <aijpredict/predict.hpp>
#include <aijpredict/reference.hpp>
#include <aijpredict/stats.hpp>

#include "test_matrices.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <map>
#include <tuple>

#include <cmath>
#include <limits>
#include <vector>

namespace {

using aijp::test::with_lengths;

aijp::device_properties h100_like()
{
  aijp::device_properties d;
  d.name = "test GPU";
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.max_threads_per_block = 1024;
  d.warp_size = 32;
  d.mem_bus_width_bits = 5120;
  d.mem_clock_khz = 2619000;
  return d;
}

TEST(RowStats, HandComputedSmallMatrix)
{
  const auto a = with_lengths({2, 0, 3, 3, 1}, 4);
  const auto s = aijp::compute_row_stats(a.view());
  EXPECT_EQ(s.rows, 5);
  EXPECT_EQ(s.nnz, 9);
  EXPECT_DOUBLE_EQ(s.mean, 1.8);
  EXPECT_NEAR(s.stddev, std::sqrt(4.6 - 1.8 * 1.8), 1e-15);
  EXPECT_EQ(s.min_len, 0);
  EXPECT_EQ(s.max_len, 3);
  EXPECT_EQ(s.spread(), 3);
  EXPECT_EQ(s.mode_len, 3);
  EXPECT_EQ(s.mode_count, 2);
  EXPECT_EQ(s.empty_rows, 1);
  EXPECT_EQ(s.n_iter_natural, 3);
  EXPECT_EQ(s.n_iter_sorted, 3);
  EXPECT_EQ(s.chain_warp_nnz, 9);  // one group of 5 rows
  EXPECT_DOUBLE_EQ(aijp::chain_lanes(s), 3.0);
  EXPECT_EQ(s.n_p, 2 * 9 - 4);
  EXPECT_EQ(s.hyb_ell_width, 0);  // fewer than 4096 rows: everything goes to COO
  EXPECT_EQ(s.hyb_coo_nnz, 9);
}

TEST(RowStats, IterationCountsNaturalVersusSorted)
{
  std::vector<int> len(64, 1);
  for (int r = 32; r < 64; ++r) len[r] = 10;
  len[5] = 10;
  len[40] = 1;
  const auto s = aijp::compute_row_stats(with_lengths(len, 16).view());
  EXPECT_EQ(s.n_iter_natural, 20);  // both warps contain a row of 10
  EXPECT_EQ(s.n_iter_sorted, 11);   // sorted: 32 rows of 10, then 32 rows of 1
  EXPECT_EQ(s.mode_len, 1);         // tie 32/32 goes to the shorter length
  // Both groups hold a row of 10: the chain is the fuller one (31 rows of 10 and one of 1).
  EXPECT_EQ(s.chain_warp_nnz, 311);
  EXPECT_NEAR(aijp::chain_lanes(s), 31.1, 1e-12);
}

TEST(RowStats, ChainLanesOfOneLongRowAndOfABlockOfThem)
{
  // One row of 1000 among short rows: its group runs one lane for most of the chain.
  std::vector<int> len(256, 4);
  len[100] = 1000;
  auto s = aijp::compute_row_stats(with_lengths(len, 2048).view());
  EXPECT_EQ(s.chain_warp_nnz, 1000 + 31 * 4);
  EXPECT_NEAR(aijp::chain_lanes(s), 1.124, 1e-12);
  // 20 rows of 1000 together (a circuit's dense rows at the top): 20 lanes.
  for (int r = 0; r < 20; ++r) len[r] = 1000;
  s = aijp::compute_row_stats(with_lengths(len, 2048).view());
  EXPECT_EQ(s.chain_warp_nnz, 20 * 1000 + 12 * 4);
  EXPECT_NEAR(aijp::chain_lanes(s), 20.048, 1e-12);
  // Unknown (older samples) or empty: one lane.
  s.chain_warp_nnz = 0;
  EXPECT_EQ(aijp::chain_lanes(s), 1.0);
  EXPECT_EQ(aijp::chain_lanes(aijp::row_stats{}), 1.0);
}

TEST(RowStats, SortedChainLanesAreTheHarmonicMeanOfTheLongestRowsStillRunning)
{
  // One row of 1000, apart from its natural group, and 31 rows of 10 next: the sorted first group runs 32 lanes
  // for 10 steps, then one lane for 990; harmonic mean 1000 / (10 / 32 + 990 / 1).
  std::vector<int> len(256, 4);
  len[100] = 1000;
  for (int r = 200; r < 231; ++r) len[r] = 10;
  auto s = aijp::compute_row_stats(with_lengths(len, 2048).view());
  EXPECT_NEAR(s.sorted_chain_lanes, 1000.0 / (10.0 / 32 + 990.0), 1e-9);
  EXPECT_NEAR(aijp::sorted_chain_lanes(s), s.sorted_chain_lanes, 1e-12);
  EXPECT_NEAR(aijp::chain_lanes(s), 1.124, 1e-12);  // the natural group is unchanged
  // Two rows of 100 and 50 among rows of 1: 2 lanes for 50 steps, 1 for 50, 32 for the first step.
  std::vector<int> few(40, 1);
  few[3] = 100;
  few[30] = 50;
  s = aijp::compute_row_stats(with_lengths(few, 64).view());
  EXPECT_NEAR(s.sorted_chain_lanes, 100.0 / (1.0 / 32 + 49.0 / 2 + 50.0), 1e-9);
  // Fewer than 32 rows: every row runs (3 rows of 5, 3 lanes throughout).
  s = aijp::compute_row_stats(with_lengths(std::vector<int>{5, 5, 5}, 8).view());
  EXPECT_NEAR(s.sorted_chain_lanes, 3.0, 1e-12);
  // Unknown (older samples): the natural group's lanes.
  s = aijp::compute_row_stats(with_lengths(len, 2048).view());
  s.sorted_chain_lanes = 0;
  EXPECT_EQ(aijp::sorted_chain_lanes(s), aijp::chain_lanes(s));
}

TEST(PlaceholderModel, JadChainTakesTheLanesOfTheSortedOrder)
{
  // The same natural statistics, one long row alone in its natural group; in the sorted order either alone
  // (the next rows short) or walked by 32 rows almost as long. JAD's chain grows with the sorted lanes.
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50u << 20;
  std::vector<int> len(4096, 4);
  len[100] = 1000;
  in.stats = aijp::compute_row_stats(with_lengths(len, 4096).view());
  aijp::bandwidth_model_params p;
  p.format_chain_lanes[static_cast<int>(aijp::format_id::jad)] = 1.0;
  p.format_chain_lanes[static_cast<int>(aijp::format_id::csr_scalar)] = 1.0;
  const auto alone = aijp::explain_bandwidth_model(aijp::format_id::jad, in, p);
  EXPECT_NEAR(alone.lanes, in.stats.sorted_chain_lanes, 1e-12);
  auto tail = in;
  tail.stats.sorted_chain_lanes = 30.0;
  const auto walked = aijp::explain_bandwidth_model(aijp::format_id::jad, tail, p);
  EXPECT_EQ(walked.lanes, 30.0);
  EXPECT_GT(walked.chain_us, 1.5 * alone.chain_us);
  // The natural-order layouts keep the natural group's lanes (csr_scalar: its SM's busy rows, from the same
  // natural statistics).
  EXPECT_EQ(aijp::explain_bandwidth_model(aijp::format_id::ellr, tail, p).lanes, aijp::chain_lanes(in.stats));
  EXPECT_EQ(aijp::explain_bandwidth_model(aijp::format_id::csr_scalar, tail, p).lanes,
            aijp::csr_scalar_chain_lanes(in.stats, &in.device));
}

TEST(RowStats, BellGarlandHybWidth)
{
  std::vector<int> len(10000, 2);
  for (int r = 0; r < 5000; ++r) len[r] = 4;
  auto s = aijp::compute_row_stats(with_lengths(len, 16).view());
  EXPECT_EQ(s.hyb_ell_width, 4);
  EXPECT_EQ(s.hyb_coo_nnz, 0);

  std::vector<int> len2(10000, 1);
  for (int r = 0; r < 3000; ++r) len2[r] = 10;
  s = aijp::compute_row_stats(with_lengths(len2, 16).view());
  EXPECT_EQ(s.hyb_ell_width, 1);  // only 3000 < 4096 rows reach length 2
  EXPECT_EQ(s.hyb_coo_nnz, 3000 * 9);
}

// The statistics walk only the occupied lengths (stats_from_bins); checked against their definitions,
// computed from the sorted row lengths, on matrices with a few very long rows (nearly all bins empty).
TEST(RowStats, SparseHistogramMatchesDefinitions)
{
  for (unsigned seed = 1; seed <= 6; ++seed) {
    std::vector<int> len(9000 + 1000 * seed);
    unsigned x = seed * 2654435761u;
    for (auto& l : len) {
      x = x * 1664525u + 1013904223u;
      l = (x >> 28) % 3 == 0 ? 0 : 3 + (x >> 24) % 5;
    }
    for (int k = 0; k < static_cast<int>(seed) * 7; ++k) len[(k * 977) % len.size()] = 20000 + 1000 * (k % 3);
    const auto s = aijp::compute_row_stats(with_lengths(len, 30000).view());

    std::vector<int> sorted = len;
    std::sort(sorted.begin(), sorted.end(), std::greater<int>());
    long long n_iter_sorted = 0, nnz = 0;
    for (std::size_t w = 0; w < sorted.size(); w += 32) n_iter_sorted += sorted[w];
    for (int l : len) nnz += l;
    const long long threshold = std::max<long long>(4096, static_cast<long long>(len.size()) / 3);
    int k = 0;  // Bell-Garland: the largest K with at least `threshold` rows of length >= K
    while (k + 1 <= sorted.front() && static_cast<long long>(std::count_if(len.begin(), len.end(), [&](int l) { return l >= k + 1; })) >= threshold) ++k;
    long long coo = 0;
    for (int l : len) coo += std::max(0, l - k);
    std::map<int, long long> count;
    for (int l : len) ++count[l];
    auto mode = std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });

    EXPECT_EQ(s.nnz, nnz) << seed;
    EXPECT_EQ(s.n_iter_sorted, n_iter_sorted) << seed;
    EXPECT_EQ(s.hyb_ell_width, k) << seed;
    EXPECT_EQ(s.hyb_coo_nnz, coo) << seed;
    EXPECT_EQ(s.mode_len, mode->first) << seed;
    EXPECT_EQ(s.mode_count, mode->second) << seed;
    EXPECT_EQ(s.min_len, sorted.back()) << seed;
    EXPECT_EQ(s.max_len, sorted.front()) << seed;
    EXPECT_EQ(s.empty_rows, count[0]) << seed;
  }
  // Bins out of order or empty are refused.
  EXPECT_THROW(aijp::stats_from_bins(3, 3, {{2, 1}, {1, 2}}, 0), aijp::error);
  EXPECT_THROW(aijp::stats_from_bins(3, 3, {{1, 3}, {2, 0}}, 0), aijp::error);
}

TEST(RowStats, NoRowsAndBadRowPointer)
{
  aijp::csr_matrix<double> empty;
  empty.cols = 3;
  const auto s = aijp::compute_row_stats(empty.view());
  EXPECT_EQ(s.rows, 0);
  EXPECT_EQ(s.nnz, 0);
  EXPECT_EQ(s.mean, 0.0);

  auto bad = with_lengths({1, 1}, 2);
  bad.row_ptr[1] = 2;
  bad.row_ptr[2] = 1;
  EXPECT_THROW(aijp::compute_row_stats(bad.view()), aijp::bad_input);
}

TEST(StripGeometry, FromDeviceProperties)
{
  const auto d = h100_like();
  const auto t = aijp::strips_for_lanes(d, 1, 1000000);
  EXPECT_EQ(t.rows_per_strip, 132 * 2048);
  EXPECT_EQ(t.strips, 4);  // ceil(1e6 / 270336)
  const auto w = aijp::strips_for_lanes(d, 32, 1000000);
  EXPECT_EQ(w.rows_per_strip, 132 * 64);
  EXPECT_EQ(w.strips, (1000000 + 8447) / 8448);
  EXPECT_EQ(aijp::strips_for_coo(d, 270337).strips, 2);
  EXPECT_THROW(aijp::strips_for_lanes(d, 0, 10), aijp::bad_input);
  EXPECT_THROW(aijp::strips_for_lanes(aijp::device_properties{}, 1, 10), aijp::bad_input);
  EXPECT_NEAR(d.peak_bandwidth_gbs(), 2 * 2619e6 * 640 / 1e9, 1e-6);
}

TEST(Formats, ParseNamesAndLists)
{
  EXPECT_EQ(aijp::parse_format("sell"), aijp::format_id::sell_c_sigma);
  for (auto f : aijp::all_formats()) EXPECT_EQ(aijp::parse_format(aijp::format_name(f)), f);
  EXPECT_EQ(aijp::all_formats().size(), static_cast<size_t>(aijp::format_count));
  EXPECT_EQ(aijp::parse_format("cusparse_csr"), aijp::format_id::cusparse_csr);
  try {
    aijp::parse_format("elll");
    FAIL() << "no exception";
  } catch (const aijp::bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("elll"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cusparse_csr"), std::string::npos);
  }
  EXPECT_EQ(aijp::parse_format_list("").size(), static_cast<size_t>(aijp::format_count));
  const auto l = aijp::parse_format_list("sell,sell,cusparse_csr");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0], aijp::format_id::sell_c_sigma);
  EXPECT_THROW(aijp::parse_format_list(","), aijp::bad_input);
}

// The amortization's price of a conversion: a layout costs a fixed 150 us plus three passes over the CSR copy and
// the layout at streaming bandwidth; a format on the CSR copy only its install, whatever the matrix's size;
// cuSPARSE SELL's first use in a process adds the loading of its kernels, once.
TEST(ConversionEstimate, LayoutsPayForTheirBytesFormatsOnTheCsrCopyOnlyTheInstall)
{
  using aijp::format_id;
  const double gbs = 3000;             // 3 TB/s: 3 bytes per ns
  const double csr = 12e6, layout = 9e6;  // bytes
  EXPECT_DOUBLE_EQ(aijp::conversion_estimate_us(format_id::sell_c_sigma, layout, csr, gbs, false), 150.0 + 3.0 * 21e6 / 3e6);
  EXPECT_DOUBLE_EQ(aijp::conversion_estimate_us(format_id::sell_c_sigma, layout, csr, gbs, true), 150.0 + 21.0) << "only cuSPARSE SELL loads kernels";
  EXPECT_DOUBLE_EQ(aijp::conversion_estimate_us(format_id::cusparse_sell, layout, csr, gbs, true), 150.0 + 21.0 + aijp::cusparse_sell_first_use_us);
  EXPECT_DOUBLE_EQ(aijp::conversion_estimate_us(format_id::cusparse_sell, layout, csr, gbs, false), 150.0 + 21.0);
  for (const format_id f : {format_id::csr_vector, format_id::csr_scalar}) {
    EXPECT_DOUBLE_EQ(aijp::conversion_estimate_us(f, csr, csr, gbs, true), aijp::csr_copy_install_us) << aijp::format_name(f);
    EXPECT_DOUBLE_EQ(aijp::conversion_estimate_us(f, 100 * csr, 100 * csr, gbs, false), aijp::csr_copy_install_us) << aijp::format_name(f);
  }
  EXPECT_LT(aijp::csr_copy_install_us, aijp::conversion_estimate_us(format_id::ell, 0, 0, gbs, false));
}

TEST(PlaceholderModel, RanksByBytesAndRespectsMemory)
{
  aijp::prediction_input in;
  in.device = h100_like();
  // A regular 7-point-stencil-like matrix with 8M rows.
  in.stats.rows = in.stats.cols = 8'000'000;
  in.stats.nnz = 56'000'000;
  in.stats.n_iter_natural = in.stats.rows / 32 * 7;
  in.free_memory_bytes = 80LL << 30;
  aijp::bandwidth_model_params p;
  const std::vector<aijp::format_id> two{aijp::format_id::cusparse_csr, aijp::format_id::sell_c_sigma};
  auto est = aijp::predict_bandwidth_model(in, p, two);
  ASSERT_EQ(est.size(), 2u);
  EXPECT_TRUE(est[0].feasible);
  EXPECT_TRUE(est[1].feasible);
  EXPECT_EQ(est[aijp::select_best(est)].format, aijp::format_id::sell_c_sigma);
  EXPECT_GT(est[0].predicted_us / est[1].predicted_us, 1.2);

  in.free_memory_bytes = 1 << 20;  // 1 MiB free: the padded layout does not fit, CSR always does
  est = aijp::predict_bandwidth_model(in, p, two);
  EXPECT_FALSE(est[1].feasible);
  EXPECT_FALSE(est[1].reason.empty());
  EXPECT_EQ(est[aijp::select_best(est)].format, aijp::format_id::cusparse_csr);
  EXPECT_EQ(aijp::select_best({}), -1);

  // One very long row: a thread-per-row layout is bound by that row's serial chain, CSR is not.
  in.free_memory_bytes = 80LL << 30;
  in.stats.rows = in.stats.cols = 2'000'000;
  in.stats.nnz = 12'000'000;
  in.stats.max_len = 200'000;
  in.stats.n_iter_natural = in.stats.rows / 32 * 6 + 200'000;
  est = aijp::predict_bandwidth_model(in, p, two);
  EXPECT_EQ(est[aijp::select_best(est)].format, aijp::format_id::cusparse_csr);
  EXPECT_GT(est[1].predicted_us, 200'000 * p.serial_entry_dram_ns * 1e-3);
}

TEST(PlaceholderModel, SortedLayoutsPayForTheOrderTheyScatterIn)
{
  // Short rows of mixed lengths whose columns are near the diagonal: in row order a warp's x and y accesses
  // are contiguous; sorted by length, a warp's rows lie ~5 apart (the 4M-row circuit body of
  // bench/results/2026-11-23_h100_run4_partition.txt).
  aijp::row_stats s;
  s.rows = s.cols = 4'000'000;
  s.nnz = 16'000'000;
  s.mean = 4;
  s.max_len = 6;
  s.min_len = 2;
  s.n_iter_natural = s.n_iter_sorted = s.rows / 32 * 4;
  aijp::sorted_locality l{0.55, 1.0};
  const double natural = 0.15;
  // x: (0.55 - 0.15) sectors per nonzero of 32 bytes; y: (1 - 8/32) sectors per row, read and written.
  const double want = 0.4 * 16e6 * 32 + 2 * 0.75 * 4e6 * 32;
  EXPECT_NEAR(aijp::sorted_scatter_bytes(aijp::format_id::jad, s, 8, natural, l), want, 1.0);
  EXPECT_NEAR(aijp::sorted_scatter_bytes(aijp::format_id::pellr, s, 8, natural, l), want, 1.0);
  // sell_sigma sorts within windows of 4096 rows: its visits of a sector stay close in time.
  for (auto f : {aijp::format_id::cusparse_csr, aijp::format_id::sell_c_sigma, aijp::format_id::sell_sigma,
                 aijp::format_id::ellr, aijp::format_id::hyb}) {
    EXPECT_EQ(aijp::sorted_scatter_bytes(f, s, 8, natural, l), 0.0) << aijp::format_name(f);
  }
  // Unknown locality, or a sorted order as local as the natural one (equal lengths: stable sort), adds nothing.
  EXPECT_EQ(aijp::sorted_scatter_bytes(aijp::format_id::jad, s, 8, natural, {}), 0.0);
  EXPECT_EQ(aijp::sorted_scatter_bytes(aijp::format_id::jad, s, 8, natural, {natural, 0.25}), 0.0);

  // The placeholder charges the share of it that misses the L2 at scatter_efficiency of the streaming bandwidth.
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50 << 20;
  in.stats = s;
  in.free_memory_bytes = 80LL << 30;
  aijp::bandwidth_model_params p;
  p.scatter_efficiency = 0.5;
  p.l2_gather_gbs = 0;  // this test isolates the DRAM term (the L2 bound: L2TrafficBoundsScatteredGathers)
  const auto before = aijp::predict_bandwidth_model(in, p, {aijp::format_id::jad, aijp::format_id::cusparse_csr});
  in.x_sectors_per_nnz = natural;
  in.sorted = l;
  const auto after = aijp::predict_bandwidth_model(in, p, {aijp::format_id::jad, aijp::format_id::cusparse_csr});
  EXPECT_NEAR(after[0].bytes - before[0].bytes, want, 1.0);
  const double miss = 1.0 - in.device.l2_bytes / after[0].bytes;
  EXPECT_GT(miss, 0.8);
  EXPECT_LT(miss, 0.95);
  EXPECT_NEAR(after[0].predicted_us - before[0].predicted_us, miss * want / (p.stream_read_gbs * 1e3 * 0.5), 1e-6);
  EXPECT_EQ(after[1].predicted_us, before[1].predicted_us);
}

TEST(PlaceholderModel, L2TrafficBoundsScatteredGathers)
{
  // 2M rows of 24 random columns (x of 16 MB, in the L2): every entry gathers its own sector. The DRAM
  // stream predicts ~200 us, the L2's sector traffic ~1.5 GB more: the prediction is the L2 bound, for our
  // formats and cuSPARSE's alike. On a stencil-like locality (0.1 sectors per nonzero) the bound stays below
  // the stream and changes nothing.
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50 << 20;
  in.free_memory_bytes = 80LL << 30;
  aijp::row_stats& s = in.stats;
  s.rows = s.cols = 2000000;
  s.nnz = 48000000;
  s.mean = 24;
  s.mode_len = 24;
  s.mode_count = s.rows;
  s.min_len = s.max_len = 24;
  s.n_iter_natural = s.n_iter_sorted = s.rows / 32 * 24;
  s.hyb_ell_width = 24;
  const std::vector<aijp::format_id> fs{aijp::format_id::cusparse_csr, aijp::format_id::sell_c_sigma, aijp::format_id::csr_vector};
  aijp::bandwidth_model_params p;
  p.l2_gather_gbs = 4700;
  in.x_sectors_per_nnz = 1.0;
  const auto random = aijp::predict_bandwidth_model(in, p, fs);
  in.x_sectors_per_nnz = 0.1;
  const auto local = aijp::predict_bandwidth_model(in, p, fs);
  aijp::bandwidth_model_params off = p;
  off.l2_gather_gbs = 0;
  const auto unbounded = aijp::predict_bandwidth_model(in, off, fs);
  for (std::size_t k = 0; k < fs.size(); ++k) {
    SCOPED_TRACE(aijp::format_name(fs[k]));
    const double l2 = aijp::l2_traffic_bytes(fs[k], s, 8, 1.0, {}, &in.device);
    EXPECT_NEAR(l2, aijp::layout_traffic_of(fs[k], s, 8, &in.device).moved_bytes + 2e6 * 8 + 48e6 * 32, 1.0);
    EXPECT_GE(random[k].predicted_us, l2 / (p.l2_gather_gbs * 1e3));
    EXPECT_LT(random[k].predicted_us, l2 / (p.l2_gather_gbs * 1e3) + 2 * p.cusparse_csr_overhead_us);
    EXPECT_GT(random[k].predicted_us, 1.5 * local[k].predicted_us);
    EXPECT_EQ(local[k].predicted_us, unbounded[k].predicted_us);
  }
  // ALG2 streams and gathers at ALG1's rates, under the bound too: the two differ by their fixed costs only
  // (ALG2's own measured efficiency and L2 rate are not used).
  in.x_sectors_per_nnz = 1.0;
  aijp::bandwidth_model_params two = p;
  two.l2_gather_alg2_gbs = 4400;
  two.cusparse_csr_alg2_efficiency = 0.5;
  two.cusparse_csr_alg2_overhead_us = two.cusparse_csr_overhead_us + 3.0;
  two.format_fixed_us[static_cast<int>(aijp::format_id::cusparse_csr_alg2)] = 1.5;
  const auto cu = aijp::predict_bandwidth_model(in, two, {aijp::format_id::cusparse_csr, aijp::format_id::cusparse_csr_alg2});
  EXPECT_NEAR(cu[1].predicted_us - cu[0].predicted_us, 4.5, 1e-9);
  in.x_sectors_per_nnz = 0.1;
  const auto cu_local = aijp::predict_bandwidth_model(in, two, {aijp::format_id::cusparse_csr, aijp::format_id::cusparse_csr_alg2});
  EXPECT_NEAR(cu_local[1].predicted_us - cu_local[0].predicted_us, 4.5, 1e-9);
  // Unknown locality: x once, as the streaming term counts it.
  EXPECT_NEAR(aijp::l2_traffic_bytes(aijp::format_id::cusparse_csr, s, 8, 0.0, {}),
              aijp::layout_traffic_of(aijp::format_id::cusparse_csr, s, 8).moved_bytes + 2e6 * 8 + 2e6 * 8, 1.0);
}

TEST(PlaceholderModel, CsrScalarGathersShareTheL1WithTheRows)
{
  // csr_scalar's rows fit in L1 when the resident threads' rows do (2048 threads x 24 entries x 12 bytes = 576
  // KB of 256 KB: 5/9 of the entries miss and fetch their two sectors); the x gathers are cached in the same L1,
  // so one random sector per entry (32 bytes more per entry: 2112 KB) leaves room for 1/8.25 of them, and a
  // stencil-like locality (0.1 sectors per entry) adds 3.2 bytes per entry.
  aijp::device_properties d = h100_like();
  d.max_threads_per_sm = 2048;
  d.cc_major = 9;
  aijp::row_stats s;
  s.rows = s.cols = 2000000;
  s.nnz = 48000000;
  s.mean = 24;
  s.min_len = s.max_len = s.mode_len = 24;
  s.mode_count = s.rows;
  s.n_iter_natural = s.n_iter_sorted = s.rows / 32 * 24;
  const double row_ptr = (2e6 + 1) * 4;
  const auto moved = [&](double x_sectors) {
    return aijp::layout_traffic_of(aijp::format_id::csr_scalar, s, 8, &d, x_sectors).moved_bytes;
  };
  const auto expected = [&](double per_entry) {
    const double footprint = 2048.0 * 24 * per_entry, l1 = 256.0 * 1024;
    return 48e6 * (12 + (footprint - l1) / footprint * 52) + row_ptr;
  };
  EXPECT_NEAR(moved(0.0), expected(12), 1.0);  // unknown locality: the rows alone
  EXPECT_NEAR(moved(1.0), expected(44), 1.0);
  EXPECT_NEAR(moved(0.1), expected(15.2), 1.0);
  EXPECT_GT(moved(1.0), 1.4 * moved(0.0));
  // The other layouts read their rows coalesced: the gathers do not change their bytes.
  EXPECT_EQ(aijp::layout_traffic_of(aijp::format_id::csr_vector, s, 8, &d, 1.0).moved_bytes,
            aijp::layout_traffic_of(aijp::format_id::csr_vector, s, 8, &d).moved_bytes);
  // The placeholder's streaming and L2 terms see them.
  aijp::prediction_input in;
  in.device = d;
  in.device.l2_bytes = 50 << 20;
  in.stats = s;
  in.value_bytes = 8;
  aijp::bandwidth_model_params p;
  p.l2_gather_gbs = 4700;
  in.x_sectors_per_nnz = 1.0;
  const auto random = aijp::explain_bandwidth_model(aijp::format_id::csr_scalar, in, p);
  EXPECT_NEAR(random.moved_bytes, moved(1.0), 1.0);
  EXPECT_NEAR(aijp::l2_traffic_bytes(aijp::format_id::csr_scalar, s, 8, 1.0, {}, &in.device),
              moved(1.0) + 2e6 * 8 + 48e6 * 32, 1.0);
}

TEST(PlaceholderModel, CsrVectorIdleLanesFollowTheTypicalRow)
{
  // 4096 rows of 2000 above 2M rows of 7 (mean 10.8: 16 lanes per row). The stencil rows leave 9 of their 16
  // lanes idle: the estimate follows the mode (7), not the mean, once at least half of the rows have it.
  aijp::row_stats s;
  s.rows = s.cols = 2101248;
  s.nnz = 4096LL * 2000 + 2097152LL * 7;
  s.mean = static_cast<double>(s.nnz) / s.rows;
  s.mode_len = 7;
  s.mode_count = 2097152;
  s.min_len = 7;
  s.max_len = 2000;
  EXPECT_EQ(aijp::csr_vector_lanes(s), 16);
  EXPECT_EQ(aijp::csr_vector_typical_length(s), 7.0);
  aijp::row_stats mixed = s;
  mixed.mode_count = s.rows / 3;  // no dominant length: the mean
  EXPECT_EQ(aijp::csr_vector_typical_length(mixed), s.mean);
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50 << 20;
  in.free_memory_bytes = 80LL << 30;
  aijp::bandwidth_model_params p;
  p.l2_gather_gbs = 0;
  in.stats = s;
  const double typical = aijp::predict_bandwidth_model(in, p, {aijp::format_id::csr_vector})[0].predicted_us;
  in.stats = mixed;
  const double by_mean = aijp::predict_bandwidth_model(in, p, {aijp::format_id::csr_vector})[0].predicted_us;
  // One step of the lanes per row: the filled share + 0.04 of the streaming rate, 7 / 16 + 0.04 against
  // 10.8 / 16 + 0.04.
  EXPECT_NEAR(typical / by_mean, (s.mean / 16 + 0.04) / (7.0 / 16 + 0.04), 0.02);
  EXPECT_GT(aijp::layout_traffic_of(aijp::format_id::csr_vector, s, 8).slot_work, 0.0);
  {
    // Rows of several steps keep + 0.25: constant rows of 40 on 32 lanes (two steps, filled 40 / 64) stream at
    // 0.875 of the rate, rows of 20 on 32 lanes (one step) at 20 / 32 + 0.04.
    aijp::prediction_input c = in;
    c.stats = aijp::row_stats{};
    c.stats.rows = c.stats.cols = 1 << 20;
    const auto rate = [&](int len) {
      c.stats.nnz = static_cast<aijp::size_type>(len) << 20;
      c.stats.mean = len;
      c.stats.mode_len = c.stats.min_len = c.stats.max_len = len;
      c.stats.mode_count = c.stats.rows;
      c.stats.n_iter_natural = c.stats.n_iter_sorted = (c.stats.rows / 32) * len;
      const auto b = aijp::explain_bandwidth_model(aijp::format_id::csr_vector, c, p);
      return b.stream_us / static_cast<double>(c.stats.nnz);  // per nonzero, at the same bytes per nonzero
    };
    const double two_steps = rate(40);
    ASSERT_EQ(aijp::csr_vector_lanes(c.stats), 32);
    const double one_step = rate(20);
    ASSERT_EQ(aijp::csr_vector_lanes(c.stats), 32);
    // Bytes per nonzero differ only by row_ptr, x and y (a few percent): compare the efficiencies.
    EXPECT_NEAR(one_step / two_steps, 0.875 / (20.0 / 32 + 0.04), 0.08);
    EXPECT_GT(one_step / two_steps, 1.15);  // the old + 0.25 on both gave 0.875 / 0.875
  }

  // The long rows stored together (N_iter natural = sorted: 128 warps of 2000, then the stencil) fill all 4
  // slots of their lane groups on an H100-like device: 4 chains in turn. Spread one per warp (N_iter natural
  // far above sorted) they stay one chain, and so do fewer long rows than the 16 lane groups of a block.
  const auto dev = h100_like();
  s.n_iter_sorted = 128LL * 2000 + 65536LL * 7;
  s.n_iter_natural = s.n_iter_sorted;
  ASSERT_EQ(aijp::csr_vector_slots(s, &dev), 4);
  const double together = aijp::layout_traffic_of(aijp::format_id::csr_vector, s, 8, &dev).serial_entries;
  aijp::row_stats spread = s;
  spread.n_iter_natural = 4096LL * 2000 + (65664LL - 4096) * 7;
  const double apart = aijp::layout_traffic_of(aijp::format_id::csr_vector, spread, 8, &dev).serial_entries;
  EXPECT_DOUBLE_EQ(together, 4 * apart);
  aijp::row_stats few = s;
  few.n_iter_natural = few.n_iter_sorted = 1LL * 2000 + 65663LL * 7;  // 20 rows of 2000 in one warp
  EXPECT_DOUBLE_EQ(aijp::layout_traffic_of(aijp::format_id::csr_vector, few, 8, &dev).serial_entries, apart);
}

TEST(PlaceholderModel, EllFamilyChainCountsChunksAndJadItsUnrolledLoopsRemainder)
{
  // ELLPACK-R's loop over a row's own length walks chunks of 4 (ell_common.cuh): ceil(n / 4) rounds of 4 loads
  // for the warp's longest row, counted in entries at the round's rate. JAD's loop is unrolled by 4: n / 4 rounds,
  // then n % 4 dependent iterations one at a time, and rows of one warp that differ in length run both loops one
  // after the other.
  aijp::row_stats s;
  s.rows = 4096;
  s.cols = 4096;
  const auto chain = [&](aijp::format_id f, aijp::index_type min_len, aijp::index_type max_len) {
    s.min_len = min_len;
    s.max_len = max_len;
    s.mean = 0.5 * (min_len + max_len);
    s.nnz = static_cast<aijp::size_type>(s.mean * s.rows);
    s.n_iter_natural = s.n_iter_sorted = (s.rows / 32) * max_len;
    return aijp::layout_traffic_of(f, s, 8).serial_entries;
  };
  const auto ellr = aijp::format_id::ellr;
  EXPECT_DOUBLE_EQ(chain(ellr, 8, 8), 8.0);     // two chunks
  EXPECT_DOUBLE_EQ(chain(ellr, 3, 3), 4.0);     // one chunk, its last slot predicated off
  EXPECT_DOUBLE_EQ(chain(ellr, 9, 9), 12.0);    // three chunks
  EXPECT_DOUBLE_EQ(chain(ellr, 1, 8), 8.0);     // shorter rows finish inside the longest row's chunks
  EXPECT_DOUBLE_EQ(chain(ellr, 8, 10), 12.0);
  EXPECT_DOUBLE_EQ(chain(ellr, 8, 1600), 1600.0);
  EXPECT_DOUBLE_EQ(chain(ellr, 0, 0), 0.0);
  EXPECT_DOUBLE_EQ(chain(aijp::format_id::pellr, 1, 7), 8.0);
  EXPECT_DOUBLE_EQ(chain(aijp::format_id::ell, 1, 7), 8.0);
  const auto jad = aijp::format_id::jad;
  EXPECT_DOUBLE_EQ(chain(jad, 8, 8), 8.0);     // two unrolled rounds
  EXPECT_DOUBLE_EQ(chain(jad, 3, 3), 12.0);    // three remainder iterations
  EXPECT_DOUBLE_EQ(chain(jad, 9, 9), 12.0);    // two rounds and one iteration
  EXPECT_DOUBLE_EQ(chain(jad, 1, 8), 16.0);    // a warp may hold rows of 7: one round and three iterations
  EXPECT_DOUBLE_EQ(chain(jad, 8, 10), 16.0);   // rows of 8 to 10: at most 2 + 2 rounds
  EXPECT_DOUBLE_EQ(chain(jad, 8, 1600), 1608.0);  // long rows keep the factor's meaning within 0.5 %
}

TEST(PlaceholderModel, HybCooPartStreamsAtCooRate)
{
  // The dense top block of circuit:rows=4000000,dense=64,len=400000 (64 rows hold 25.6M of its 25.8M
  // nonzeros, HYB width 5): HYB is nearly all COO and must not be predicted below COO itself.
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50 << 20;
  in.free_memory_bytes = 80LL << 30;
  aijp::row_stats& s = in.stats;
  s.rows = 62528;
  s.cols = 4'000'000;
  s.nnz = 25'849'601;
  s.mean = static_cast<double>(s.nnz) / s.rows;
  s.min_len = 2;
  s.max_len = 400'000;
  s.hyb_ell_width = 5;
  s.hyb_coo_nnz = 25'612'188;
  s.n_iter_natural = s.n_iter_sorted = 811'710;
  aijp::bandwidth_model_params p;
  const auto est = aijp::predict_bandwidth_model(in, p, {aijp::format_id::hyb, aijp::format_id::coo, aijp::format_id::cusparse_csr});
  EXPECT_GT(est[0].predicted_us, 0.95 * est[1].predicted_us);
  EXPECT_GT(est[0].predicted_us, est[2].predicted_us);  // cuSPARSE CSR moves 4 bytes less per entry
  // A HYB without a COO part streams at full rate, as ELL does.
  s.hyb_coo_nnz = 0;
  s.max_len = 5;
  s.nnz = s.rows * 5;
  s.mean = 5;
  const auto regular = aijp::predict_bandwidth_model(in, p, {aijp::format_id::hyb, aijp::format_id::ell});
  EXPECT_NEAR(regular[0].predicted_us, regular[1].predicted_us, 1e-9);
}

TEST(PlaceholderModel, HybCooPartInTheL2StreamsAtTheFullRate)
{
  // A HYB of fewer than 4096 rows has no ELL part (K = 0): its COO kernel holds every entry. With the working set
  // in the L2 the whole product streams at one rate, as ELL's and COO's in-L2 bytes do; the 0.7 of HYB's COO
  // part holds beyond the L2 only (where the circuit measured it).
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50 << 20;
  in.free_memory_bytes = 80LL << 30;
  aijp::row_stats& s = in.stats;
  s.rows = s.cols = 4039;  // ego-Facebook's size
  s.nnz = 176468;
  s.mean = static_cast<double>(s.nnz) / s.rows;
  s.min_len = 1;
  s.max_len = 1045;
  s.hyb_ell_width = 0;
  s.hyb_coo_nnz = s.nnz;
  s.n_iter_natural = s.n_iter_sorted = 8000;
  in.x_sectors_per_nnz = 0.14;
  aijp::bandwidth_model_params p;
  const auto in_l2 = aijp::explain_bandwidth_model(aijp::format_id::hyb, in, p);
  ASSERT_TRUE(in_l2.in_l2);
  const double vb = 8, bytes = in_l2.moved_bytes + s.cols * vb + s.rows * vb;
  EXPECT_NEAR(in_l2.stream_us, bytes / (p.stream_read_gbs * 1e3), 1e-9);
  // Beyond the L2 the COO part (all of it here) streams at 0.7 of the rate.
  in.device.l2_bytes = 1 << 20;
  const auto beyond = aijp::explain_bandwidth_model(aijp::format_id::hyb, in, p);
  ASSERT_FALSE(beyond.in_l2);
  EXPECT_GT(beyond.stream_us, 1.3 * in_l2.stream_us);
}

TEST(PlaceholderModel, HybCooPartRunsAfterTheEllChain)
{
  // HYB launches its COO kernel after the ELL kernel: when the ELL part's chain of K entries bounds the product,
  // the COO part's time adds to it instead of hiding under it. 5000 rows of 60 in the ELL part, 40 rows with
  // 2000 more entries in the COO part, all in the L2.
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50 << 20;
  aijp::row_stats& s = in.stats;
  s.rows = s.cols = 5000;
  s.min_len = s.mode_len = 60;
  s.mode_count = 4960;
  s.max_len = 2060;
  s.hyb_ell_width = 60;
  s.hyb_coo_nnz = 40 * 2000;
  s.nnz = s.rows * 60 + s.hyb_coo_nnz;
  s.mean = static_cast<double>(s.nnz) / s.rows;
  s.n_iter_natural = s.n_iter_sorted = (s.rows / 32) * 60 + 2 * 2060;
  in.x_sectors_per_nnz = 0.1;
  aijp::bandwidth_model_params p;
  p.l2_gather_gbs = 4600.0;
  const auto with_coo = aijp::explain_bandwidth_model(aijp::format_id::hyb, in, p);
  ASSERT_GT(with_coo.raw_chain_us, 2 * std::max(with_coo.stream_us, with_coo.l2_us));  // chain-bound
  // The COO part: its entries with row indices and y read and written by the atomics, streamed (in the L2 at
  // the full rate, beyond it at HYB's COO rate 0.7), or its L2 traffic with the x gathers, whichever is longer.
  const double coo_bytes = 80000.0 * (8 + 8) + 2.0 * 5000 * 8;
  const double coo_l2 = (coo_bytes + 0.1 * 80000 * 32) / (4600.0 * 1e3);
  const double coo_us = std::max(coo_bytes / (p.stream_read_gbs * 1e3), coo_l2);
  EXPECT_NEAR(with_coo.chain_us, with_coo.raw_chain_us + coo_us, 1e-9);
  EXPECT_NEAR(with_coo.predicted_us, with_coo.fixed_us + with_coo.raw_chain_us + coo_us, 1e-9);
  {
    aijp::prediction_input beyond = in;
    beyond.device.l2_bytes = 1 << 20;  // the same matrix beyond a 1 MiB L2
    const auto b = aijp::explain_bandwidth_model(aijp::format_id::hyb, beyond, p);
    EXPECT_FALSE(b.in_l2);
    EXPECT_NEAR(b.chain_us, b.raw_chain_us + std::max(coo_bytes / (p.stream_read_gbs * 1e3 * 0.7), coo_l2), 1e-9);
  }
  // The chain factor fitted on such samples is net of the COO part: samples measured at fixed + 1.5 x chain +
  // the COO part give 1.5 (ELL parts of 120-190 entries: chains of two launches and more).
  std::vector<aijp::fixed_cost_observation> obs;
  for (int k = 0; k < 8; ++k) {
    aijp::prediction_input v = in;
    v.stats.hyb_ell_width = v.stats.min_len = v.stats.mode_len = 120 + 10 * k;
    ASSERT_GT(aijp::explain_bandwidth_model(aijp::format_id::hyb, v, p).raw_chain_us, 2 * p.launch_us);
    const auto b = aijp::explain_bandwidth_model(aijp::format_id::hyb, v, p);
    obs.push_back({aijp::format_id::hyb, v, b.fixed_us + 1.5 * b.raw_chain_us + (b.chain_us - b.raw_chain_us)});
  }
  aijp::bandwidth_model_params fitted = p;
  aijp::fit_format_corrections(obs, fitted, 5);
  EXPECT_NEAR(aijp::chain_factor(fitted, aijp::format_id::hyb, 1.0, true), 1.5, 1e-6);
  // Without a chain (a HYB of short rows) the COO part stays inside the stream and L2 terms.
  s.hyb_ell_width = s.min_len = s.mode_len = s.max_len = 0;
  const auto no_chain = aijp::explain_bandwidth_model(aijp::format_id::hyb, in, p);
  EXPECT_DOUBLE_EQ(no_chain.chain_us, 0.0);
}

// Rows of `per_row` entries (every row the same length) whose x gathers take `x_sectors` sectors per entry, on an
// H100-like device with a 50 MiB L2.
aijp::prediction_input uniform_rows(aijp::size_type rows, int per_row, double x_sectors)
{
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50 << 20;
  in.free_memory_bytes = 80LL << 30;
  in.stats.rows = in.stats.cols = rows;
  in.stats.nnz = rows * per_row;
  in.stats.mean = per_row;
  in.stats.mode_len = in.stats.max_len = in.stats.min_len = per_row;
  in.stats.mode_count = rows;
  in.stats.hyb_ell_width = per_row;
  in.stats.n_iter_natural = in.stats.n_iter_sorted = (rows + 31) / 32 * per_row;
  in.x_sectors_per_nnz = x_sectors;
  return in;
}

// COO's chunks gather an x sector k times at unrelated times of the product: each reuse misses the L2 with
// probability exp(-k L2 / bytes). A band (k near 1) reads x about once, a 7-point stencil beyond the L2 (k = 5)
// most of 4 more times, random columns whose x fits in the L2 (k = 128) hardly again; only COO pays.
TEST(PlaceholderModel, CooReadsXAgainWhereItsReusesLieFarApart)
{
  const double l2 = 50 << 20;
  const auto stencil = uniform_rows(8'000'000, 7, 0.1875);  // k = 0.1875 x 7 x 4 = 5.25
  const double x_bytes = 8'000'000 * 8.0;
  const double bytes = 1.15e9;
  const double k = 5.25;
  EXPECT_NEAR(aijp::coo_x_reread_bytes(stencil.stats, 8, 0.1875, bytes, l2), x_bytes * (k - 1) * std::exp(-k * l2 / bytes), 1.0);
  EXPECT_GT(aijp::coo_x_reread_bytes(stencil.stats, 8, 0.1875, bytes, l2), 3.0 * x_bytes);
  EXPECT_LT(aijp::coo_x_reread_bytes(stencil.stats, 8, 0.045, bytes, l2), 0.3 * x_bytes);  // a band: k = 1.26
  EXPECT_EQ(aijp::coo_x_reread_bytes(stencil.stats, 8, 0.03, bytes, l2), 0.0);              // k < 1: x once
  EXPECT_EQ(aijp::coo_x_reread_bytes(stencil.stats, 8, 0.0, bytes, l2), 0.0);               // locality unknown
  EXPECT_EQ(aijp::coo_x_reread_bytes(stencil.stats, 8, 0.1875, bytes, 0.0), 0.0);           // L2 unknown
  const auto random = uniform_rows(1'000'000, 32, 1.0);  // x 8 MB, k = 128
  EXPECT_LT(aijp::coo_x_reread_bytes(random.stats, 8, 1.0, 5.3e8, l2), 1e-3 * 8e6);
  // In the prediction: COO's streaming term carries the re-reads, another format's does not.
  aijp::bandwidth_model_params p;
  auto local = stencil;
  local.x_sectors_per_nnz = 0.03;
  const auto coo_far = aijp::explain_bandwidth_model(aijp::format_id::coo, stencil, p);
  const auto coo_near = aijp::explain_bandwidth_model(aijp::format_id::coo, local, p);
  const double reread = aijp::coo_x_reread_bytes(stencil.stats, 8, 0.1875, coo_near.stream_us * p.coo_efficiency * p.stream_read_gbs * 1e3, l2);
  EXPECT_NEAR(coo_far.stream_us - coo_near.stream_us, reread / (p.stream_read_gbs * 1e3 * p.coo_efficiency), 1e-6);
  EXPECT_DOUBLE_EQ(aijp::explain_bandwidth_model(aijp::format_id::sell_c_sigma, stencil, p).stream_us,
                   aijp::explain_bandwidth_model(aijp::format_id::sell_c_sigma, local, p).stream_us);
}

// COO's streaming efficiency: the median, over its samples that stream from DRAM, of bytes (with the x re-reads)
// / (bandwidth x (measured - fixed costs)); samples bound by the L2 traffic or held in the L2 do not move it, and
// too few samples leave the value the parameters had. HYB's COO part keeps its own rate.
TEST(PlaceholderModel, CooStreamingEfficiencyFittedFromSamplesBeyondTheL2)
{
  aijp::bandwidth_model_params p;
  std::vector<aijp::fixed_cost_observation> obs;
  const auto measured_at = [&](const aijp::prediction_input& in, double efficiency) {
    const auto b = aijp::explain_bandwidth_model(aijp::format_id::coo, in, p);  // at the default 0.7
    return b.fixed_us + b.stream_us * p.coo_efficiency / efficiency;
  };
  const double planted[] = {0.88, 0.90, 0.91, 0.92, 0.95};
  int n = 0;
  for (double e : planted) {
    const aijp::size_type rows = 2'000'000 + 1'000'000 * n;
    const auto in = uniform_rows(rows, 7, n % 2 == 0 ? 0.05 : 0.19);  // bands and stencils
    obs.push_back({aijp::format_id::coo, in, measured_at(in, e)});
    ++n;
  }
  // Random columns (bound by the L2 traffic) measured slowly, and a band held in the L2 measured fast.
  const auto random = uniform_rows(1'000'000, 32, 1.0);
  obs.push_back({aijp::format_id::coo, random, 3.0 * measured_at(random, 0.9)});
  const auto small = uniform_rows(300'000, 7, 0.05);
  ASSERT_LT(small.stats.nnz * 16.0 * 1.2, 50 << 20);
  obs.push_back({aijp::format_id::coo, small, measured_at(small, 2.0)});
  auto fitted = p;
  const auto used = aijp::fit_format_corrections(obs, fitted, 5);
  EXPECT_EQ(used.coo_efficiency, 5);
  EXPECT_NEAR(fitted.coo_efficiency, 0.91, 1e-9);
  const auto big = uniform_rows(8'000'000, 7, 0.05);
  const auto before = aijp::explain_bandwidth_model(aijp::format_id::coo, big, p);
  const auto after = aijp::explain_bandwidth_model(aijp::format_id::coo, big, fitted);
  EXPECT_NEAR(after.stream_us, before.stream_us * 0.7 / 0.91, 1e-6);
  // HYB's COO part is another kernel over the long rows' entries: its rate does not follow.
  auto hyb_in = big;
  hyb_in.stats.hyb_ell_width = 5;
  hyb_in.stats.hyb_coo_nnz = 2 * hyb_in.stats.rows;
  EXPECT_DOUBLE_EQ(aijp::explain_bandwidth_model(aijp::format_id::hyb, hyb_in, fitted).stream_us,
                   aijp::explain_bandwidth_model(aijp::format_id::hyb, hyb_in, p).stream_us);
  // Four samples are too few: the value the parameters had stays.
  obs.erase(obs.begin());
  auto kept = p;
  kept.coo_efficiency = 0.8;
  EXPECT_EQ(aijp::fit_format_corrections(obs, kept, 5).coo_efficiency, 0);
  EXPECT_EQ(kept.coo_efficiency, 0.8);
}

TEST(PlaceholderModel, EveryFormatHasAnEstimateAndPaddingBlowUpIsInfeasible)
{
  aijp::prediction_input in;
  in.device = h100_like();
  in.stats.rows = in.stats.cols = 100000;
  in.stats.nnz = 100000 + 10000;
  in.stats.max_len = 10001;  // one dense row: ELL would store 1e9 entries
  in.stats.mean = 1.1;
  in.stats.n_iter_natural = 100000 / 32 + 10000;
  in.stats.n_iter_sorted = in.stats.n_iter_natural;
  in.free_memory_bytes = 80LL << 30;
  const auto est = aijp::predict_bandwidth_model(in, aijp::bandwidth_model_params{}, aijp::all_formats());
  ASSERT_EQ(est.size(), static_cast<size_t>(aijp::format_count));
  for (const auto& e : est) {
    EXPECT_GT(e.predicted_us, 0) << aijp::format_name(e.format);
    EXPECT_EQ(e.feasible, e.reason.empty()) << aijp::format_name(e.format);
  }
  EXPECT_FALSE(est[static_cast<int>(aijp::format_id::ell)].feasible);
  EXPECT_NE(est[static_cast<int>(aijp::format_id::ell)].reason.find("padding"), std::string::npos);
  EXPECT_TRUE(est[static_cast<int>(aijp::format_id::cusparse_csr)].feasible);
  EXPECT_TRUE(est[static_cast<int>(aijp::format_id::coo)].feasible);
}

TEST(PlaceholderModel, DeltaEncodingNeedsSortedRowsAndSmallSteps)
{
  aijp::prediction_input in;
  in.device = h100_like();
  in.stats = aijp::compute_row_stats(with_lengths({3, 3, 3}, 4).view());
  const std::vector<aijp::format_id> f{aijp::format_id::sell_delta16};
  in.max_column_step = 65535;
  EXPECT_TRUE(aijp::predict_bandwidth_model(in, {}, f)[0].feasible);
  in.max_column_step = 65536;
  auto e = aijp::predict_bandwidth_model(in, {}, f)[0];
  EXPECT_FALSE(e.feasible);
  EXPECT_NE(e.reason.find("16 bits"), std::string::npos);
  in.max_column_step = 2;
  in.columns_sorted = false;
  e = aijp::predict_bandwidth_model(in, {}, f)[0];
  EXPECT_FALSE(e.feasible);
  EXPECT_NE(e.reason.find("unsorted"), std::string::npos);
}

TEST(PlaceholderModel, PhysicalFloorOfFittedPredictions)
{
  aijp::bandwidth_model_params p;
  auto s = aijp::compute_row_stats(with_lengths({3, 3, 3}, 4).view());
  // Below one launch is impossible; above it the fitted value stands.
  EXPECT_NEAR(aijp::at_least_launches(aijp::format_id::sell_c_sigma, s, 8, p, 0.5), p.launch_us + 3 * p.serial_entry_l2_ns * 1e-3, 1e-12);
  EXPECT_EQ(aijp::at_least_launches(aijp::format_id::sell_c_sigma, s, 8, p, 50.0), 50.0);
  // COO launches twice, but its second launch (y = beta y) overlaps: the floor counts one launch.
  EXPECT_NEAR(aijp::at_least_launches(aijp::format_id::coo, s, 8, p, 0.5), p.launch_us, 1e-12);
  // A 2M-entry row: a thread-per-row layout cannot beat 2M dependent loads.
  s.max_len = 2'000'000;
  EXPECT_GT(aijp::at_least_launches(aijp::format_id::csr_scalar, s, 8, p, 100.0), 2e6 * p.serial_entry_l2_ns * 1e-3);
}

TEST(PlaceholderModel, FloorOfCsrVectorFollowsItsRowsPerLaneGroup)
{
  aijp::bandwidth_model_params p;
  aijp::device_properties d;  // H100: 132 SMs x 2048 threads, 8 resident 256-thread blocks per SM
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  // 2M rows of mean 12 (16 lanes: 131k blocks with one row per group, more than the 1056 of a wave) and one
  // row of 2M entries (125000 steps of 16 lanes).
  auto s = aijp::compute_row_stats(with_lengths({12, 12, 12}, 4).view());
  s.rows = s.cols = 2'000'000;
  s.nnz = 24'000'000;
  s.mean = 12;
  s.max_len = 2'000'000;
  EXPECT_EQ(aijp::csr_vector_slots(s, nullptr), 1);
  EXPECT_EQ(aijp::csr_vector_slots(s, &d), 4);
  // One row per group: 31250 chunks of 4 steps, the 31249 beyond the first counted (csr.cu's chunk loop).
  const double one_row = p.launch_us + 4 * 31249 * p.serial_entry_l2_ns * 1e-3;
  EXPECT_NEAR(aijp::at_least_launches(aijp::format_id::csr_vector, s, 8, p, 1.0), one_row, 1e-6);
  // Stacked, the long row advances 2 steps per round where the one-row loop (chunks of 4) advances 4.
  const double stacked = p.launch_us + (1 + 2 * 124999) * p.serial_entry_l2_ns * 1e-3;
  EXPECT_NEAR(aijp::at_least_launches(aijp::format_id::csr_vector, s, 8, p, 1.0, &d), stacked, 1e-6);
  // The placeholder reads the device of its input.
  aijp::prediction_input in;
  in.stats = s;
  const auto unstacked_estimate = aijp::predict_bandwidth_model(in, p, {aijp::format_id::csr_vector})[0].predicted_us;
  in.device = d;
  EXPECT_GT(aijp::predict_bandwidth_model(in, p, {aijp::format_id::csr_vector})[0].predicted_us, 1.9 * unstacked_estimate);
}

// The device constants as the cache stores them: three required, the later ones optional (older files).
TEST(PlaceholderModel, ParamsFromCacheMetrics)
{
  aijp::bandwidth_model_params p;
  EXPECT_FALSE(aijp::params_from_metrics({{"stream_read_gbs", 3000.0}, {"launch_overhead_us", 4.0}}, p));
  EXPECT_FALSE(aijp::params_from_metrics({{"stream_read_gbs", 3000.0}, {"launch_overhead_us", 4.0}, {"cusparse_csr_overhead_us", 0.0}}, p));
  // An older file: the efficiencies keep their defaults and ALG2's fixed cost is ALG1's.
  const aijp::bandwidth_model_params defaults;
  ASSERT_TRUE(aijp::params_from_metrics({{"stream_read_gbs", 3000.0}, {"launch_overhead_us", 4.0}, {"cusparse_csr_overhead_us", 11.0}}, p));
  EXPECT_EQ(p.stream_read_gbs, 3000.0);
  EXPECT_EQ(p.launch_us, 4.0);
  EXPECT_EQ(p.cusparse_csr_overhead_us, 11.0);
  EXPECT_EQ(p.cusparse_csr_alg2_overhead_us, 11.0);
  EXPECT_EQ(p.cusparse_csr_efficiency, defaults.cusparse_csr_efficiency);
  EXPECT_EQ(p.cusparse_csr_alg2_efficiency, defaults.cusparse_csr_alg2_efficiency);
  // Out-of-range optional values are ignored; a full round trip keeps everything.
  aijp::bandwidth_model_params q;
  ASSERT_TRUE(aijp::params_from_metrics({{"stream_read_gbs", 3000.0}, {"launch_overhead_us", 4.0}, {"cusparse_csr_overhead_us", 11.0},
                                          {"cusparse_csr_efficiency", 1.5}, {"cusparse_csr_alg2_efficiency", -1.0}},
                                         q));
  EXPECT_EQ(q.cusparse_csr_efficiency, defaults.cusparse_csr_efficiency);
  EXPECT_EQ(q.cusparse_csr_alg2_efficiency, defaults.cusparse_csr_alg2_efficiency);
  p.cusparse_csr_efficiency = 0.76;
  p.cusparse_csr_alg2_efficiency = 0.71;
  p.cusparse_csr_alg2_overhead_us = 13.5;
  p.l2_gather_gbs = 5100;
  p.l2_gather_alg2_gbs = 4800;
  std::map<std::string, double> m;
  aijp::params_to_metrics(p, m);
  aijp::bandwidth_model_params r;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_EQ(r.cusparse_csr_efficiency, 0.76);
  EXPECT_EQ(r.cusparse_csr_alg2_efficiency, 0.71);
  EXPECT_EQ(r.cusparse_csr_alg2_overhead_us, 13.5);
  EXPECT_EQ(r.cusparse_csr_overhead_us, 11.0);
  EXPECT_EQ(r.l2_gather_gbs, 5100.0);
  EXPECT_EQ(p.l2_gather_gbs, 5100.0);
  EXPECT_EQ(q.l2_gather_gbs, defaults.l2_gather_gbs);  // absent in an older file
  EXPECT_EQ(r.l2_gather_alg2_gbs, 4800.0);
  EXPECT_EQ(q.l2_gather_alg2_gbs, 0.0);  // absent: ALG2 uses l2_gather_gbs
  // Per-format fixed costs: "fixed_us.<format>", 0 when absent, negative allowed, nonsense ignored.
  p.format_fixed_us[static_cast<int>(aijp::format_id::cusparse_csr_alg2)] = 6.5;
  p.format_fixed_us[static_cast<int>(aijp::format_id::cusparse_sell)] = -1.25;
  m.clear();
  aijp::params_to_metrics(p, m);
  EXPECT_EQ(m.at("fixed_us.cusparse_csr_alg2"), 6.5);
  EXPECT_EQ(m.count("fixed_us.sell"), 0u);  // zero: not written
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_EQ(r.format_fixed_us[static_cast<int>(aijp::format_id::cusparse_csr_alg2)], 6.5);
  EXPECT_EQ(r.format_fixed_us[static_cast<int>(aijp::format_id::cusparse_sell)], -1.25);
  EXPECT_EQ(q.format_fixed_us[static_cast<int>(aijp::format_id::cusparse_csr_alg2)], 0.0);
  m["fixed_us.coo"] = std::numeric_limits<double>::quiet_NaN();
  m["fixed_us.hyb"] = 1e9;
  ASSERT_TRUE(aijp::params_from_metrics(m, q));
  EXPECT_EQ(q.format_fixed_us[static_cast<int>(aijp::format_id::coo)], 0.0);
  EXPECT_EQ(q.format_fixed_us[static_cast<int>(aijp::format_id::hyb)], 0.0);
  // Chain factors: "chain_scale.<format>", 1 when absent or outside [0.25, 4].
  p.format_chain_scale[static_cast<int>(aijp::format_id::ell)] = 2.1;
  m.clear();
  aijp::params_to_metrics(p, m);
  EXPECT_EQ(m.at("chain_scale.ell"), 2.1);
  EXPECT_EQ(m.count("chain_scale.sell"), 0u);
  m["chain_scale.jad"] = 9.0;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_EQ(r.format_chain_scale[static_cast<int>(aijp::format_id::ell)], 2.1);
  EXPECT_EQ(r.format_chain_scale[static_cast<int>(aijp::format_id::jad)], 1.0);
  EXPECT_EQ(defaults.format_chain_scale[static_cast<int>(aijp::format_id::ell)], 1.0);
  // COO's fitted streaming efficiency: "stream_efficiency.coo", 0.7 when absent (older files) or outside (0, 1].
  EXPECT_EQ(m.count("stream_efficiency.coo"), 0u);
  EXPECT_EQ(r.coo_efficiency, 0.7);
  p.coo_efficiency = 0.93;
  m.clear();
  aijp::params_to_metrics(p, m);
  EXPECT_EQ(m.at("stream_efficiency.coo"), 0.93);
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_EQ(r.coo_efficiency, 0.93);
  m["stream_efficiency.coo"] = 1.4;
  aijp::bandwidth_model_params s;
  ASSERT_TRUE(aijp::params_from_metrics(m, s));
  EXPECT_EQ(s.coo_efficiency, 0.7);
}

// `p` written to a cache entry's metrics `m` and read back into `r` (call through ASSERT_NO_FATAL_FAILURE).
void through_metrics(const aijp::bandwidth_model_params& p, std::map<std::string, double>& m, aijp::bandwidth_model_params& r)
{
  aijp::params_to_metrics(p, m);
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
}

// A small matrix of rows of 3 with one long row, whose chain bounds the thread-per-row layouts, on a device
// with an L2 of `l2_bytes`.
aijp::prediction_input chain_bound_input(aijp::size_type rows, int long_row, double l2_bytes)
{
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = static_cast<aijp::size_type>(l2_bytes);
  in.stats.rows = in.stats.cols = rows;
  in.stats.nnz = rows * 3 + long_row;
  in.stats.mean = static_cast<double>(in.stats.nnz) / rows;
  in.stats.mode_len = in.stats.min_len = 3;
  in.stats.mode_count = rows - 1;
  in.stats.max_len = long_row;
  in.stats.n_iter_natural = in.stats.n_iter_sorted = (rows + 31) / 32 * 3 + long_row;
  in.x_sectors_per_nnz = 0.25;
  return in;
}

// A chain does not hide all of the other rows' traffic: products measured as chain + 0.3 x their streaming /
// L2 term (chains in the L2 beside 20000-240000 short rows) give back the overlap 0.3 from the fit's grid and the
// chain factor net of it; products measured as the chain alone keep no overlap. The key round-trips through the
// cache's metrics, and a file without it predicts the larger term alone. Formats outside csr_vector and ELL fit none.
TEST(PlaceholderModel, ChainOverlapsPartOfTheTrafficBesideIt)
{
  const aijp::format_id f = aijp::format_id::csr_vector;
  const int i = static_cast<int>(f);
  aijp::bandwidth_model_params truth;
  truth.format_chain_scale[i] = 1.2;
  truth.format_overlap[i] = 0.3;
  const auto predicted = [&](const aijp::prediction_input& in, const aijp::bandwidth_model_params& q) {
    return aijp::predict_bandwidth_model(in, q, {f}).front().predicted_us;
  };
  // Chains of 400-488 entries beside 20000-240000 short rows, measured as `q` predicts them for format `g`.
  const auto observations = [](aijp::format_id g, const aijp::bandwidth_model_params& q) {
    std::vector<aijp::fixed_cost_observation> obs;
    for (int k = 0; k < 12; ++k) {
      const auto in = chain_bound_input(20000 + 20000 * k, 400 + 8 * k, 50 << 20);
      obs.push_back({g, in, aijp::predict_bandwidth_model(in, q, {g}).front().predicted_us});
    }
    return obs;
  };
  for (double overlap : {0.3, 0.0}) {
    truth.format_overlap[i] = overlap;
    const auto obs = observations(f, truth);
    double largest_share = 0;
    for (const auto& o : obs) {
      const auto b = aijp::explain_bandwidth_model(f, o.input, aijp::bandwidth_model_params{});
      largest_share = std::max(largest_share, std::max(b.stream_us, b.l2_us) / b.raw_chain_us);
    }
    ASSERT_GT(largest_share, 0.1) << "the traffic beside the chain must be large enough to tell the overlap";
    ASSERT_LT(largest_share, 0.5);
    aijp::bandwidth_model_params p;
    const auto used = aijp::fit_format_corrections(obs, p);
    SCOPED_TRACE(overlap);
    EXPECT_NEAR(p.format_overlap[i], overlap, 1e-12);
    EXPECT_EQ(used.overlap[i] > 0, overlap > 0);
    EXPECT_NEAR(p.format_chain_scale[i], 1.2, 1e-6);
    for (const auto& o : obs) EXPECT_NEAR(predicted(o.input, p), o.measured_us, 1e-6 * o.measured_us);
  }
  // Fitted for csr_vector and ELL only (held out on the H100 it raised JAD's p95): JAD's products with the same
  // overlap leave JAD without one.
  {
    const aijp::format_id jad = aijp::format_id::jad;
    aijp::bandwidth_model_params jad_truth;
    jad_truth.format_chain_scale[static_cast<int>(jad)] = 1.2;
    jad_truth.format_overlap[static_cast<int>(jad)] = 0.3;
    aijp::bandwidth_model_params q;
    const auto used = aijp::fit_format_corrections(observations(jad, jad_truth), q);
    EXPECT_GT(used.chain[static_cast<int>(jad)], 0);
    EXPECT_EQ(q.format_overlap[static_cast<int>(jad)], 0.0);
  }
  aijp::bandwidth_model_params p;
  p.format_overlap[i] = 0.3;
  std::map<std::string, double> m;
  aijp::bandwidth_model_params r;
  ASSERT_NO_FATAL_FAILURE(through_metrics(p, m, r));
  EXPECT_NEAR(m.at("chain_overlap.csr_vector"), 0.3, 1e-12);
  EXPECT_EQ(m.count("chain_overlap.sell"), 0u);
  EXPECT_NEAR(r.format_overlap[i], 0.3, 1e-12);
  // The larger term alone without the key; with it, the chain plus 0.3 of the traffic where the chain is larger.
  const auto in = chain_bound_input(20000, 3000, 50 << 20);
  const auto b = aijp::explain_bandwidth_model(f, in, aijp::bandwidth_model_params{});
  const double traffic = std::max(b.stream_us, b.l2_us);
  ASSERT_GT(b.chain_us, traffic);
  EXPECT_NEAR(predicted(in, r) - predicted(in, aijp::bandwidth_model_params{}), 0.3 * traffic, 1e-9);
}

// HYB's ELL part runs ELL's kernel: where none of HYB's chain-bound samples ran in the L2 (the warm-up's are
// constant rows of 512-2048 from DRAM), its chain factor in the L2 is ELL's, and the chains from DRAM keep
// HYB's own.
TEST(PlaceholderModel, HybChainInTheL2TakesEllsFactorWithoutChainsOfItsOwnThere)
{
  aijp::bandwidth_model_params p;
  std::vector<aijp::fixed_cost_observation> obs;
  const auto measured_at = [&](aijp::format_id f, const aijp::prediction_input& in, double factor) {
    const auto b = aijp::explain_bandwidth_model(f, in, p);
    EXPECT_GT(b.raw_chain_us, 2 * std::max({p.launch_us, b.stream_us, b.l2_us}));  // chain-bound
    return b.fixed_us + factor * b.raw_chain_us;
  };
  for (int k = 0; k < 6; ++k) {
    // ELL: one long row in a small matrix, in the L2.
    const auto e = chain_bound_input(64 + 16 * k, 500 + 100 * k, 50 << 20);
    obs.push_back({aijp::format_id::ell, e, measured_at(aijp::format_id::ell, e, 2.4)});
    // HYB: rows of one length K (no COO part) beyond a 64 KiB L2.
    auto h = uniform_rows(64, 500 + 100 * k, 0.25);
    h.device.l2_bytes = 64 << 10;
    obs.push_back({aijp::format_id::hyb, h, measured_at(aijp::format_id::hyb, h, 2.0)});
  }
  aijp::bandwidth_model_params fitted = p;
  const auto used = aijp::fit_format_corrections(obs, fitted, 5);
  ASSERT_EQ(used.chain[static_cast<int>(aijp::format_id::hyb)], 6);
  EXPECT_NEAR(aijp::chain_factor(fitted, aijp::format_id::hyb, 1.0, true), 2.4, 1e-6);
  EXPECT_NEAR(aijp::chain_factor(fitted, aijp::format_id::hyb, 1.0, false), 2.0, 1e-6);
  // Without ELL's chains HYB keeps its one factor for both.
  std::vector<aijp::fixed_cost_observation> hyb_only;
  for (const auto& o : obs) {
    if (o.format == aijp::format_id::hyb) hyb_only.push_back(o);
  }
  aijp::bandwidth_model_params own = p;
  aijp::fit_format_corrections(hyb_only, own, 5);
  EXPECT_NEAR(aijp::chain_factor(own, aijp::format_id::hyb, 1.0, true), 2.0, 1e-6);
}

// A HYB of fewer rows than the Bell-Garland threshold has no ELL part (K = 0): its ELL kernel only writes y, and
// its fixed cost is fitted apart from the other HYBs' (hyb_empty_ell_us, their difference).
TEST(PlaceholderModel, HybWithoutEllPartHasItsOwnFixedCost)
{
  aijp::bandwidth_model_params p;
  const auto hyb_input = [](aijp::size_type rows, aijp::index_type width, aijp::size_type coo_nnz) {
    auto in = uniform_rows(rows, width, 0.1);
    in.stats.hyb_ell_width = width;
    in.stats.hyb_coo_nnz = coo_nnz;
    in.stats.nnz += coo_nnz;
    in.stats.max_len = width + 100;
    in.stats.mean = static_cast<double>(in.stats.nnz) / rows;
    return in;
  };
  std::vector<aijp::fixed_cost_observation> obs;
  for (int k = 0; k < 6; ++k) {
    const auto empty = hyb_input(2000, 0, 300000 + 40000 * k);  // K = 0: every entry in the COO part
    const auto both = hyb_input(8000, 4, 250000 + 40000 * k);   // an ELL part of 4 and a COO part
    for (const auto* in : {&empty, &both}) {
      const auto b = aijp::explain_bandwidth_model(aijp::format_id::hyb, *in, p);
      const double v = std::max({b.stream_us, b.chain_us, b.l2_us});
      ASSERT_GT(v, 0.25 * p.launch_us);  // above a quarter launch: no floor
      ASSERT_LT(v, 2 * p.launch_us);     // dominated by fixed costs
      obs.push_back({aijp::format_id::hyb, *in, b.fixed_us + v + (in == &empty ? 1.5 : 2.0)});
    }
  }
  aijp::bandwidth_model_params fitted = p;
  const auto used = aijp::fit_format_corrections(obs, fitted, 5);
  EXPECT_EQ(used.fixed[static_cast<int>(aijp::format_id::hyb)], 6);
  EXPECT_EQ(used.hyb_empty_ell, 6);
  EXPECT_NEAR(fitted.format_fixed_us[static_cast<int>(aijp::format_id::hyb)], 2.0, 1e-9);
  EXPECT_NEAR(fitted.hyb_empty_ell_us, -0.5, 1e-9);
  for (const auto& o : obs) {
    EXPECT_NEAR(aijp::explain_bandwidth_model(aijp::format_id::hyb, o.input, fitted).predicted_us, o.measured_us, 1e-9);
  }
  // Kept in the cache under its own key, absent while neutral.
  std::map<std::string, double> m;
  aijp::params_to_metrics(fitted, m);
  EXPECT_DOUBLE_EQ(m.at("fixed_us_empty_ell.hyb"), fitted.hyb_empty_ell_us);
  aijp::bandwidth_model_params r;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_DOUBLE_EQ(r.hyb_empty_ell_us, fitted.hyb_empty_ell_us);
  aijp::params_to_metrics(p, m);
  EXPECT_EQ(m.count("fixed_us_empty_ell.hyb"), 0u);
  // Too few K = 0 HYBs: one fixed cost for all, no difference.
  obs.erase(obs.begin() + 2, obs.end());
  for (int k = 0; k < 6; ++k) {
    const auto both = hyb_input(8000, 4, 250000 + 40000 * k);
    const auto b = aijp::explain_bandwidth_model(aijp::format_id::hyb, both, p);
    obs.push_back({aijp::format_id::hyb, both, b.fixed_us + std::max({b.stream_us, b.chain_us, b.l2_us}) + 2.0});
  }
  aijp::bandwidth_model_params one = p;
  EXPECT_EQ(aijp::fit_format_corrections(obs, one, 5).hyb_empty_ell, 0);
  EXPECT_EQ(one.hyb_empty_ell_us, 0.0);
}

// The chain factor: over the samples whose longest-row chain clearly dominates, measured minus fixed costs over
// the chain; samples of other regimes do not move it, and the prediction's chain scales with it.
TEST(PlaceholderModel, ChainFactorFittedFromChainBoundSamples)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  const aijp::format_id ell = aijp::format_id::ell;
  // A small matrix with one long row: ELL pads every row to it, but few rows keep the traffic small.
  // The layout fits in the L2: the chain runs at the L2 latency.
  const auto chain_bound = [](aijp::size_type rows, int long_row) { return chain_bound_input(rows, long_row, 50 << 20); };
  const auto predicted = [&](const aijp::prediction_input& in, const aijp::bandwidth_model_params& q) {
    return aijp::predict_bandwidth_model(in, q, {ell}).front().predicted_us;
  };
  std::vector<aijp::fixed_cost_observation> obs;
  const double factors[] = {2.0, 2.1, 1.9, 2.05, 6.0, 1.95};
  int k = 0;
  for (double f : factors) {
    const auto in = chain_bound(64 + 16 * k, 500 + 100 * k);
    ++k;
    const double chain = in.stats.max_len * p.serial_entry_l2_ns * 1e-3;
    ASSERT_GT(chain, 4 * p.launch_us);
    ASSERT_NEAR(predicted(in, p), p.launch_us + chain, 1e-9);  // the chain is what the placeholder predicts
    obs.push_back({ell, in, p.launch_us + f * chain});
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  EXPECT_EQ(used.chain[static_cast<int>(ell)], 6);
  EXPECT_NEAR(p.format_chain_scale[static_cast<int>(ell)], 2.025, 1e-9);  // median of the six factors
  EXPECT_EQ(used.fixed[static_cast<int>(ell)], 0);                       // no sample dominated by fixed costs
  EXPECT_EQ(p.format_fixed_us[static_cast<int>(ell)], 0.0);
  const auto in = chain_bound(100, 1000);
  aijp::bandwidth_model_params neutral;
  neutral.l2_bytes = p.l2_bytes;
  EXPECT_NEAR(predicted(in, p) - p.launch_us, 2.025 * (predicted(in, neutral) - neutral.launch_us), 1e-9);
  EXPECT_EQ(aijp::fit_format_corrections({}, p).chain[static_cast<int>(ell)], 0);  // nothing to fit: kept
  EXPECT_NEAR(p.format_chain_scale[static_cast<int>(ell)], 2.025, 1e-9);
}

// JAD's chain grows with its lanes as 1 - 1 / lanes (steepest from one lane to two, flat beyond ~8), the other
// layouts' along a line; the fit of JAD's factor and slope uses that shape, so one long row is predicted at the
// factor of one lane, not at the median of the few-lane group.
TEST(PlaceholderModel, JadChainSaturatesWithLanes)
{
  aijp::bandwidth_model_params p;
  const aijp::format_id jad = aijp::format_id::jad, ell = aijp::format_id::ell;
  p.format_chain_scale[static_cast<int>(jad)] = p.format_chain_scale[static_cast<int>(ell)] = 1.0;
  p.format_chain_lanes[static_cast<int>(jad)] = p.format_chain_lanes[static_cast<int>(ell)] = 1.0;
  const double sat = 1.0 / (1.0 - 1.0 / 32);
  EXPECT_NEAR(aijp::chain_factor(p, jad, 1.0), 1.0, 1e-12);
  EXPECT_NEAR(aijp::chain_factor(p, jad, 2.0), 1.0 + 0.5 * sat, 1e-12);
  EXPECT_NEAR(aijp::chain_factor(p, jad, 32.0), 2.0, 1e-12);
  EXPECT_NEAR(aijp::chain_factor(p, ell, 2.0), 1.0 + 1.0 / 31, 1e-12);
  EXPECT_NEAR(aijp::chain_factor(p, ell, 32.0), 2.0, 1e-12);

  // Chain-bound samples in the L2 whose ratio follows 0.78 + 0.74 (1 - 1 / lanes) (the H100 warm-up's block
  // samples): lanes 1, 1, 2, 2, 4, 8 (few) and 20, 24, 32 (many).
  p = aijp::bandwidth_model_params{};
  p.l2_bytes = 50.0 * (1 << 20);
  std::vector<aijp::fixed_cost_observation> obs;
  const int lanes[] = {1, 1, 2, 2, 4, 8, 20, 24, 32};
  int k = 0;
  for (int l : lanes) {
    auto in = chain_bound_input(4096 + 64 * k, 1000 + 50 * k, p.l2_bytes);
    ++k;
    in.stats.chain_warp_nnz = static_cast<aijp::size_type>(l) * in.stats.max_len;
    ASSERT_NEAR(aijp::chain_lanes(in.stats), l, 1e-12);
    const double chain = in.stats.max_len * p.serial_entry_l2_ns * 1e-3;
    const double fixed = aijp::explain_bandwidth_model(jad, in, p).fixed_us;
    obs.push_back({jad, in, fixed + (0.78 + 0.74 * (1.0 - 1.0 / l)) * chain});
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  const int j = static_cast<int>(jad);
  ASSERT_EQ(used.chain[j], 9);
  EXPECT_EQ(used.lanes[j], 9);
  // The line through the groups' medians (one lane -> ratio 0.78, 8 lanes -> 1.43) in the 1 - 1 / lanes position.
  EXPECT_NEAR(aijp::chain_factor(p, jad, 1.0), 0.78, 0.03);
  EXPECT_NEAR(aijp::chain_factor(p, jad, 2.0), 1.15, 0.03);
  EXPECT_NEAR(aijp::chain_factor(p, jad, 32.0), 1.50, 0.03);
}

// csr_scalar's chain lanes are the rows of the longest row's SM still running over its steps (the L1 serves all
// of them), not the rows of its warp, with the position (the other layouts' (lanes - 1) / 31 up to two warps
// of busy rows, 64, and flat beyond) averaged over the steps: the SM's other rows run beside the longest
// row's group for their mean length only. A small FEM-like matrix whose 256-row block walks rows of 60 next to
// a longest row of 80 is at the clamp for 60 of its 80 steps; one long row among short rows stays near one.
TEST(PlaceholderModel, CsrScalarChainLanesCountTheRowsOfItsSm)
{
  const aijp::device_properties d = h100_like();
  aijp::row_stats fem;
  fem.rows = 4884;  // 20 blocks of 256 rows: one per SM
  fem.max_len = 80;
  fem.mean = 60.0;
  fem.chain_warp_nnz = 32 * 70;
  // 60 steps at 28 + 224 busy rows (clamped at 64: position 63 / 31), 20 steps at the group's 28 (27 / 31); the
  // averaged rows, (32 x 70 + 224 x 60) / 80 = 196, would have put all 80 at the clamp.
  EXPECT_NEAR(aijp::csr_scalar_chain_lanes(fem, &d), 1.0 + (60.0 * 63 + 20.0 * 27) / 80, 1e-9);
  EXPECT_NEAR(aijp::csr_scalar_chain_lanes(fem, nullptr), aijp::chain_lanes(fem), 1e-12);  // no geometry
  aijp::row_stats one = fem;
  one.rows = 1800;
  one.max_len = 1300;
  one.mean = 6.0;
  one.chain_warp_nnz = 1300 + 31 * 6;
  // 6 steps with the 224 other rows of its block (at the clamp), 1294 with its group's (1300 + 31 x 6) / 1300.
  const double own = (1300.0 + 31 * 6) / 1300;
  EXPECT_NEAR(aijp::csr_scalar_chain_lanes(one, &d), 1.0 + (6.0 * 63 + 1294.0 * (own - 1.0)) / 1300, 1e-9);
  EXPECT_LT(aijp::csr_scalar_chain_lanes(one, &d), 1.5);
  // A tiny matrix: the SM holds its 40 rows only.
  aijp::row_stats tiny;
  tiny.rows = 40;
  tiny.max_len = 4;
  tiny.mean = 4.0;
  tiny.chain_warp_nnz = 128;
  EXPECT_NEAR(aijp::csr_scalar_chain_lanes(tiny, &d), 40.0, 1e-9);
  // 2M rows: 8 resident blocks per SM (2048 rows), and 8 long rows of 200000 among rows of 12.
  aijp::row_stats big;
  big.rows = 2000000;
  big.max_len = 200000;
  big.mean = 12.0;
  big.chain_warp_nnz = 8 * 200000 + 24 * 12;
  const double group = (8.0 * 200000 + 24 * 12) / 200000;
  EXPECT_NEAR(aijp::csr_scalar_chain_lanes(big, &d), 1.0 + (12.0 * 63 + 199988.0 * (group - 1.0)) / 200000, 1e-9);

  aijp::bandwidth_model_params p;
  const aijp::format_id cs = aijp::format_id::csr_scalar;
  p.format_chain_scale[static_cast<int>(cs)] = 1.0;
  p.format_chain_lanes[static_cast<int>(cs)] = 1.0;
  p.format_chain_lanes[static_cast<int>(aijp::format_id::ell)] = 1.0;
  EXPECT_NEAR(aijp::chain_factor(p, cs, 1.0), 1.0, 1e-12);
  EXPECT_NEAR(aijp::chain_factor(p, cs, 32.0), 2.0, 1e-12);
  EXPECT_NEAR(aijp::chain_factor(p, cs, 64.0), 1.0 + 63.0 / 31, 1e-12);
  EXPECT_NEAR(aijp::chain_factor(p, cs, 200.0), 1.0 + 63.0 / 31, 1e-12);  // flat beyond two warps
  EXPECT_NEAR(aijp::chain_factor(p, aijp::format_id::ell, 64.0), 2.0, 1e-12);  // the others: flat beyond 32

  // The explained lanes of the placeholder are these.
  aijp::prediction_input in;
  in.stats = fem;
  in.stats.cols = fem.rows;
  in.stats.nnz = static_cast<aijp::size_type>(fem.rows * fem.mean);
  in.device = d;
  in.device.l2_bytes = 50 << 20;
  in.value_bytes = 8;
  EXPECT_NEAR(aijp::explain_bandwidth_model(cs, in, p).lanes, aijp::csr_scalar_chain_lanes(fem, &d), 1e-9);
}

// JAD's factor at one lane comes from the chains of about one lane where the warm-up has them, not from the
// line through the 1-16 and 17-32 lane groups extrapolated from the few-lane median (u ~0.76 in the saturating
// position): the H100 session-27 warm-up with its blocks placed off row 0 measured one long row at 0.91-0.94 of the
// raw chain, 20-32 at 1.45-1.50, and 8 long rows at 1.10-1.13 (1.40-1.49 with the blocks at row 0); the lanes
// groups put one lane at 0.60 and the held-out single long rows (0.95-1.02) 29-35 % under.
TEST(PlaceholderModel, JadFactorAtOneLaneFromOneLaneChains)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  const aijp::format_id jad = aijp::format_id::jad;
  const auto fit = [&](const std::vector<std::pair<int, double>>& lanes_ratio, bool sorted_known = true) {
    std::vector<aijp::fixed_cost_observation> obs;
    int k = 0;
    for (const auto& [l, r] : lanes_ratio) {
      auto in = chain_bound_input(4096 + 64 * k, 1000 + 50 * k, p.l2_bytes);
      ++k;
      in.stats.chain_warp_nnz = static_cast<aijp::size_type>(l) * in.stats.max_len;
      in.stats.sorted_chain_lanes = sorted_known ? l : 0.0;
      const double chain = in.stats.max_len * p.serial_entry_l2_ns * 1e-3;
      obs.push_back({jad, in, aijp::explain_bandwidth_model(jad, in, p).fixed_us + r * chain});
    }
    aijp::bandwidth_model_params q = p;
    const auto used = aijp::fit_format_corrections(obs, q);
    EXPECT_EQ(used.lanes[static_cast<int>(jad)], static_cast<int>(lanes_ratio.size()));
    return q;
  };
  // The session-27 placed warm-up's blocks in the L2 (two windows each), rounded.
  const std::vector<std::pair<int, double>> placed = {{1, 0.91}, {1, 0.94}, {2, 1.06}, {2, 1.10}, {8, 1.10}, {8, 1.13},
                                                      {20, 1.45}, {20, 1.48}, {32, 1.46}, {32, 1.50}};
  const auto q = fit(placed);
  EXPECT_NEAR(aijp::chain_factor(q, jad, 1.0), 0.925, 0.01);  // the one-lane chains' median
  EXPECT_GT(aijp::chain_factor(q, jad, 32.0), 1.3);
  // Fewer than two chains of about one lane: the lanes groups as before (their line's value at one lane is
  // below every ratio measured here).
  const std::vector<std::pair<int, double>> no_single(placed.begin() + 2, placed.end());
  const auto r = fit(no_single);
  EXPECT_LT(aijp::chain_factor(r, jad, 1.0), 0.8);
  // Samples without the sorted statistic (natural lanes only) do not say which chains JAD walks with one lane:
  // the lanes groups too.
  const auto n = fit(placed, false);
  EXPECT_LT(aijp::chain_factor(n, jad, 1.0), 0.8);
}

// csr_scalar's chains from DRAM along contiguous rows run faster than along scattered ones
// (bandwidth_model_params::format_chain_scatter_dram): chains measured at 0.7 of the DRAM latency along rows of
// contiguous columns (rho 1/4 for doubles: scatter 0) and 1.0 along rows of a sector per entry (scatter 1) give
// back kappa 0.3 and the factor at scatter 1; a chain without the statistic keeps factor 1 (the DRAM scale alone);
// the key round-trips through the cache's metrics; JAD fits none.
TEST(PlaceholderModel, CsrScalarChainFromDramFollowsItsRowsScatter)
{
  aijp::bandwidth_model_params p;
  const double small_l2 = 4 << 20;  // holds x of 100K rows (0.8 MB), not their layout with its long row (6 MB)
  std::vector<aijp::fixed_cost_observation> obs;
  const auto input = [&](int k, double rho) {
    auto in = chain_bound_input(100000 + 1000 * k, 200000 + 1000 * k, small_l2);
    in.x_mixture.share[0] = 1.0;
    in.x_mixture.ratio[0] = 0.1;
    in.x_mixture.longest_row_len = static_cast<double>(in.stats.max_len);
    in.x_mixture.longest_row_ratio = rho;
    return in;
  };
  for (const aijp::format_id f : {aijp::format_id::csr_scalar, aijp::format_id::jad}) {
    for (int k = 0; k < 6; ++k) {
      const double rho = k % 2 == 0 ? 0.25 : 1.0;
      const auto in = input(k, rho);
      const auto b = aijp::explain_bandwidth_model(f, in, p);
      ASSERT_FALSE(b.in_l2);
      obs.push_back({f, in, b.fixed_us + (rho < 0.5 ? 0.7 : 1.0) * b.raw_chain_us});
    }
  }
  aijp::bandwidth_model_params q = p;
  const auto used = aijp::fit_format_corrections(obs, q);
  const int i = static_cast<int>(aijp::format_id::csr_scalar), j = static_cast<int>(aijp::format_id::jad);
  EXPECT_EQ(used.scatter_dram[i], 6);
  EXPECT_NEAR(q.format_chain_scatter_dram[i], 0.3, 1e-9);
  EXPECT_EQ(used.scatter_dram[j], 0);
  EXPECT_EQ(q.format_chain_scatter_dram[j], 0.0);
  for (int k = 0; k < 2; ++k) {
    const auto in = input(k, k == 0 ? 0.25 : 1.0);
    const auto b = aijp::explain_bandwidth_model(aijp::format_id::csr_scalar, in, q);
    EXPECT_NEAR(b.chain_us / b.raw_chain_us, k == 0 ? 0.7 : 1.0, 1e-6) << k;
  }
  // Unknown (no statistic, or a sampled row under half the longest): the DRAM factor alone.
  auto unknown = input(0, 0.25);
  unknown.x_mixture.longest_row_len = unknown.stats.max_len / 4;
  const auto u = aijp::explain_bandwidth_model(aijp::format_id::csr_scalar, unknown, q);
  EXPECT_NEAR(u.chain_us / u.raw_chain_us, q.format_chain_scale_dram[i], 1e-9);
  std::map<std::string, double> m;
  aijp::params_to_metrics(q, m);
  EXPECT_NEAR(m.at("chain_scatter_dram.csr_scalar"), 0.3, 1e-9);
  EXPECT_EQ(m.count("chain_scatter_dram.jad"), 0u);
  aijp::bandwidth_model_params r;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_NEAR(r.format_chain_scatter_dram[i], 0.3, 1e-9);
}

// Observations of `formats` on eight inputs (input(k), k = 0..7), each measured as `truth` predicts it, fitted from
// `start`: the fitted parameters, the fit's counts, and the parameters read back from their cache metrics `m`.
template <typename Input>
std::tuple<aijp::bandwidth_model_params, aijp::format_fit, aijp::bandwidth_model_params> fit_measured_as(
    const aijp::bandwidth_model_params& truth, const aijp::bandwidth_model_params& start,
    std::initializer_list<aijp::format_id> formats, const Input& input, std::map<std::string, double>& m)
{
  std::vector<aijp::fixed_cost_observation> obs;
  for (int k = 0; k < 8; ++k) {
    const auto in = input(k);
    for (const aijp::format_id f : formats) obs.push_back({f, in, aijp::explain_bandwidth_model(f, in, truth).predicted_us});
  }
  aijp::bandwidth_model_params q = start, r;
  const auto used = aijp::fit_format_corrections(obs, q);
  aijp::params_to_metrics(q, m);
  EXPECT_TRUE(aijp::params_from_metrics(m, r));
  return {q, used, r};
}

// Beyond the L2 the matrix streams from DRAM and the L2 term is the x gathers' (format_l2_matrix_share): with a
// share w the term counts the gathers and w of the other L2 bytes, at the calibrated rate scaled to w of the
// calibration product's other bytes (16 x 32 bytes of gathers against 16 x 12 + 4 + 8 per row); a layout in the L2
// keeps all of its bytes at the calibrated rate. Gather-bound products measured as the gathers alone at the scaled
// rate give ELL a share below 1 from the fit's grid; cuSPARSE SELL (its own L2 rate) fits none. The key round-trips
// through the cache's metrics.
TEST(PlaceholderModel, L2TermBeyondTheL2CountsTheGathers)
{
  const aijp::format_id ell = aijp::format_id::ell, csell = aijp::format_id::cusparse_sell;
  const int i = static_cast<int>(ell), j = static_cast<int>(csell);
  aijp::bandwidth_model_params p;
  // Half a sector per entry: more bytes besides the gathers per gather than the calibration product's.
  const auto beyond = uniform_rows(2000000, 24, 0.5);  // ~600 MB of layout, x 16 MB: beyond the 50 MiB L2
  const auto inside = uniform_rows(20000, 24, 0.5);    // ~6 MB of layout: in it
  const auto all = aijp::explain_bandwidth_model(ell, beyond, p);
  ASSERT_FALSE(all.in_l2);
  aijp::bandwidth_model_params half = p;
  half.format_l2_matrix_share[i] = 0.5;
  const auto b = aijp::explain_bandwidth_model(ell, beyond, half);
  const double gathers = 2000000.0 * 24 * 32 * 0.5;
  const double scale = (16 * 32.0 + 0.5 * (16 * 12.0 + 4 + 8)) / (16 * 32.0 + 16 * 12.0 + 4 + 8);
  EXPECT_NEAR(b.l2_us, (gathers + 0.5 * (all.l2_us * p.l2_gather_gbs * 1e3 - gathers)) / (p.l2_gather_gbs * scale * 1e3), 1e-6 * b.l2_us);
  EXPECT_LT(b.l2_us, all.l2_us);
  EXPECT_DOUBLE_EQ(aijp::explain_bandwidth_model(ell, inside, half).l2_us, aijp::explain_bandwidth_model(ell, inside, p).l2_us);
  // Measured as the gathers alone at the scaled rate (share 0), gather-bound, 2M-4M rows.
  aijp::bandwidth_model_params none = p;
  none.format_l2_matrix_share[i] = none.format_l2_matrix_share[j] = 0.0;
  std::map<std::string, double> m;
  const auto [q, used, r] =
      fit_measured_as(none, p, {ell, csell}, [](int k) { return uniform_rows(2000000 + 250000 * k, 16 + 2 * k, 0.5); }, m);
  EXPECT_LT(q.format_l2_matrix_share[i], 1.0);
  EXPECT_EQ(used.l2_matrix_share[i], 8);
  EXPECT_EQ(q.format_l2_matrix_share[j], 1.0);
  EXPECT_EQ(used.l2_matrix_share[j], 0);
  EXPECT_DOUBLE_EQ(m.at("l2_matrix_share.ell"), q.format_l2_matrix_share[i]);
  EXPECT_EQ(m.count("l2_matrix_share.cusparse_sell"), 0u);
  EXPECT_DOUBLE_EQ(r.format_l2_matrix_share[i], q.format_l2_matrix_share[i]);
}

// A block of a partition plan stays in the L2 from one product to the next only where its layout and what the other
// blocks move fit together (prediction_input::l2_shared_bytes): a 6 MB block is in the L2 alone, not beside 100 MB
// of other rows, and with ELL's in-L2 pace it is priced slower there. The rest's bytes are its CSR entries and rows.
TEST(PlaceholderModel, BlockStaysInTheL2OnlyBesideTheRestOfItsMatrix)
{
  const aijp::format_id ell = aijp::format_id::ell;
  aijp::bandwidth_model_params p;
  p.format_l2_stream[static_cast<int>(ell)] = 1.0;
  auto block = uniform_rows(20000, 24, 0.125);
  const auto alone = aijp::explain_bandwidth_model(ell, block, p);
  ASSERT_TRUE(alone.in_l2);
  block.l2_shared_bytes = 100e6;
  const auto beside = aijp::explain_bandwidth_model(ell, block, p);
  EXPECT_FALSE(beside.in_l2);
  EXPECT_GT(beside.stream_us, alone.stream_us);
  EXPECT_GT(aijp::predict_bandwidth_model(block, p, {ell})[0].predicted_us,
            aijp::predict_bandwidth_model(uniform_rows(20000, 24, 0.125), p, {ell})[0].predicted_us);
  aijp::row_stats whole, part;
  whole.rows = 100, whole.nnz = 1000, part.rows = 40, part.nnz = 300;
  EXPECT_DOUBLE_EQ(aijp::rest_of_matrix_bytes(whole, part, 8), 700 * 12.0 + 60 * 12.0);
  EXPECT_DOUBLE_EQ(aijp::rest_of_matrix_bytes(whole, whole, 4), 0.0);
}

// A per-format choice of the fit (`field`, its training samples in `counts`, cache key `key`.<format>) gave format `f`
// `value` behind `count` samples and format `g` none: in the fitted parameters `q`, the metrics `m` and the
// parameters `r` read back from them.
void expect_chosen_for_one(const aijp::bandwidth_model_params& q, const aijp::format_fit& used, const aijp::bandwidth_model_params& r,
                           const std::map<std::string, double>& m, std::array<double, aijp::format_count> aijp::bandwidth_model_params::*field,
                           std::array<int, aijp::format_count> aijp::format_fit::*counts, const std::string& key, aijp::format_id f,
                           aijp::format_id g, double value, int count)
{
  const int i = static_cast<int>(f), j = static_cast<int>(g);
  EXPECT_EQ((q.*field)[i], value);
  EXPECT_EQ((used.*counts)[i], count);
  EXPECT_EQ((q.*field)[j], 0.0);
  EXPECT_EQ((used.*counts)[j], 0);
  EXPECT_EQ(m.at(key + "." + aijp::format_name(f)), value);
  EXPECT_EQ(m.count(key + "." + aijp::format_name(g)), 0u);
  EXPECT_EQ((r.*field)[i], value);
}

// A layout that stays in the L2 read at the L2 term's pace (format_l2_stream): with the flag, an in-L2 layout whose
// DRAM streaming term exceeds its L2 term is priced at the L2 term; a layout beyond the L2 keeps its stream. Products
// measured that way give ELL the flag from the fit; csr_vector (not a candidate) gets none. The key round-trips.
TEST(PlaceholderModel, InL2LayoutReadAtTheL2TermsPace)
{
  const aijp::format_id ell = aijp::format_id::ell, csrv = aijp::format_id::csr_vector;
  const int i = static_cast<int>(ell), j = static_cast<int>(csrv);
  aijp::bandwidth_model_params p;
  aijp::bandwidth_model_params on = p;
  on.format_l2_stream[i] = on.format_l2_stream[j] = 1.0;
  const auto in = uniform_rows(200000, 4, 0.05);  // ~10 MB of layout in the 50 MiB L2, x gathered locally
  const auto off_b = aijp::explain_bandwidth_model(ell, in, p);
  ASSERT_TRUE(off_b.in_l2);
  ASSERT_GT(off_b.stream_us, off_b.l2_us);
  const auto on_b = aijp::explain_bandwidth_model(ell, in, on);
  EXPECT_DOUBLE_EQ(on_b.stream_us, off_b.l2_us);
  EXPECT_LT(on_b.predicted_us, off_b.predicted_us);
  const auto beyond = uniform_rows(8000000, 4, 0.05);
  ASSERT_FALSE(aijp::explain_bandwidth_model(ell, beyond, p).in_l2);
  EXPECT_DOUBLE_EQ(aijp::explain_bandwidth_model(ell, beyond, on).stream_us, aijp::explain_bandwidth_model(ell, beyond, p).stream_us);
  std::map<std::string, double> m;
  const auto [q, used, r] =
      fit_measured_as(on, p, {ell, csrv}, [](int k) { return uniform_rows(150000 + 25000 * k, 4 + k % 3, 0.05); }, m);
  expect_chosen_for_one(q, used, r, m, &aijp::bandwidth_model_params::format_l2_stream, &aijp::format_fit::l2_stream, "l2_stream",
                        ell, csrv, 1.0, 8);
}

// A chain in the L2 grows with x's size (format_chain_x_doubling): with k per doubling the raw chain is scaled by
// 1 + k log2(x / 16 KiB), x clamped to [4 KiB, the L1], and only in the L2. Chain-bound ELL products measured that
// way (x of 8-240 KB, the warm-up's range) give ELL k = 0.06 from the fit's grid; JAD (not fitted) gets none. The key
// round-trips.
TEST(PlaceholderModel, ChainInTheL2GrowsWithXsSize)
{
  const aijp::format_id ell = aijp::format_id::ell, jad = aijp::format_id::jad;
  const int i = static_cast<int>(ell), j = static_cast<int>(jad);
  aijp::bandwidth_model_params flat;
  aijp::bandwidth_model_params truth = flat;
  truth.format_chain_x_doubling[i] = truth.format_chain_x_doubling[j] = 0.06;
  // ELL's raw chain on `rows` rows of 3 and one of `long_row` (ELL pads every row to it), on an L2 of `l2` bytes.
  const auto raw = [](const aijp::bandwidth_model_params& q, aijp::size_type rows, int long_row, double l2, int cc_major = 0) {
    auto in = chain_bound_input(rows, long_row, l2);
    in.device.cc_major = cc_major;
    const auto b = aijp::explain_bandwidth_model(aijp::format_id::ell, in, q);
    EXPECT_EQ(b.in_l2, l2 > (1 << 20)) << rows << " rows";
    return b.raw_chain_us;
  };
  const double l2 = 50 << 20;
  // 2048 rows: x of 16 KiB, the reference; 8192 rows (64 KiB): two doublings; 512 rows (4 KiB): two halvings.
  EXPECT_NEAR(raw(truth, 2048, 400, l2), raw(flat, 2048, 400, l2), 1e-12);
  EXPECT_NEAR(raw(truth, 8192, 400, l2), 1.12 * raw(flat, 8192, 400, l2), 1e-9);
  EXPECT_NEAR(raw(truth, 512, 400, l2), 0.88 * raw(flat, 512, 400, l2), 1e-9);
  EXPECT_NEAR(raw(truth, 256, 400, l2), 0.88 * raw(flat, 256, 400, l2), 1e-9);  // below 4 KiB: as 4 KiB
  // Above the L1 (x of 320 KB here): as the L1, four doublings on sm_90 (256 KB), three where the compute capability
  // is unknown (128 KB, l1_bytes_per_sm).
  EXPECT_NEAR(raw(truth, 40000, 40, l2, 9), 1.24 * raw(flat, 40000, 40, l2, 9), 1e-9);
  EXPECT_NEAR(raw(truth, 40000, 40, l2), 1.18 * raw(flat, 40000, 40, l2), 1e-9);
  // Beyond the L2 (an L2 of 64 KB) the chain is flat.
  EXPECT_NEAR(raw(truth, 8192, 400, 64 << 10), raw(flat, 8192, 400, 64 << 10), 1e-12);
  std::map<std::string, double> m;
  const auto [q, used, r] =
      fit_measured_as(truth, flat, {ell, jad}, [](int k) { return chain_bound_input(1000 + 1500 * k, 100 + 10 * k, 50 << 20); }, m);
  expect_chosen_for_one(q, used, r, m, &aijp::bandwidth_model_params::format_chain_x_doubling, &aijp::format_fit::chain_x,
                        "chain_x_doubling", ell, jad, 0.06, 8);
}

// csr_vector's idle lanes (format_idle_lane_offset): where a row takes one step of its lanes, the streaming
// efficiency is the lanes' filled share plus the offset (0.04 without a fitted one; rows of 21 on 32 lanes: 21/32 +
// 0.04). Stream-bound products measured at an offset of 0.1 give csr_vector 0.1 from the fit's grid; ELLR (not
// fitted) keeps 0.04. The key round-trips, and is left out at 0.04.
TEST(PlaceholderModel, CsrVectorIdleLanesOffsetFittedPerDevice)
{
  const aijp::format_id csrv = aijp::format_id::csr_vector, ellr = aijp::format_id::ellr;
  const int i = static_cast<int>(csrv);
  aijp::bandwidth_model_params p;
  aijp::bandwidth_model_params truth = p;
  truth.format_idle_lane_offset[i] = truth.format_idle_lane_offset[static_cast<int>(ellr)] = 0.1;
  const auto in = uniform_rows(2000000, 21, 0.05);  // beyond the L2, bound by its stream
  const auto at = aijp::explain_bandwidth_model(csrv, in, p), fitted = aijp::explain_bandwidth_model(csrv, in, truth);
  ASSERT_FALSE(at.in_l2);
  EXPECT_NEAR(at.stream_us / fitted.stream_us, (21.0 / 32 + 0.1) / (21.0 / 32 + 0.04), 1e-9);
  // Rows of several steps keep their + 0.25: no change.
  const auto two_steps = uniform_rows(2000000, 40, 0.05);
  EXPECT_DOUBLE_EQ(aijp::explain_bandwidth_model(csrv, two_steps, truth).stream_us, aijp::explain_bandwidth_model(csrv, two_steps, p).stream_us);
  std::map<std::string, double> m;
  const auto [q, used, r] =
      fit_measured_as(truth, p, {csrv, ellr}, [](int k) { return uniform_rows(1500000 + 250000 * k, 9 + 3 * (k % 4), 0.05); }, m);
  EXPECT_EQ(q.format_idle_lane_offset[i], 0.1);
  EXPECT_EQ(used.idle_lane[i], 8);
  EXPECT_EQ(q.format_idle_lane_offset[static_cast<int>(ellr)], 0.04);
  EXPECT_EQ(m.at("idle_lane_offset.csr_vector"), 0.1);
  EXPECT_EQ(m.count("idle_lane_offset.ellr"), 0u);
  EXPECT_EQ(r.format_idle_lane_offset[i], 0.1);
}

// cuSPARSE CSR streams faster per byte on longer rows (format_stream_row_doubling): its efficiency is scaled by
// 1 + k log2(max(1, mean / 8)), rows of 8 (the calibration's) and shorter unchanged. Stream-bound products measured at
// k = 0.05 give cuSPARSE CSR 0.05 from the fit's grid; ALG2 (not fitted) none. The key round-trips.
TEST(PlaceholderModel, CusparseCsrStreamsFasterOnLongerRows)
{
  const aijp::format_id csr = aijp::format_id::cusparse_csr, alg2 = aijp::format_id::cusparse_csr_alg2;
  aijp::bandwidth_model_params p;
  aijp::bandwidth_model_params truth = p;
  truth.format_stream_row_doubling[static_cast<int>(csr)] = truth.format_stream_row_doubling[static_cast<int>(alg2)] = 0.05;
  const auto stream = [&](const aijp::bandwidth_model_params& q, int per_row) {
    const auto b = aijp::explain_bandwidth_model(csr, uniform_rows(4000000, per_row, 0.05), q);
    EXPECT_FALSE(b.in_l2);
    return b.stream_us;
  };
  EXPECT_DOUBLE_EQ(stream(truth, 8), stream(p, 8));
  EXPECT_DOUBLE_EQ(stream(truth, 6), stream(p, 6));
  EXPECT_NEAR(stream(p, 32) / stream(truth, 32), 1.10, 1e-9);  // two doublings above 8
  std::map<std::string, double> m;
  const auto [q, used, r] =
      fit_measured_as(truth, p, {csr, alg2}, [](int k) { return uniform_rows(1500000 + 250000 * k, 8 + 4 * k, 0.05); }, m);
  expect_chosen_for_one(q, used, r, m, &aijp::bandwidth_model_params::format_stream_row_doubling, &aijp::format_fit::stream_row,
                        "stream_row_doubling", csr, alg2, 0.05, 8);
}

// Chains beyond the L2 get their own factor where the warm-up has enough of them: the chains in the L2 keep
// theirs, the DRAM ones are predicted with the median of their own ratios, and chains whose x does not fit in
// the L2 either (a third regime) do not move it.
TEST(PlaceholderModel, ChainFactorFromDramFittedApart)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  const aijp::format_id sell = aijp::format_id::sell_c_sigma;
  const auto chain_bound = chain_bound_input;
  std::vector<aijp::fixed_cost_observation> obs;
  // In the L2: factor 1.2 of the L2 latency.
  for (int k = 0; k < 6; ++k) {
    const auto in = chain_bound(64 + 16 * k, 500 + 100 * k, p.l2_bytes);
    obs.push_back({sell, in, p.launch_us + 1.2 * in.stats.max_len * p.serial_entry_l2_ns * 1e-3});
  }
  // Beyond the L2 (an L2 of 1 MB holds neither layout nor x of 300K rows): factor 0.9 of the DRAM latency.
  const double small_l2 = 1 << 20;
  for (int k = 0; k < 6; ++k) {
    const auto in = chain_bound(100000 + 1000 * k, 20000 + 1000 * k, small_l2 * 8);
    obs.push_back({sell, in, p.launch_us + 0.9 * in.stats.max_len * p.serial_entry_dram_ns * 1e-3});
  }
  // x beyond the L2 too: much slower, left out of the DRAM factor.
  for (int k = 0; k < 6; ++k) {
    const auto in = chain_bound(300000 + 1000 * k, 20000 + 1000 * k, small_l2);
    obs.push_back({sell, in, p.launch_us + 2.0 * in.stats.max_len * p.serial_entry_dram_ns * 1e-3});
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  const int i = static_cast<int>(sell);
  EXPECT_EQ(used.chain_dram[i], 6);
  EXPECT_NEAR(p.format_chain_scale_dram[i], 0.9, 1e-9);
  EXPECT_NEAR(aijp::chain_factor(p, sell, 1.0, false), 0.9, 1e-9);
  EXPECT_EQ(aijp::chain_factor(p, sell, 1.0, true), p.format_chain_scale[i]);
  // Round trip through the cache's metrics; absent keys keep one factor for both regimes.
  std::map<std::string, double> m;
  aijp::params_to_metrics(p, m);
  EXPECT_NEAR(m.at("chain_scale_dram.sell"), 0.9, 1e-9);
  aijp::bandwidth_model_params r;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_NEAR(r.format_chain_scale_dram[i], 0.9, 1e-9);
  aijp::bandwidth_model_params old;
  old.format_chain_scale[i] = 1.3;
  EXPECT_EQ(aijp::chain_factor(old, sell, 1.0, false), 1.3);
}

// cuSPARSE SELL's chains in the L2 run at two rates split by the layout's stored entries (a black box: the
// H100 warm-ups measured 0.44-0.47 of the raw chain up to 179K stored entries, 0.79-1.0 from 301K). The fit
// splits its chains where the two medians fit best, puts the boundary in the geometric middle of the gap, and
// predicts each side with its own factor; our own SELL kernel's chains keep one factor.
TEST(PlaceholderModel, CusparseSellChainSplitByStoredEntries)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  const aijp::format_id csell = aijp::format_id::cusparse_sell, sell = aijp::format_id::sell_c_sigma;
  const auto stored = [](const aijp::prediction_input& in) { return 32.0 * static_cast<double>(in.stats.n_iter_natural); };
  // The placeholder's fixed costs (cuSPARSE SELL: 1.5 us beyond its launch), none fitted: no sample is small.
  const auto fixed = [&](aijp::format_id f, const aijp::prediction_input& in) { return aijp::explain_bandwidth_model(f, in, p).fixed_us; };
  std::vector<aijp::fixed_cost_observation> obs;
  double small_max = 0, large_min = 1e300;
  for (int k = 0; k < 6; ++k) {
    // Few rows: 19K-35K stored entries, 0.45 of the raw chain.
    const auto small = chain_bound_input(1000 + 16 * k, 500 + 100 * k, p.l2_bytes);
    // 200K rows: 620K stored entries and more, the chain still dominating the traffic, 0.8 of the raw chain.
    const auto large = chain_bound_input(200000 + 1000 * k, 500 + 100 * k, p.l2_bytes);
    small_max = std::max(small_max, stored(small));
    large_min = std::min(large_min, stored(large));
    for (const aijp::format_id f : {csell, sell}) {
      obs.push_back({f, small, fixed(f, small) + 0.45 * small.stats.max_len * p.serial_entry_l2_ns * 1e-3});
      obs.push_back({f, large, fixed(f, large) + 0.8 * large.stats.max_len * p.serial_entry_l2_ns * 1e-3});
    }
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  EXPECT_EQ(used.cusparse_sell_wide, 6);
  EXPECT_NEAR(p.cusparse_sell_wide_padded, std::sqrt(small_max * large_min), 1e-6);
  EXPECT_NEAR(p.cusparse_sell_wide_chain_scale, 0.8, 1e-9);
  EXPECT_NEAR(p.format_chain_scale[static_cast<int>(csell)], 0.45, 1e-9);
  EXPECT_NEAR(p.format_chain_scale[static_cast<int>(sell)], 0.625, 1e-9);  // one factor: the median of both
  const auto chain = [&](aijp::format_id f, const aijp::prediction_input& in) {
    return aijp::explain_bandwidth_model(f, in, p).chain_us;
  };
  const auto small = chain_bound_input(1500, 800, p.l2_bytes), large = chain_bound_input(250000, 800, p.l2_bytes);
  EXPECT_NEAR(chain(csell, small), 0.45 * 800 * p.serial_entry_l2_ns * 1e-3, 1e-9);
  EXPECT_NEAR(chain(csell, large), 0.8 * 800 * p.serial_entry_l2_ns * 1e-3, 1e-9);
  // Beyond the L2 the DRAM factor (or the one factor) serves, whatever the size.
  const auto dram = chain_bound_input(250000, 800, 1 << 20);
  EXPECT_NEAR(chain(csell, dram), 0.45 * 800 * p.serial_entry_dram_ns * 1e-3, 1e-9);
  // Round trip through the cache's metrics; absent keys (older files): one rate.
  std::map<std::string, double> m;
  aijp::params_to_metrics(p, m);
  aijp::bandwidth_model_params r;
  r.l2_bytes = p.l2_bytes;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_NEAR(r.cusparse_sell_wide_padded, p.cusparse_sell_wide_padded, 1e-6);
  EXPECT_NEAR(r.cusparse_sell_wide_chain_scale, 0.8, 1e-9);
  m.erase("chain_wide_padded.cusparse_sell");
  m.erase("chain_scale_wide.cusparse_sell");
  aijp::bandwidth_model_params old;
  old.l2_bytes = p.l2_bytes;
  ASSERT_TRUE(aijp::params_from_metrics(m, old));
  EXPECT_EQ(old.cusparse_sell_wide_padded, 0.0);
  EXPECT_NEAR(aijp::explain_bandwidth_model(csell, large, old).chain_us, 0.45 * 800 * p.serial_entry_l2_ns * 1e-3, 1e-9);
  // One rate (no step of 1.25 x): no split.
  std::vector<aijp::fixed_cost_observation> flat;
  for (const auto& o : obs) {
    if (o.format == csell) flat.push_back({csell, o.input, fixed(csell, o.input) + 0.45 * o.input.stats.max_len * p.serial_entry_l2_ns * 1e-3});
  }
  aijp::bandwidth_model_params q;
  q.l2_bytes = p.l2_bytes;
  EXPECT_EQ(aijp::fit_format_corrections(flat, q).cusparse_sell_wide, 0);
  EXPECT_EQ(q.cusparse_sell_wide_padded, 0.0);
}

// A warm-up block in the L2: rows of 8 and one row of `long_row` (one lane), as the warm-up's cuSPARSE SELL gap
// series (kernels/src/warmup.cu): 32 x ((rows / 32 - 1) x 8 + long_row) stored entries in slices of 32.
aijp::prediction_input block_input(aijp::size_type rows, int long_row)
{
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50u << 20;
  in.stats.rows = in.stats.cols = rows;
  in.stats.nnz = (rows - 1) * 8 + long_row;
  in.stats.mean = static_cast<double>(in.stats.nnz) / rows;
  in.stats.mode_len = in.stats.min_len = 8;
  in.stats.mode_count = rows - 1;
  in.stats.max_len = long_row;
  in.stats.n_iter_natural = in.stats.n_iter_sorted = (rows / 32 - 1) * 8 + long_row;
  in.x_sectors_per_nnz = 0.25;
  return in;
}

// cuSPARSE SELL's chains as the warm-up samples them around the gap of session 29, each measured at `rate(stored
// entries, k)` of its raw chain (k numbers the sample): few-row chains (19K-35K stored entries), the 16000-row
// blocks of 400 and 1600 (140K, 179K), the gap series of 400 and 1600 (185K-282K), rows of 3 with a long row
// on 200K rows (620K and more). Every one is chain-bound in the L2 (the fit's condition).
std::vector<aijp::fixed_cost_observation> csell_gap_samples(const aijp::bandwidth_model_params& p,
                                                            const std::function<double(double, int)>& rate)
{
  std::vector<aijp::prediction_input> in;
  for (int k = 0; k < 6; ++k) in.push_back(chain_bound_input(1000 + 16 * k, 500 + 100 * k, p.l2_bytes));
  for (int k = 0; k < 5; ++k) {
    in.push_back(block_input(16000, 400));
    in.push_back(block_input(16000, 1600));
  }
  for (const aijp::size_type rows : {16800, 18400, 20000, 21600, 24000, 26400, 28800}) in.push_back(block_input(rows, 1600));
  for (const aijp::size_type rows : {21600, 23200, 24800, 26400, 28800, 31200, 33600}) in.push_back(block_input(rows, 400));
  for (int k = 0; k < 6; ++k) in.push_back(chain_bound_input(200000 + 1000 * k, 500 + 100 * k, p.l2_bytes));
  std::vector<aijp::fixed_cost_observation> obs;
  for (const auto& i : in) {
    const auto b = aijp::explain_bandwidth_model(aijp::format_id::cusparse_sell, i, p);
    EXPECT_TRUE(b.in_l2);
    EXPECT_GT(b.raw_chain_us, 2 * std::max({p.launch_us, b.stream_us, b.l2_us}));  // chain-bound
    const double stored = 32.0 * static_cast<double>(i.stats.n_iter_natural);
    obs.push_back({aijp::format_id::cusparse_sell, i, b.fixed_us + rate(stored, static_cast<int>(obs.size())) * b.raw_chain_us});
  }
  return obs;
}

// With samples inside the gap the split follows the step wherever it lies: for a step between any two adjacent
// sizes of the gap series (or below or above all of them), the boundary falls between the last fast and the
// first slow sample, the slow ones alone are fitted apart, and the prediction takes each side's rate.
TEST(PlaceholderModel, CusparseSellSplitFollowsAStepInsideTheGap)
{
  aijp::bandwidth_model_params base;
  base.l2_bytes = 50.0 * (1 << 20);
  const auto csell = aijp::format_id::cusparse_sell;
  std::vector<double> gap;
  for (const auto& o : csell_gap_samples(base, [](double, int) { return 0.46; })) {
    const double stored = 32.0 * static_cast<double>(o.input.stats.n_iter_natural);
    if (stored > 180000 && stored < 290000) gap.push_back(stored);
  }
  std::sort(gap.begin(), gap.end());
  ASSERT_EQ(gap.size(), 14u);
  // The step just above each gap sample in turn, and just below the first.
  std::vector<double> steps = {gap.front() - 1};
  for (const double g : gap) steps.push_back(g + 1);
  for (const double step : steps) {
    SCOPED_TRACE("step at " + std::to_string(step));
    aijp::bandwidth_model_params p = base;
    const auto obs = csell_gap_samples(p, [&](double stored, int) { return stored < step ? 0.46 : 0.8; });
    double fast_max = 0, slow_min = 1e300;
    int slow = 0;
    for (const auto& o : obs) {
      const double stored = 32.0 * static_cast<double>(o.input.stats.n_iter_natural);
      if (stored < step) {
        fast_max = std::max(fast_max, stored);
      } else {
        slow_min = std::min(slow_min, stored);
        ++slow;
      }
    }
    const auto used = aijp::fit_format_corrections(obs, p);
    EXPECT_EQ(used.cusparse_sell_wide, slow);
    EXPECT_GT(p.cusparse_sell_wide_padded, fast_max);
    EXPECT_LT(p.cusparse_sell_wide_padded, slow_min);
    EXPECT_NEAR(p.cusparse_sell_wide_padded, std::sqrt(fast_max * slow_min), 1e-6);
    EXPECT_NEAR(p.cusparse_sell_wide_chain_scale, 0.8, 1e-9);
    EXPECT_NEAR(p.format_chain_scale[static_cast<int>(csell)], 0.46, 1e-9);
    for (const auto& o : obs) {
      const auto b = aijp::explain_bandwidth_model(csell, o.input, p);
      const double stored = 32.0 * static_cast<double>(o.input.stats.n_iter_natural);
      EXPECT_NEAR(b.chain_us, (stored < step ? 0.46 : 0.8) * b.raw_chain_us, 1e-9) << stored;
    }
  }
}

// Samples that show no step give no split: one rate scattered by +-12 % in any order of size; one rate per
// shape, as the fast chains measured (the few-row ones higher than the blocks); a gentle rise with size (0.42 to
// 0.50 over the samples' 19K-635K stored entries, log-linear). Every split of such samples lowers the medians'
// deviation a little; the 1.25 x step between the two medians is what keeps the fit from inventing a boundary.
TEST(PlaceholderModel, CusparseSellNoSplitWithoutAStep)
{
  aijp::bandwidth_model_params base;
  base.l2_bytes = 50.0 * (1 << 20);
  const auto csell = aijp::format_id::cusparse_sell;
  const std::vector<std::function<double(double, int)>> spreads = {
      [](double, int k) { return 0.46 * (1 + 0.12 * std::sin(2.3 * k)); },
      [](double stored, int) { return stored < 40000 ? 0.55 : stored < 400000 ? 0.45 : 0.50; },
      [](double stored, int) { return 0.42 + 0.08 * std::log(stored / 19000) / std::log(635000.0 / 19000); },
  };
  for (std::size_t v = 0; v < spreads.size(); ++v) {
    SCOPED_TRACE("spread " + std::to_string(v));
    aijp::bandwidth_model_params p = base;
    const auto obs = csell_gap_samples(p, spreads[v]);
    const auto used = aijp::fit_format_corrections(obs, p);
    EXPECT_EQ(used.cusparse_sell_wide, 0);
    EXPECT_EQ(p.cusparse_sell_wide_padded, 0.0);
    EXPECT_EQ(p.cusparse_sell_wide_chain_scale, 0.0);
    EXPECT_GT(used.chain[static_cast<int>(csell)], 0);
    EXPECT_GT(p.format_chain_scale[static_cast<int>(csell)], 0.40);
    EXPECT_LT(p.format_chain_scale[static_cast<int>(csell)], 0.52);
  }
}

// A matrix of `rows` rows of `per_row` entries each on an H100-like device with a 50 MiB L2.
aijp::prediction_input uniform_rows_input(aijp::size_type rows, int per_row)
{
  aijp::prediction_input in;
  in.device = h100_like();
  in.device.l2_bytes = 50 << 20;
  in.stats.rows = in.stats.cols = rows;
  in.stats.nnz = rows * per_row;
  in.stats.mean = per_row;
  in.stats.mode_len = in.stats.max_len = in.stats.min_len = per_row;
  in.stats.mode_count = rows;
  in.stats.n_iter_natural = in.stats.n_iter_sorted = (rows + 31) / 32 * per_row;
  return in;
}

// The warm-up's fit of the per-format floors and fixed costs. The floor is the median measured time of the
// samples whose traffic and chain terms are below a quarter launch; the fixed cost is the value that makes
// max(floor, fixed + variable) fit the samples whose variable terms are at most two launches. Large matrices,
// and formats with too few small samples, move neither.
TEST(PlaceholderModel, FloorsAndFixedCostsFittedFromSmallSamples)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  const auto input = [](aijp::size_type rows, int per_row) { return uniform_rows_input(rows, per_row); };
  const auto predicted = [&](aijp::format_id f, const aijp::prediction_input& in, const aijp::bandwidth_model_params& q) {
    return aijp::predict_bandwidth_model(in, q, {f}).front().predicted_us;
  };
  const auto variable = [&](aijp::format_id f, const aijp::prediction_input& in) {
    const auto b = aijp::explain_bandwidth_model(f, in, p);
    return std::max({b.stream_us, b.chain_us, b.l2_us});
  };
  std::vector<aijp::fixed_cost_observation> obs;
  const aijp::format_id one = aijp::format_id::sell_c_sigma, sell = aijp::format_id::cusparse_sell;
  // Our SELL (one kernel: its floor bounds the prediction, no term adds to it): a floor of 8 us on tiny
  // matrices (one disturbed sample: the median ignores it) ...
  const double tiny_offsets[] = {0.0, -0.2, 0.2, -0.1, 0.1, 0.0, 9.0};
  int k = 0;
  for (double o : tiny_offsets) {
    const auto in = input(1000 + 500 * k++, 5);
    ASSERT_LT(variable(one, in), 0.25 * p.launch_us);
    obs.push_back({one, in, 8.0 + o});
    obs.push_back({sell, in, predicted(sell, in, p) - 1.0});  // cuSPARSE SELL: 1 us below the placeholder's guess
  }
  // ... and above it, on matrices of 3-8 us of traffic, its fixed costs plus 2 us and the traffic.
  std::vector<aijp::prediction_input> mid;
  for (aijp::size_type rows = 140000; rows <= 260000; rows += 30000) {
    const auto in = input(rows, 5);
    const double v = variable(one, in);
    ASSERT_GT(v, 3.0);
    ASSERT_LT(v, 2 * p.launch_us);
    ASSERT_GT(predicted(one, in, p) + 2.0, 8.0 + 0.5);
    obs.push_back({one, in, predicted(one, in, p) + 2.0});
    mid.push_back(in);
  }
  // A large matrix measured far above its prediction is neither a fixed cost nor a floor.
  const auto big = input(8'000'000, 7);
  obs.push_back({one, big, 2 * predicted(one, big, p)});
  obs.push_back({one, big, 2 * predicted(one, big, p)});
  // Too few small samples of COO: its fixed cost stays, and it gets no floor: the one it had (from other
  // measurements: timed back to back, where the host's issue rate floors small products) goes. JAD, not
  // measured here at all, keeps its floor.
  p.format_fixed_us[static_cast<int>(aijp::format_id::coo)] = 0.5;
  p.format_floor_us[static_cast<int>(aijp::format_id::coo)] = 9.0;
  p.format_floor_us[static_cast<int>(aijp::format_id::jad)] = 4.5;
  obs.push_back({aijp::format_id::coo, input(2000, 4), 100.0});
  const aijp::bandwidth_model_params before = p;
  const auto used = aijp::fit_format_corrections(obs, p);
  const int a = static_cast<int>(one), c = static_cast<int>(sell), coo = static_cast<int>(aijp::format_id::coo);
  EXPECT_EQ(used.floor[a], 7);
  EXPECT_NEAR(p.format_floor_us[a], 8.0, 1e-9);
  EXPECT_EQ(used.fixed[a], 7 + static_cast<int>(mid.size()));
  EXPECT_NEAR(p.format_fixed_us[a], 2.0, 1e-9);
  EXPECT_EQ(used.floor[c], 7);
  // Every cuSPARSE SELL sample sits on its floor: the largest fixed cost that keeps them there.
  EXPECT_NEAR(p.format_fixed_us[c], -1.0, 0.05);
  EXPECT_LE(p.format_fixed_us[c], -1.0);
  EXPECT_EQ(used.fixed[coo], 0);
  EXPECT_EQ(used.floor[coo], 0);
  EXPECT_EQ(p.format_fixed_us[coo], 0.5);
  EXPECT_EQ(p.format_floor_us[coo], 0.0);
  EXPECT_EQ(p.format_floor_us[static_cast<int>(aijp::format_id::jad)], 4.5);
  // Tiny matrices are predicted at the floor, the others at the fitted cost above the terms.
  EXPECT_NEAR(predicted(one, input(1000, 5), p), 8.0, 1e-9);
  for (const auto& in : mid) EXPECT_NEAR(predicted(one, in, p) - predicted(one, in, before), 2.0, 1e-9);
  // No prediction is below one launch.
  auto q = p;
  q.format_floor_us[c] = 0.0;
  q.format_fixed_us[c] = -100.0;
  EXPECT_EQ(predicted(sell, input(1000, 5), q), q.launch_us);
  // The fit does not start from the format's old corrections: fitting twice is stable.
  auto again = p;
  again.format_fixed_us[a] = -7.0;
  again.format_floor_us[a] = 30.0;
  aijp::fit_format_corrections(obs, again);
  EXPECT_NEAR(again.format_fixed_us[a], 2.0, 1e-9);
  EXPECT_NEAR(again.format_floor_us[a], 8.0, 1e-9);
  EXPECT_EQ(again.format_fixed_us[c], p.format_fixed_us[c]);
  // The floors travel through the cache's metrics; absent keys are no floor.
  std::map<std::string, double> m;
  aijp::bandwidth_model_params r;
  ASSERT_NO_FATAL_FAILURE(through_metrics(p, m, r));
  EXPECT_NEAR(m.at("floor_us.sell"), 8.0, 1e-9);
  EXPECT_EQ(m.count("floor_us.coo"), 0u);
  EXPECT_NEAR(r.format_floor_us[a], 8.0, 1e-9);
  EXPECT_EQ(r.format_floor_us[coo], 0.0);
  EXPECT_TRUE(aijp::has_format_corrections(r));
}

// The small-y floor (format_floor_small_y_us): COO's floor samples whose y fits in small_y_bytes (here 320-480
// rows of doubles) are fitted apart from the others and predict the products of such a y; a y just above it keeps
// the floor of the larger ones. A format whose small-y samples are too few gets none (its floor holds for every y).
// It travels through the cache's metrics; a cache without the key keeps one floor for every size.
TEST(PlaceholderModel, SmallYFloorFittedApartAndUsedUpToItsSize)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  const aijp::format_id coo = aijp::format_id::coo, one = aijp::format_id::sell_c_sigma;
  const int c = static_cast<int>(coo), a = static_cast<int>(one);
  const auto floor_of = [&](aijp::format_id f, const aijp::prediction_input& in, const aijp::bandwidth_model_params& q) {
    return aijp::explain_bandwidth_model(f, in, q).floor_us;
  };
  std::vector<aijp::fixed_cost_observation> obs;
  // COO: large y (1000-4000 rows) 6.4 us, small y (320-480 rows: 2560-3840 bytes) 5.8 us. Our SELL: four small-y
  // samples, below the minimum of five.
  const double offsets[] = {0.0, -0.1, 0.1, -0.05, 0.05, 0.0};
  int k = 0;
  // COO's floor is fitted net of the L2 term that adds to it (floor_adds_l2): measured = floor + that term.
  const auto l2 = [&](const aijp::prediction_input& in) { return aijp::explain_bandwidth_model(coo, in, p).l2_us; };
  for (double o : offsets) {
    const auto large = uniform_rows_input(1000 + 600 * k, 5), small = uniform_rows_input(320 + 32 * k, 5);
    obs.push_back({coo, large, 6.4 + o + l2(large)});
    obs.push_back({coo, small, 5.8 + o + l2(small)});
    obs.push_back({one, uniform_rows_input(1000 + 600 * k, 5), 4.0 + o});
    if (k < 4) obs.push_back({one, uniform_rows_input(320 + 32 * k, 5), 3.0 + o});
    ++k;
  }
  for (const auto& o : obs) {
    ASSERT_LT(aijp::explain_bandwidth_model(o.format, o.input, p).stream_us, 0.25 * p.launch_us);
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  EXPECT_EQ(used.floor[c], 6);
  EXPECT_EQ(used.floor_small_y[c], 6);
  EXPECT_NEAR(p.format_floor_us[c], 6.4, 1e-9);
  EXPECT_NEAR(p.format_floor_small_y_us[c], 5.8, 1e-9);
  EXPECT_EQ(used.floor[a], 6);
  EXPECT_EQ(used.floor_small_y[a], 0);
  EXPECT_EQ(p.format_floor_small_y_us[a], 0.0);
  // The floor by y: 512 rows of doubles (4096 bytes) are small, 513 are not.
  const double y512 = floor_of(coo, uniform_rows_input(512, 5), p), y513 = floor_of(coo, uniform_rows_input(513, 5), p);
  EXPECT_NEAR(y512, 5.8, 1e-9);
  EXPECT_NEAR(y513, 6.4, 1e-9);
  EXPECT_NEAR(floor_of(one, uniform_rows_input(400, 5), p), p.format_floor_us[a], 1e-9);
  // Through the cache's metrics; without the key one floor for every size.
  std::map<std::string, double> m;
  aijp::bandwidth_model_params r;
  ASSERT_NO_FATAL_FAILURE(through_metrics(p, m, r));
  EXPECT_NEAR(m.at("floor_small_y_us.coo"), 5.8, 1e-9);
  EXPECT_EQ(m.count("floor_small_y_us.sell"), 0u);
  EXPECT_NEAR(floor_of(coo, uniform_rows_input(400, 5), r), 5.8, 1e-9);
  m.erase("floor_small_y_us.coo");
  aijp::bandwidth_model_params old;
  ASSERT_TRUE(aijp::params_from_metrics(m, old));
  EXPECT_NEAR(floor_of(coo, uniform_rows_input(400, 5), old), 6.4, 1e-9);
}

// cuSPARSE CSR's floor grows with log2(rows) and with the rows per nonzero (cusparse_csr_floor_us_per_row_share):
// both fitted by least squares on its floor samples (measured less the L2 term that adds to its floor), and
// used by the prediction; without a spread of rows per nonzero the per-doubling line alone, as before.
TEST(PlaceholderModel, CusparseCsrFloorGrowsWithRowsPerNonzero)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  const auto csr = aijp::format_id::cusparse_csr;
  const int c = static_cast<int>(csr);
  const auto truth = [](const aijp::prediction_input& in) {
    const double share = static_cast<double>(in.stats.rows) / static_cast<double>(in.stats.nnz);
    return 6.5 + 0.05 * std::log2(static_cast<double>(in.stats.rows)) + 2.0 * share;
  };
  const auto samples = [&](const std::vector<std::pair<aijp::size_type, int>>& shapes) {
    std::vector<aijp::fixed_cost_observation> obs;
    for (const auto& [rows, per_row] : shapes) {
      const auto in = uniform_rows_input(rows, per_row);
      const auto b = aijp::explain_bandwidth_model(csr, in, p);
      EXPECT_LT(std::max(b.stream_us, b.l2_us), 0.25 * p.launch_us) << rows << " x " << per_row;
      obs.push_back({csr, in, truth(in) + b.l2_us});
    }
    return obs;
  };
  const std::vector<std::pair<aijp::size_type, int>> spread = {{1000, 4},  {1000, 12}, {1000, 40}, {2000, 4},  {2000, 12},
                                                               {4000, 4},  {4000, 12}, {1500, 2},  {3000, 6},  {1200, 24}};
  auto q = p;
  const auto used = aijp::fit_format_corrections(samples(spread), q);
  EXPECT_EQ(used.floor[c], static_cast<int>(spread.size()));
  EXPECT_NEAR(q.format_floor_us[c], 6.5, 1e-6);
  EXPECT_NEAR(q.cusparse_csr_floor_us_per_doubling, 0.05, 1e-6);
  EXPECT_NEAR(q.cusparse_csr_floor_us_per_row_share, 2.0, 1e-6);
  const auto pd = uniform_rows_input(8000, 2);  // rows of 2: 1 us above the rows of 40
  EXPECT_NEAR(aijp::explain_bandwidth_model(csr, pd, q).floor_us, truth(pd), 1e-6);
  std::map<std::string, double> m;
  aijp::bandwidth_model_params r;
  ASSERT_NO_FATAL_FAILURE(through_metrics(q, m, r));
  EXPECT_NEAR(m.at("floor_us_per_row_share.cusparse_csr"), 2.0, 1e-6);
  EXPECT_NEAR(aijp::explain_bandwidth_model(csr, pd, r).floor_us, truth(pd), 1e-6);
  // Rows of 12 only: no spread of rows per nonzero, the per-doubling line (which then takes the share's constant).
  auto flat = p;
  const auto used_flat = aijp::fit_format_corrections(samples({{1000, 12}, {2000, 12}, {4000, 12}, {1500, 12}, {3000, 12}}), flat);
  EXPECT_EQ(used_flat.floor[c], 5);
  EXPECT_EQ(flat.cusparse_csr_floor_us_per_row_share, 0.0);
  EXPECT_NEAR(flat.cusparse_csr_floor_us_per_doubling, 0.05, 1e-6);
  EXPECT_NEAR(flat.format_floor_us[c], 6.5 + 2.0 / 12, 1e-6);
}

// The gather mixture's term (prediction_input::x_mixture): unknown or one bin at the whole-matrix ratio adds
// nothing; a COO matrix bound by its streaming term whose nonzeros are half banded (0.125 sectors each) and half
// random columns (one sector each) takes each half at its own bound, the streaming half plus the L2 half, which
// is more than the maximum of the two totals; the term never lowers a prediction.
TEST(PlaceholderModel, GatherMixtureAddsEachPartAtItsOwnBound)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  p.l2_gather_gbs = 4400;
  auto in = uniform_rows_input(2'000'000, 6);
  in.x_sectors_per_nnz = 0.5625;  // the mean of the two halves
  const auto coo = aijp::format_id::coo;
  const auto none = aijp::explain_bandwidth_model(coo, in, p);
  EXPECT_EQ(none.mixture_us, 0.0);
  // One bin at the whole-matrix ratio: nothing.
  in.x_mixture.share[4] = 1.0;
  in.x_mixture.ratio[4] = 0.5625;
  const auto one = aijp::explain_bandwidth_model(coo, in, p);
  EXPECT_NEAR(one.mixture_us, 0.0, 1e-9);
  EXPECT_NEAR(one.predicted_us, none.predicted_us, 1e-9);
  // Two halves.
  in.x_mixture = {};
  in.x_mixture.share[1] = in.x_mixture.share[7] = 0.5;
  in.x_mixture.ratio[1] = 0.125;
  in.x_mixture.ratio[7] = 1.0;
  const auto two = aijp::explain_bandwidth_model(coo, in, p);
  const double nnz = static_cast<double>(in.stats.nnz), rate = p.l2_gather_gbs * 1e3;
  const double rest = two.l2_us * rate - 0.5625 * nnz * 32.0;  // the L2 traffic besides the gathers
  const double l2_local = 0.5 * (rest + 0.125 * nnz * 32.0) / rate, l2_random = 0.5 * (rest + nnz * 32.0) / rate;
  ASSERT_GT(0.5 * two.stream_us, l2_local);   // the banded half streams
  ASSERT_LT(0.5 * two.stream_us, l2_random);  // the random half waits on the L2
  const double want = 0.5 * two.stream_us + l2_random - std::max(two.stream_us, l2_local + l2_random);
  EXPECT_GT(want, 0.05 * two.stream_us);
  EXPECT_NEAR(two.mixture_us, want, 1e-9 * two.stream_us);
  EXPECT_NEAR(two.predicted_us - none.predicted_us, want, 1e-6 * two.predicted_us);
  // Never negative, for any split and format.
  for (const auto f : {aijp::format_id::csr_vector, aijp::format_id::ell, aijp::format_id::cusparse_csr, aijp::format_id::jad}) {
    for (double w : {0.05, 0.3, 0.7, 0.95}) {
      in.x_mixture = {};
      in.x_mixture.share[0] = w;
      in.x_mixture.share[6] = 1 - w;
      in.x_mixture.ratio[0] = 0.05;
      in.x_mixture.ratio[6] = 0.8;
      EXPECT_GE(aijp::explain_bandwidth_model(f, in, p).mixture_us, 0.0) << aijp::format_name(f) << " " << w;
    }
  }
}

// The whole-matrix ratio is sampled per group of rows, the mixture's bins around evenly spaced nonzeros, and the
// two may disagree. The traffic is then the larger of max(stream, L2) and the bins' sum of their own bounds: a
// whole-matrix ratio above the bins' (a power law) adds nothing and is not counted twice; one below them (a
// circuit's dense rows, which the row groups miss) gives the bins' sum, not less (docs/models.md, Session 46).
TEST(PlaceholderModel, GatherMixtureAndWholeMatrixRatioTakeTheLarger)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  p.l2_gather_gbs = 4400;
  const auto coo = aijp::format_id::coo;
  auto in = uniform_rows_input(2'000'000, 6);
  const double nnz = static_cast<double>(in.stats.nnz), rate = p.l2_gather_gbs * 1e3;
  const auto with_halves = [&](double whole) {
    in.x_sectors_per_nnz = whole;
    in.x_mixture = {};
    in.x_mixture.share[1] = in.x_mixture.share[7] = 0.5;
    in.x_mixture.ratio[1] = 0.125;
    in.x_mixture.ratio[7] = 1.0;
    return aijp::explain_bandwidth_model(coo, in, p);
  };
  // The bins' own bounds, from the L2 traffic besides the gathers (the same at every whole-matrix ratio).
  const auto bins_sum = [&](const aijp::placeholder_breakdown& t, double whole) {
    const double rest = t.l2_us * rate - whole * nnz * 32.0;
    return std::max(0.5 * t.stream_us, 0.5 * (rest + 0.125 * nnz * 32.0) / rate) +
           std::max(0.5 * t.stream_us, 0.5 * (rest + nnz * 32.0) / rate);
  };
  // Whole-matrix ratio of one sector per nonzero, above the bins' mean (0.5625): its L2 term bounds the traffic.
  const auto above = with_halves(1.0);
  ASSERT_GT(above.l2_us, bins_sum(above, 1.0));
  EXPECT_EQ(above.mixture_us, 0.0);
  // Whole-matrix ratio of 0.05, below both bins: the traffic is the bins' sum.
  const auto below = with_halves(0.05);
  const double want = bins_sum(below, 0.05);
  ASSERT_GT(want, std::max(below.stream_us, below.l2_us));
  EXPECT_NEAR(std::max(below.stream_us, below.l2_us) + below.mixture_us, want, 1e-9 * want);
}

// cuSPARSE CSR (several kernels per product): its L2 term adds to its floor, fitted on the measured time less that
// term, and its L2 rate is fitted on its samples the L2 term dominates; both travel through the cache's metrics,
// and a cache without the keys keeps the floor as a bound and the calibrated rate.
TEST(PlaceholderModel, CusparseCsrFloorAddsL2TermAndOwnL2Rate)
{
  aijp::bandwidth_model_params p;
  p.l2_gather_gbs = 4500;
  const auto input = [](aijp::size_type rows, int per_row, double x_sectors) {
    aijp::prediction_input in = uniform_rows_input(rows, per_row);
    in.x_sectors_per_nnz = x_sectors;
    return in;
  };
  const aijp::format_id csr = aijp::format_id::cusparse_csr;
  const int c = static_cast<int>(csr);
  const auto l2_us = [&](const aijp::prediction_input& in, const aijp::bandwidth_model_params& q) {
    return aijp::explain_bandwidth_model(csr, in, q).l2_us;
  };
  std::vector<aijp::fixed_cost_observation> obs;
  // Tiny matrices: 7 us plus their L2 term (at the rate the device really has, 5000 GB/s, not the calibrated one).
  for (int k = 0; k < 6; ++k) {
    const auto in = input(1000, 4 + k, 0.1);
    obs.push_back({csr, in, 7.0 + l2_us(in, p) * 4500.0 / 5000.0});
  }
  // Random columns (one sector per entry), gather-bound, in and beyond the L2: their L2 traffic at 5000 GB/s.
  for (aijp::size_type rows : {300000, 600000, 1200000, 2400000, 4800000}) {
    const auto in = input(rows, 8, 1.0);
    const auto b = aijp::explain_bandwidth_model(csr, in, p);
    ASSERT_GT(b.l2_us, 1.2 * b.stream_us);
    obs.push_back({csr, in, b.fixed_us + b.l2_us * 4500.0 / 5000.0});
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  EXPECT_EQ(used.l2_gather[c], 5);
  // Net of the fitted fixed cost (the tiny samples' largest fixed cost that keeps them on their floor).
  EXPECT_NEAR(p.format_l2_gather_gbs[c], 5000.0, 250.0);
  EXPECT_GT(p.format_l2_gather_gbs[c], 4700.0);
  EXPECT_GT(used.floor[c], 0);
  EXPECT_EQ(p.format_floor_adds_l2[c], 1.0);
  EXPECT_NEAR(p.format_floor_us[c], 7.0, 0.01);
  // A small matrix with random columns: the floor plus its L2 term at the fitted rate, above the floor alone.
  const auto small = input(8000, 4, 1.0);
  const double predicted = aijp::predict_bandwidth_model(small, p, {csr}).front().predicted_us;
  EXPECT_NEAR(predicted, p.format_floor_us[c] + l2_us(small, p), 1e-9);
  EXPECT_GT(l2_us(small, p), 0.1);
  // Other formats keep the calibrated rate and a floor that only bounds.
  EXPECT_EQ(p.format_floor_adds_l2[static_cast<int>(aijp::format_id::csr_vector)], 0.0);
  EXPECT_NEAR(aijp::explain_bandwidth_model(aijp::format_id::cusparse_csr_alg2, small, p).l2_us, l2_us(small, p) * p.format_l2_gather_gbs[c] / 4500.0, 1e-9);
  // Through the cache's metrics.
  std::map<std::string, double> m;
  aijp::params_to_metrics(p, m);
  EXPECT_EQ(m.at("floor_adds_l2.cusparse_csr"), 1.0);
  EXPECT_NEAR(m.at("l2_gather_gbs.cusparse_csr"), p.format_l2_gather_gbs[c], 1e-9);
  EXPECT_EQ(m.count("floor_adds_l2.csr_vector"), 0u);
  aijp::bandwidth_model_params r;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_NEAR(aijp::predict_bandwidth_model(small, r, {csr}).front().predicted_us, predicted, 1e-9);
  // A cache written before these keys: the floor bounds, the calibrated rate.
  m.erase("floor_adds_l2.cusparse_csr");
  m.erase("l2_gather_gbs.cusparse_csr");
  aijp::bandwidth_model_params old;
  ASSERT_TRUE(aijp::params_from_metrics(m, old));
  EXPECT_EQ(old.format_floor_adds_l2[c], 0.0);
  EXPECT_EQ(old.format_l2_gather_gbs[c], 0.0);
  const auto b = aijp::explain_bandwidth_model(csr, small, old);
  EXPECT_NEAR(b.predicted_us, std::max({old.launch_us, b.floor_us, b.fixed_us + std::max({b.stream_us, b.chain_us, b.l2_us})}), 1e-9);
}

// csr_scalar's x re-reads beyond the L2 (bandwidth_model_params::csr_scalar_x_reread_l2_share): fitted on the
// samples the term moves, written to the cache under its key; a cache without the key predicts no re-reads.
// A fitted correction's cache key: written with its value and read back to the same prediction of `in` in
// format `f`. Returns the parameters read back without the key (a cache written before it existed).
aijp::bandwidth_model_params expect_keyed(const aijp::bandwidth_model_params& p, const std::string& key, double value,
                                         const aijp::prediction_input& in, aijp::format_id f)
{
  std::map<std::string, double> m;
  aijp::params_to_metrics(p, m);
  EXPECT_EQ(m.count(key), 1u) << key;
  if (m.count(key) == 1) {
    EXPECT_EQ(m[key], value) << key;
  }
  aijp::bandwidth_model_params r, old;
  EXPECT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_EQ(aijp::predict_bandwidth_model(in, r, {f}).front().predicted_us, aijp::predict_bandwidth_model(in, p, {f}).front().predicted_us);
  m.erase(key);
  EXPECT_TRUE(aijp::params_from_metrics(m, old));
  return old;
}

TEST(PlaceholderModel, CsrScalarXRereadsFittedAndKeyed)
{
  aijp::bandwidth_model_params p;
  p.stream_read_gbs = 3000;
  const aijp::format_id sc = aijp::format_id::csr_scalar;
  const auto input = [](aijp::size_type rows, int per_row, double x_sectors) {
    aijp::prediction_input in = uniform_rows_input(rows, per_row);
    in.x_sectors_per_nnz = x_sectors;
    return in;
  };
  // Samples measured as if the re-reads took half the L2 (random columns, x of 16-64 MB beyond the L2).
  aijp::bandwidth_model_params truth = p;
  truth.csr_scalar_x_reread_l2_share = 0.5;
  std::vector<aijp::fixed_cost_observation> obs;
  for (aijp::size_type rows : {2000000, 3000000, 4000000, 6000000, 8000000}) {
    const auto in = input(rows, 12, 1.0);
    obs.push_back({sc, in, aijp::predict_bandwidth_model(in, truth, {sc}).front().predicted_us});
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  EXPECT_EQ(used.csr_scalar_x_reread, 5);
  EXPECT_EQ(p.csr_scalar_x_reread_l2_share, 0.5);
  const auto big = input(4000000, 12, 1.0);
  const double with = aijp::predict_bandwidth_model(big, p, {sc}).front().predicted_us;
  // A band (few sectors per entry) is hardly moved: its shared sectors come back with the neighbouring rows.
  const auto band = input(8000000, 7, 0.05);
  aijp::bandwidth_model_params off = p;
  off.csr_scalar_x_reread_l2_share = 0.0;
  EXPECT_GT(with, 1.2 * aijp::predict_bandwidth_model(big, off, {sc}).front().predicted_us);
  EXPECT_LT(aijp::predict_bandwidth_model(band, p, {sc}).front().predicted_us,
            1.01 * aijp::predict_bandwidth_model(band, off, {sc}).front().predicted_us);
  // COO keeps its own re-reads.
  EXPECT_EQ(aijp::predict_bandwidth_model(big, p, {aijp::format_id::coo}).front().predicted_us,
            aijp::predict_bandwidth_model(big, off, {aijp::format_id::coo}).front().predicted_us);
  const aijp::bandwidth_model_params old = expect_keyed(p, "x_reread_l2_share.csr_scalar", 0.5, big, sc);
  EXPECT_EQ(old.csr_scalar_x_reread_l2_share, 0.0);
  EXPECT_EQ(aijp::predict_bandwidth_model(big, old, {sc}).front().predicted_us,
            aijp::predict_bandwidth_model(big, off, {sc}).front().predicted_us);
}

// csr_scalar's fixed cost is fitted without its stream-bound samples in the L2: its streaming term prices the L1
// misses at the DRAM rate, and such samples measured 4-44 % below it on the H100 gated warm-ups, which pulled the
// fixed cost down under the chain-bound ones (docs/models.md, Session 34). Other formats keep those samples.
TEST(PlaceholderModel, CsrScalarFixedCostWithoutItsStreamBoundSamplesInL2)
{
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  const aijp::format_id sc = aijp::format_id::csr_scalar, sell = aijp::format_id::sell_c_sigma;
  const auto predicted = [&](aijp::format_id f, const aijp::prediction_input& in) {
    return aijp::predict_bandwidth_model(in, p, {f}).front().predicted_us;
  };
  std::vector<aijp::fixed_cost_observation> obs;
  // Chain-bound small matrices (1000 rows of 16-40 entries): 0.5 us above the terms.
  int chains = 0;
  for (int per_row = 16; per_row <= 40; per_row += 4) {
    const auto in = uniform_rows_input(1000, per_row);
    const auto b = aijp::explain_bandwidth_model(sc, in, p);
    ASSERT_GT(b.chain_us, std::max(b.stream_us, b.l2_us));
    ASSERT_GT(b.chain_us, 0.25 * p.launch_us);
    obs.push_back({sc, in, predicted(sc, in) + 0.5});
    ++chains;
  }
  // Stream-bound ones in the L2 (64000-288000 rows of 4: 4-20 MB), measured at 0.6 of the prediction.
  int streams = 0;
  for (aijp::size_type rows = 64000; rows <= 288000; rows += 32000) {
    const auto in = uniform_rows_input(rows, 4);
    for (aijp::format_id f : {sc, sell}) {
      const auto b = aijp::explain_bandwidth_model(f, in, p);
      ASSERT_TRUE(b.in_l2);
      ASSERT_GT(b.stream_us, std::max(b.chain_us, b.l2_us));
      ASSERT_LE(b.stream_us, 2 * p.launch_us);
      obs.push_back({f, in, 0.6 * predicted(f, in)});
    }
    ++streams;
  }
  for (int per_row = 16; per_row <= 40; per_row += 4) {
    const auto in = uniform_rows_input(1000, per_row);
    obs.push_back({sell, in, predicted(sell, in) + 0.5});
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  const int i = static_cast<int>(sc), j = static_cast<int>(sell);
  EXPECT_EQ(used.fixed[i], chains);
  EXPECT_NEAR(p.format_fixed_us[i], 0.5, 1e-9);
  // Our SELL fits over both kinds: the stream-bound ones, as many as the others, pull its fixed cost down.
  EXPECT_EQ(used.fixed[j], chains + streams);
  EXPECT_LT(p.format_fixed_us[j], 0.5);
}

// Which layouts run from the L2 (l2_resident_share): the fit runs at each share of its grid and keeps the one
// whose fit leaves the least error on the training samples. Chain-bound ELL samples measured as if only 0.7
// of the L2 kept a layout: those of 0.7-1.0 of it walk their chains at the DRAM latency.
TEST(PlaceholderModel, L2ResidentShareFittedAndKeyed)
{
  aijp::bandwidth_model_params p;
  p.stream_read_gbs = 3000;
  const aijp::format_id ell = aijp::format_id::ell;
  aijp::bandwidth_model_params truth = p;
  truth.l2_resident_share = 0.7;
  std::vector<aijp::fixed_cost_observation> obs;
  // Rows of 2048 entries (24 KB each): 20 MB to 100 MB of layout against a 50 MB L2.
  std::vector<aijp::size_type> rows_list;
  for (aijp::size_type rows = 800; rows <= 4200; rows += 200) rows_list.push_back(rows);
  for (aijp::size_type rows : rows_list) {
    const auto in = uniform_rows_input(rows, 2048);
    obs.push_back({ell, in, aijp::predict_bandwidth_model(in, truth, {ell}).front().predicted_us});
  }
  aijp::bandwidth_model_params whole = p;
  const auto whole_fit = aijp::fit_format_corrections(obs, whole);
  (void)whole_fit;
  const auto used = aijp::fit_format_corrections(obs, p);
  EXPECT_EQ(p.l2_resident_share, 0.7);
  EXPECT_EQ(used.l2_resident, static_cast<int>(obs.size()));
  EXPECT_LT(used.l2_resident_error, 0.99 * used.l2_resident_error_whole);
  EXPECT_LT(used.l2_resident_error, 1e-3);
  // A layout of 0.8 of the L2 runs from DRAM with the fitted share, from the L2 with the whole L2.
  const auto mid = uniform_rows_input(1700, 2048);  // 41.8 MB
  EXPECT_FALSE(aijp::explain_bandwidth_model(ell, mid, p).in_l2);
  aijp::bandwidth_model_params one = p;
  one.l2_resident_share = 1.0;
  EXPECT_TRUE(aijp::explain_bandwidth_model(ell, mid, one).in_l2);
  const double with = aijp::predict_bandwidth_model(mid, p, {ell}).front().predicted_us;
  EXPECT_NEAR(with, aijp::predict_bandwidth_model(mid, truth, {ell}).front().predicted_us, 1e-6 * with);
  // The key, and a cache without it: the whole L2, as before the share existed.
  const aijp::bandwidth_model_params old = expect_keyed(p, "l2_resident_share", 0.7, mid, ell);
  EXPECT_EQ(old.l2_resident_share, 1.0);
  EXPECT_TRUE(aijp::explain_bandwidth_model(ell, mid, old).in_l2);
  // Samples that no share tells apart leave the whole L2.
  std::vector<aijp::fixed_cost_observation> small;
  for (aijp::size_type rows : {100, 200, 300, 400, 500, 600}) {
    const auto in = uniform_rows_input(rows, 2048);
    small.push_back({ell, in, aijp::predict_bandwidth_model(in, truth, {ell}).front().predicted_us});
  }
  aijp::bandwidth_model_params q;
  q.stream_read_gbs = 3000;
  const auto none = aijp::fit_format_corrections(small, q);
  EXPECT_EQ(q.l2_resident_share, 1.0);
  EXPECT_EQ(none.l2_resident, 0);
}

// PELLR walks its rows sorted by length, so its chain counts the lanes of the sorted order (as JAD's) where the
// fit that set its chain factors counted them so (pellr_sorted_lanes), and the natural order's in a cache written
// before (no key).
TEST(PlaceholderModel, PellrChainInSortedLanesWhereFitted)
{
  const aijp::format_id pellr = aijp::format_id::pellr;
  // Rows of 16 with a tail of long rows of max_len, one in each of `long_rows` natural warps: one lane naturally,
  // `long_rows` sorted.
  const auto tail = [](int max_len, int long_rows) {
    aijp::prediction_input in = uniform_rows_input(4096, 16);
    in.stats.max_len = max_len;
    in.stats.chain_warp_nnz = max_len;
    in.stats.sorted_chain_lanes = long_rows;
    return in;
  };
  aijp::bandwidth_model_params p;
  p.stream_read_gbs = 3000;
  aijp::bandwidth_model_params truth = p;
  truth.pellr_sorted_lanes = 1.0;
  truth.format_chain_lanes[static_cast<int>(pellr)] = 0.5;
  std::vector<aijp::fixed_cost_observation> obs;
  for (int max_len : {300, 800}) {
    for (int long_rows : {1, 2, 4, 8, 16, 24, 32}) {
      const auto in = tail(max_len, long_rows);
      obs.push_back({pellr, in, aijp::predict_bandwidth_model(in, truth, {pellr}).front().predicted_us});
    }
  }
  const auto used = aijp::fit_format_corrections(obs, p);
  EXPECT_GT(used.chain[static_cast<int>(pellr)], 0);
  EXPECT_EQ(p.pellr_sorted_lanes, 1.0);
  const auto in = tail(500, 32);
  EXPECT_EQ(aijp::explain_bandwidth_model(pellr, in, p).lanes, 32.0);
  const double with = aijp::predict_bandwidth_model(in, p, {pellr}).front().predicted_us;
  const aijp::bandwidth_model_params old = expect_keyed(p, "chain_lanes_sorted.pellr", 1.0, in, pellr);
  EXPECT_EQ(old.pellr_sorted_lanes, 0.0);
  EXPECT_EQ(aijp::explain_bandwidth_model(pellr, in, old).lanes, 1.0);
  // The fit found the slope the samples were made with, which the natural order's one lane does not see.
  EXPECT_NEAR(p.format_chain_lanes[static_cast<int>(pellr)], 0.5, 0.05);
  EXPECT_LT(aijp::predict_bandwidth_model(in, old, {pellr}).front().predicted_us, 0.9 * with);
  // JAD's lanes are the sorted ones either way.
  EXPECT_EQ(aijp::explain_bandwidth_model(aijp::format_id::jad, in, old).lanes, 32.0);
}

// csr_vector's one-row loop (csr.cu) walks a lane's steps in chunks of 4: its chain counts whole rounds of 4 steps
// beyond the first (a row of 1-4 steps is one round, in the fixed cost), and the remainder share of sessions 36-38
// (a key in older caches) is not read.
TEST(PlaceholderModel, CsrVectorOneRowChainCountsWholeChunks)
{
  const aijp::format_id vec = aijp::format_id::csr_vector;
  aijp::bandwidth_model_params p;
  p.stream_read_gbs = 3000;
  const double ns = p.serial_entry_l2_ns * 1e-3;
  // 64 rows (one wave: one row per lane group) under 32 lanes; rows of n start at multiples of n, at most
  // 32 - gcd(n, 32) entries past an aligned index.
  const std::vector<std::pair<int, double>> rounds = {
      {40, 1},    // 24 + 40 = 64: 2 steps
      {100, 1},   // 28 + 100 = 128: 4 steps
      {129, 2},   // 31 + 129 = 160: 5 steps
      {301, 3},   // 31 + 301 = 332: 11 steps
      {2001, 16}, // 31 + 2001 = 2032: 64 steps
  };
  for (const auto& [len, r] : rounds) {
    const auto in = uniform_rows_input(64, len);
    ASSERT_EQ(aijp::csr_vector_slots(in.stats, &in.device), 1) << len;
    EXPECT_NEAR(aijp::explain_bandwidth_model(vec, in, p).raw_chain_us, 4 * (r - 1) * ns, 1e-9) << len;
  }
  // Short rows: 2 lanes for rows of 1-2, a row of 5 takes 3 steps, one round like a row of 2.
  auto in = uniform_rows_input(4096, 2);
  in.stats.max_len = 5;
  ASSERT_EQ(aijp::csr_vector_lanes(in.stats), 2);
  EXPECT_EQ(aijp::explain_bandwidth_model(vec, in, p).raw_chain_us, 0.0);
  in.stats.max_len = 9;  // 5 steps: two rounds
  EXPECT_NEAR(aijp::explain_bandwidth_model(vec, in, p).raw_chain_us, 4 * ns, 1e-9);
  // Rows without entries: no round, and no negative chain.
  EXPECT_EQ(aijp::layout_traffic_of(vec, uniform_rows_input(64, 0).stats, 8).serial_entries, 0.0);
  // The remainder shares of older caches (csr_vector sessions 36-38, ELLPACK-R and PELLR sessions 34-38) are not
  // read: a cache with them predicts what one without them does, and writes none back.
  std::map<std::string, double> m;
  aijp::params_to_metrics(p, m);
  EXPECT_EQ(m.count("chain_remainder_share.csr_vector") + m.count("chain_remainder_share.ellr"), 0u);
  m["chain_remainder_share.csr_vector"] = 0.5;
  m["chain_remainder_share.ellr"] = 0.75;
  m["chain_remainder_share.pellr"] = 0.875;
  aijp::bandwidth_model_params r;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  for (aijp::format_id f : {vec, aijp::format_id::ellr, aijp::format_id::pellr}) {
    const auto long_rows = uniform_rows_input(1024, 83);
    EXPECT_EQ(aijp::predict_bandwidth_model(long_rows, r, {f}).front().predicted_us,
              aijp::predict_bandwidth_model(long_rows, p, {f}).front().predicted_us) << aijp::format_name(f);
  }
  std::map<std::string, double> back;
  aijp::params_to_metrics(r, back);
  EXPECT_EQ(back.count("chain_remainder_share.ellr"), 0u);
}

// cuSPARSE SELL: its own L2 rate (format_l2_gather_gbs), fitted on and applied to matrices whose x fits in the L2
// (own_l2_rate_applies), under the key every own rate has; and its fixed cost fitted on the samples whose terms are
// at most half a launch (fixed_cost_span_launches), which keeps a misfit of the larger terms out of it.
TEST(PlaceholderModel, CusparseSellOwnL2RateWhereXFitsAndKeyed)
{
  aijp::bandwidth_model_params p;
  p.l2_gather_gbs = 4500;
  const aijp::format_id sell = aijp::format_id::cusparse_sell;
  const int c = static_cast<int>(sell);
  const auto input = [](aijp::size_type rows, int per_row, double x_sectors) {
    aijp::prediction_input in = uniform_rows_input(rows, per_row);
    in.x_sectors_per_nnz = x_sectors;
    return in;
  };
  const auto terms = [&](const aijp::prediction_input& in, const aijp::bandwidth_model_params& q) {
    return aijp::explain_bandwidth_model(sell, in, q);
  };
  std::vector<aijp::fixed_cost_observation> obs;
  // Random columns (one sector per entry), gather-bound, x of 2.4-19 MB: their L2 traffic at 5000 GB/s.
  for (aijp::size_type rows : {300000, 600000, 1200000, 1800000, 2400000}) {
    const auto in = input(rows, 8, 1.0);
    const auto b = terms(in, p);
    ASSERT_GT(b.l2_us, 1.2 * std::max(b.stream_us, b.chain_us));
    obs.push_back({sell, in, b.fixed_us + b.l2_us * 4500.0 / 5000.0});
  }
  // x beyond the L2 (8M rows, 64 MB): measured at the calibrated rate, not part of the own rate.
  const auto beyond = input(8000000, 8, 1.0);
  for (int k = 0; k < 3; ++k) obs.push_back({sell, beyond, terms(beyond, p).fixed_us + terms(beyond, p).l2_us});
  // Small matrices: 1 us below the placeholder's guess where the terms are at most half a launch (and above a
  // quarter: no floor), 1 us above it where they are larger, up to two launches (a term the model misfits).
  int tiny = 0, mid = 0;
  for (aijp::size_type rows = 50000; rows <= 520000; rows += 10000) {
    const auto in = input(rows, 3, 0.05);
    const auto b = terms(in, p);
    const double v = std::max({b.stream_us, b.chain_us, b.l2_us});
    if (v < 0.25 * p.launch_us || v > 2 * p.launch_us) continue;
    const bool small = v <= 0.5 * p.launch_us;
    (small ? tiny : mid) += 1;
    obs.push_back({sell, in, b.fixed_us + v + (small ? -1.0 : 1.0)});
  }
  ASSERT_GE(tiny, 5);
  ASSERT_GE(mid, 5);
  const auto used = aijp::fit_format_corrections(obs, p);
  EXPECT_EQ(used.fixed[c], tiny);
  EXPECT_NEAR(p.format_fixed_us[c], -1.0, 1e-9);
  EXPECT_EQ(p.format_floor_us[c], 0.0);
  EXPECT_EQ(used.l2_gather[c], 5);
  EXPECT_NEAR(p.format_l2_gather_gbs[c], 5000.0, 250.0);
  // x in the L2: the own rate; beyond it: the calibrated one.
  const auto in = input(2000000, 8, 1.0);
  EXPECT_NEAR(terms(in, p).l2_us * p.format_l2_gather_gbs[c], aijp::l2_traffic_bytes(sell, in.stats, 8, 1.0, {}) / 1e3, 1e-6);
  EXPECT_NEAR(terms(beyond, p).l2_us * p.l2_gather_gbs, aijp::l2_traffic_bytes(sell, beyond.stats, 8, 1.0, {}) / 1e3, 1e-6);
  // A cache without the key: the calibrated rate everywhere.
  const aijp::bandwidth_model_params old = expect_keyed(p, "l2_gather_gbs.cusparse_sell", p.format_l2_gather_gbs[c], in, sell);
  EXPECT_EQ(old.format_l2_gather_gbs[c], 0.0);
  EXPECT_NEAR(terms(in, old).l2_us * old.l2_gather_gbs, aijp::l2_traffic_bytes(sell, in.stats, 8, 1.0, {}) / 1e3, 1e-6);
  // Other formats fit their fixed costs on up to two launches of terms, as before: our SELL, measured the same way,
  // lands between the two offsets.
  std::vector<aijp::fixed_cost_observation> ours;
  for (const auto& o : obs) {
    if (o.input.x_sectors_per_nnz < 0.5) {
      const auto b = aijp::explain_bandwidth_model(aijp::format_id::sell_c_sigma, o.input, aijp::bandwidth_model_params{});
      ours.push_back({aijp::format_id::sell_c_sigma, o.input, o.measured_us - terms(o.input, aijp::bandwidth_model_params{}).fixed_us + b.fixed_us});
    }
  }
  aijp::bandwidth_model_params q;
  const auto used_ours = aijp::fit_format_corrections(ours, q);
  EXPECT_EQ(used_ours.fixed[static_cast<int>(aijp::format_id::sell_c_sigma)], tiny + mid);
}

TEST(PlaceholderModel, BandwidthFloorBeyondL2)
{
  aijp::bandwidth_model_params p;
  p.stream_read_gbs = 3000;
  auto s = aijp::compute_row_stats(with_lengths({3, 3, 3}, 4).view());
  s.rows = s.cols = 8'000'000;  // a 7-point stencil's statistics at 200^3, scaled
  s.nnz = 56'000'000;
  s.max_len = s.mode_len = 7;
  // Without the L2 size there is no bandwidth floor; with it, the CSR bytes beyond the L2 must stream.
  EXPECT_EQ(aijp::at_least_launches(aijp::format_id::cusparse_csr, s, 8, p, 10.0), std::max(10.0, p.launch_us + 0.0));
  p.l2_bytes = 50e6;
  const double working_set = 56e6 * 12 + 8e6 * 4 + 8e6 * 8 + 8e6 * 8;  // values and columns, row_ptr, x, y
  EXPECT_NEAR(aijp::at_least_launches(aijp::format_id::cusparse_csr, s, 8, p, 10.0), (working_set - 50e6) / 3e6, 1.0);
  EXPECT_EQ(aijp::at_least_launches(aijp::format_id::cusparse_csr, s, 8, p, 1000.0), 1000.0);
}

TEST(Reference, ProductAndNaNSafeBetaZero)
{
  auto a = with_lengths({2, 0, 1}, 2);  // [[1 2],[0 0],[1 0]]
  const std::vector<double> x{3, 5};
  std::vector<double> y{std::numeric_limits<double>::quiet_NaN(), 7, 1};
  aijp::reference_spmv(a.view(), 2.0, x.data(), 0.0, y.data());
  EXPECT_EQ(y, (std::vector<double>{26, 0, 6}));
  aijp::reference_spmv(a.view(), 1.0, x.data(), 1.0, y.data());
  EXPECT_EQ(y, (std::vector<double>{39, 0, 9}));
  std::vector<double> z{1, 1};
  const std::vector<double> w{1, 1, 1};
  aijp::reference_spmv_transpose(a.view(), 1.0, w.data(), 0.0, z.data());
  EXPECT_EQ(z, (std::vector<double>{2, 2}));
}

}  // namespace

// The gap between back-to-back kernels now against the cache's (launch_shift_us) moves every prediction by its
// product's kernels (launch_gaps_of): one for our one-kernel formats and cuSPARSE SELL, two for COO, HYB with a COO
// part and cuSPARSE CSR, 3.5 for ALG2; launch-bound and stream-bound products alike, never below zero. The
// warm-up's gap and how it was timed round-trip through the cache keys; the shift is never stored.
TEST(PlaceholderModel, LaunchShiftMovesEachKernel)
{
  using aijp::format_id;
  aijp::bandwidth_model_params p;
  aijp::bandwidth_model_params now = p;
  now.launch_shift_us = 0.2;
  for (const auto& in : {uniform_rows(2000, 8, 0.2), uniform_rows(4000000, 12, 0.1)}) {
    const auto before = aijp::predict_bandwidth_model(in, p, aijp::all_formats());
    const auto after = aijp::predict_bandwidth_model(in, now, aijp::all_formats());
    ASSERT_EQ(before.size(), after.size());
    for (std::size_t k = 0; k < before.size(); ++k) {
      const format_id f = before[k].format;
      if (!before[k].feasible) continue;
      const double kernels = aijp::launch_gaps_of(f, in.stats);
      EXPECT_NEAR(after[k].predicted_us - before[k].predicted_us, 0.2 * kernels, 1e-9) << aijp::format_name(f);
    }
  }
  const auto s = uniform_rows(2000, 8, 0.2).stats;
  EXPECT_EQ(aijp::launch_gaps_of(format_id::csr_vector, s), 1.0);
  EXPECT_EQ(aijp::launch_gaps_of(format_id::cusparse_sell, s), 1.0);
  EXPECT_EQ(aijp::launch_gaps_of(format_id::coo, s), 2.0);
  EXPECT_EQ(aijp::launch_gaps_of(format_id::cusparse_csr, s), 2.0);
  EXPECT_EQ(aijp::launch_gaps_of(format_id::cusparse_csr_alg2, s), 3.5);
  aijp::row_stats hyb = s;
  hyb.hyb_coo_nnz = 0;
  EXPECT_EQ(aijp::launch_gaps_of(format_id::hyb, hyb), 1.0);
  hyb.hyb_coo_nnz = 5;
  EXPECT_EQ(aijp::launch_gaps_of(format_id::hyb, hyb), 2.0);
  now.launch_shift_us = -1e3;  // never below zero
  for (const auto& e : aijp::predict_bandwidth_model(uniform_rows(2000, 8, 0.2), now, aijp::all_formats())) EXPECT_GE(e.predicted_us, 0.0);

  std::map<std::string, double> m;
  aijp::bandwidth_model_params q = p;
  aijp::params_to_metrics(q, m);
  EXPECT_EQ(m.count("launch_gap_us"), 0u);
  EXPECT_EQ(m.count("launch_gap_gated"), 0u);
  q.launch_gap_us = 2.31;
  q.launch_gap_gated = 1;
  q.launch_shift_us = 0.5;
  aijp::params_to_metrics(q, m);
  EXPECT_EQ(m.at("launch_gap_us"), 2.31);
  EXPECT_EQ(m.at("launch_gap_gated"), 1.0);
  EXPECT_EQ(m.count("launch_shift_us"), 0u);
  aijp::bandwidth_model_params r;
  ASSERT_TRUE(aijp::params_from_metrics(m, r));
  EXPECT_EQ(r.launch_gap_us, 2.31);
  EXPECT_EQ(r.launch_gap_gated, 1.0);
  EXPECT_EQ(r.launch_shift_us, 0.0);
}

// Every fitted correction round-trips through the cache keys, is copied by copy_format_corrections and detected by
// has_format_corrections on its own; a value outside what the key accepts (here: far too large, and NaN) is not read.
// The fields are listed here on purpose: a correction missing from predict.cpp's tables fails one of these.
TEST(PlaceholderModel, EveryCorrectionRoundTripsAndCounts)
{
  using P = aijp::bandwidth_model_params;
  const std::vector<std::pair<std::array<double, aijp::format_count> P::*, double>> per_format = {
      {&P::format_fixed_us, -1.5},        {&P::format_chain_scale, 1.3},         {&P::format_chain_lanes, 0.4},
      {&P::format_chain_scale_dram, 0.9}, {&P::format_chain_lanes_dram, 0.2},    {&P::format_chain_scatter_dram, 0.3},
      {&P::format_l2_matrix_share, 0.25}, {&P::format_l2_stream, 1.0},           {&P::format_overlap, 0.6},
      {&P::format_chain_x_doubling, 0.06}, {&P::format_idle_lane_offset, 0.1},   {&P::format_stream_row_doubling, 0.07},
      {&P::format_floor_us, 6.5},         {&P::format_floor_small_y_us, 5.3},    {&P::format_floor_adds_l2, 1.0},
      {&P::format_l2_gather_gbs, 5100.0}};
  const std::vector<std::pair<double P::*, double>> scalar = {
      {&P::cusparse_csr_floor_us_per_doubling, 0.09}, {&P::cusparse_csr_floor_us_per_row_share, 2.3}, {&P::coo_efficiency, 0.92},
      {&P::hyb_empty_ell_us, -0.3},                    {&P::csr_scalar_x_reread_l2_share, 0.35},       {&P::l2_resident_share, 0.8},
      {&P::pellr_sorted_lanes, 1.0},                   {&P::cusparse_sell_wide_padded, 287582.0},      {&P::cusparse_sell_wide_chain_scale, 0.86}};
  const std::map<std::string, double> device = {{"stream_read_gbs", 3000.0}, {"launch_overhead_us", 2.5}, {"cusparse_csr_overhead_us", 7.0}};
  const auto f = static_cast<int>(aijp::format_id::ellr);
  for (const auto& [field, v] : per_format) {
    P p;
    EXPECT_FALSE(aijp::has_format_corrections(p));
    (p.*field)[f] = v;
    EXPECT_TRUE(aijp::has_format_corrections(p)) << v;
    std::map<std::string, double> m = device;
    aijp::params_to_metrics(p, m);
    P r;
    ASSERT_TRUE(aijp::params_from_metrics(m, r));
    EXPECT_EQ((r.*field)[f], v);
    EXPECT_EQ(r.*field, p.*field);
    P c;
    aijp::copy_format_corrections(p, c);
    EXPECT_EQ((c.*field)[f], v);
    // Every key holding this value, far out of range or NaN: not read (a flag reads any positive value as 1).
    for (const double bad : {1e9, std::nan("")}) {
      if (field == &P::format_floor_adds_l2 && bad > 0) continue;
      std::map<std::string, double> b = m;
      for (auto& [k, x] : b) {
        if (x == v && !device.count(k)) x = bad;
      }
      P q;
      ASSERT_TRUE(aijp::params_from_metrics(b, q));
      EXPECT_EQ(q.*field, P{}.*field) << bad;
    }
  }
  for (const auto& [field, v] : scalar) {
    P p;
    p.*field = v;
    EXPECT_TRUE(aijp::has_format_corrections(p)) << v;
    std::map<std::string, double> m = device;
    aijp::params_to_metrics(p, m);
    P r;
    ASSERT_TRUE(aijp::params_from_metrics(m, r));
    EXPECT_EQ(r.*field, v);
    P c;
    aijp::copy_format_corrections(p, c);
    EXPECT_EQ(c.*field, v);
    std::map<std::string, double> b = m;
    for (auto& [k, x] : b) {
      if (x == v && !device.count(k)) x = 1e20;
    }
    P q;
    ASSERT_TRUE(aijp::params_from_metrics(b, q));
    EXPECT_EQ(q.*field, P{}.*field);
  }
  // The launch gap is a device constant measured with the warm-up, not a correction: neither copied nor counted.
  P g;
  g.launch_gap_us = 2.3;
  EXPECT_FALSE(aijp::has_format_corrections(g));
  P h;
  aijp::copy_format_corrections(g, h);
  EXPECT_EQ(h.launch_gap_us, 0.0);
}

// fit_stream_scale: products measured as a cache with half the bandwidth predicts them are explained by a scale of
// 1/2 (exactly on the grid), with the error at the cached bandwidth far larger; products the cache predicts right keep
// a scale of 1; no usable measurement gives scale 1 and no formats. Beyond the L2, with the bandwidth doubled, the
// L2 term ranks the formats (ELLR ahead of sell_delta16), and the fitted scale restores the streaming ranking.
TEST(PlaceholderModel, StreamScaleFitRecoversTheBandwidth)
{
  using aijp::format_id;
  aijp::bandwidth_model_params p;
  p.l2_bytes = 50.0 * (1 << 20);
  // As the H100 gated warm-ups fit it (session 46): ELLR's L2 term counts a quarter of its matrix bytes beyond the L2.
  p.format_l2_matrix_share[static_cast<int>(format_id::ellr)] = 0.25;
  auto in = uniform_rows(8'000'000, 7, 0.1875);  // lap7-like, beyond the L2
  in.device.l2_bytes = static_cast<aijp::size_type>(p.l2_bytes);
  aijp::bandwidth_model_params truth = p;
  truth.stream_read_gbs = p.stream_read_gbs / 2;
  std::vector<std::pair<format_id, double>> measured;
  for (const format_id f : {format_id::ellr, format_id::csr_vector}) {
    measured.push_back({f, aijp::predict_bandwidth_model(in, truth, {f}).front().predicted_us});
  }
  const auto fit = aijp::fit_stream_scale(in, p, measured);
  EXPECT_EQ(fit.formats, 2);
  EXPECT_NEAR(fit.scale, 0.5, 1e-9);
  EXPECT_LT(fit.rms_log_error, 1e-9);
  EXPECT_GT(fit.rms_log_error_at_1, 0.3);
  // Right as cached: scale 1.
  measured.clear();
  for (const format_id f : {format_id::ellr, format_id::csr_vector}) {
    measured.push_back({f, aijp::predict_bandwidth_model(in, p, {f}).front().predicted_us});
  }
  const auto same = aijp::fit_stream_scale(in, p, measured);
  EXPECT_EQ(same.scale, 1.0);
  EXPECT_LT(same.rms_log_error_at_1, 1e-9);
  // Nothing usable.
  const auto none = aijp::fit_stream_scale(in, p, {{format_id::ellr, 0.0}, {format_id::coo, -1.0}});
  EXPECT_EQ(none.formats, 0);
  EXPECT_EQ(none.scale, 1.0);
  // The doubled bandwidth's ranking against the refitted one: sell_delta16 (the fewest bytes) wins once scaled back.
  aijp::bandwidth_model_params doubled = p;
  doubled.stream_read_gbs = 2 * p.stream_read_gbs;
  measured.clear();
  for (const format_id f : {format_id::ellr, format_id::csr_vector}) {
    measured.push_back({f, aijp::predict_bandwidth_model(in, p, {f}).front().predicted_us});
  }
  const auto back = aijp::fit_stream_scale(in, doubled, measured);
  EXPECT_NEAR(back.scale, 0.5, 1e-9);
  aijp::bandwidth_model_params refit = doubled;
  refit.stream_read_gbs *= back.scale;
  const auto us = [&](const aijp::bandwidth_model_params& q, format_id f) { return aijp::predict_bandwidth_model(in, q, {f}).front().predicted_us; };
  EXPECT_LT(us(refit, format_id::sell_delta16), us(refit, format_id::ellr));
  EXPECT_GT(us(doubled, format_id::sell_delta16), us(doubled, format_id::ellr)) << "the test's premise: the doubled cache ranks ELLR first";
}
