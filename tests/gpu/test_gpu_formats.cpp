// Device tests: every format against the host reference on every shared real matrix and the edge cases,
// device statistics against the host reference, value refresh, transpose, NaN-safe beta = 0.
// Skipped (not failed) on a machine without a CUDA device; run on the GPU machine via scripts/device_run.sh.
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/reference.hpp>

#include "gpu_test_support.hpp"
#include "test_checks.hpp"
#include "test_matrices.hpp"

#include <aijpredict/device_generate.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/layout_ref_csr.hpp>
#include <aijpredict/stats.hpp>
#include <aijpredict/warmup.hpp>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace {

using aijp::test::cast;
using aijp::test::expect_close;

using aijp::test::device_vec;
using aijp::test::shared_context;

class GpuTest : public aijp::test::gpu_fixture {};

// Checks one format on one matrix: y = A x (NaN planted), y = 2 A x + 0.5 y, A^T x, refresh with new values.
template <typename T>
void check_format(const aijp::csr_matrix<double>& a64, aijp::format_id f, const std::string& name)
{
  const auto a = cast<T>(a64);
  const std::string what = name + " / " + aijp::format_name(f) + (sizeof(T) == 8 ? " / double" : " / float");
  aijp::plan_options opts;
  opts.forced = f;
  aijp::gpu_matrix<T> m(shared_context(), a.view(), opts, nullptr);
  bool feasible = true;
  for (const auto& e : m.report().estimates) {
    if (e.format == f) feasible = e.feasible;
  }
  // An infeasible forced format (padding blow-up, memory) must fall back to cuSPARSE CSR and still be right.
  ASSERT_EQ(m.format(), feasible ? f : aijp::format_id::cusparse_csr) << what << ": " << m.report().decision;

  aijp::test::check_products_and_refresh(m, a, what, 11);
}

void expect_same_stats(const aijp::row_stats& d, const aijp::row_stats& h, const std::string& what)
{
  EXPECT_EQ(d.rows, h.rows) << what;
  EXPECT_EQ(d.nnz, h.nnz) << what;
  EXPECT_EQ(d.min_len, h.min_len) << what;
  EXPECT_EQ(d.max_len, h.max_len) << what;
  EXPECT_EQ(d.mode_len, h.mode_len) << what;
  EXPECT_EQ(d.mode_count, h.mode_count) << what;
  EXPECT_EQ(d.empty_rows, h.empty_rows) << what;
  EXPECT_EQ(d.n_iter_natural, h.n_iter_natural) << what;
  EXPECT_EQ(d.chain_warp_nnz, h.chain_warp_nnz) << what;
  EXPECT_EQ(d.n_iter_sorted, h.n_iter_sorted) << what;
  EXPECT_EQ(d.n_p, h.n_p) << what;
  EXPECT_EQ(d.hyb_ell_width, h.hyb_ell_width) << what;
  EXPECT_EQ(d.hyb_coo_nnz, h.hyb_coo_nnz) << what;
  EXPECT_DOUBLE_EQ(d.mean, h.mean) << what;
  EXPECT_DOUBLE_EQ(d.stddev, h.stddev) << what;
}

void check_matrix(const aijp::csr_matrix<double>& a, const std::string& name)
{
  for (auto f : aijp::all_formats()) {
    check_format<double>(a, f, name);
    check_format<float>(a, f, name);
  }
  // Automatic choice: some feasible format, and a report that names it.
  aijp::gpu_matrix<double> m(shared_context(), a.view(), aijp::plan_options{}, nullptr);
  const auto& rep = m.report();
  EXPECT_NE(rep.to_string().find(aijp::format_name(m.format())), std::string::npos) << name;
  expect_same_stats(rep.stats, aijp::compute_row_stats(a.view()), name);
}

TEST_F(GpuTest, EveryFormatOnEverySharedRealMatrix)
{
  const auto names = aijp::test::real_matrix_names();
  ASSERT_GE(names.size(), 40u);
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    check_matrix(aijp::test::load_shared(n), n);
  }
}

TEST_F(GpuTest, EveryFormatOnEdgeCases)
{
  for (const auto& e : aijp::test::edge_cases()) {
    SCOPED_TRACE(e.name);
    check_matrix(e.a, e.name);
  }
}

TEST_F(GpuTest, EveryFormatAboveTwoToThe24Nonzeros)
{
  // 27-point stencil on 90^3: 729000 rows, 19.2M nonzeros > 2^24 (float indices and counters would break).
  const auto a = aijp::gen::laplacian_3d_27pt(90, 90, 90);
  ASSERT_GT(a.nnz(), aijp::size_type(1) << 24);
  for (auto f : aijp::all_formats()) {
    check_format<double>(a, f, "lap27_90");
    check_format<float>(a, f, "lap27_90");
  }
}

// csr_vector with 4 rows per lane group (more rows than one wave holds with one): the rows of a thread end at
// different steps (empty rows, short rows, isolated long rows, a run of consecutive long rows of varying
// length), so finished rows take the loop's re-read of entry 0 while others still accumulate.
TEST_F(GpuTest, CsrVectorStackedRowsOfMixedLengths)
{
  aijp::csr_matrix<double> a;
  a.rows = 300000;
  a.cols = 50000;
  a.row_ptr.assign(1, 0);
  for (aijp::size_type r = 0; r < a.rows; ++r) {
    aijp::size_type len = r % 5;                           // 0..4: mean about 3 with the long rows, 4 lanes
    if (r % 997 == 0) len = 300;                           // isolated long rows
    if (r >= 100000 && r < 100200) len = 40 + (r % 7) * 23;  // a run of long rows, each thread gets several
    for (aijp::size_type k = 0; k < len; ++k) {
      a.col_idx.push_back(static_cast<aijp::index_type>((r * 7919 + k * 104729) % a.cols));
      a.values.push_back(1.0 + static_cast<double>((r + 3 * k) % 17) / 8.0);
    }
    a.row_ptr.push_back(static_cast<aijp::index_type>(a.col_idx.size()));
  }
  const auto& dev = shared_context().device();
  const auto stats = aijp::compute_row_stats(a.view());
  const int lanes = aijp::layout_ref::csr_vector_lanes(stats.mean);
  const aijp::size_type resident =
      static_cast<aijp::size_type>(dev.sm_count) * (dev.max_threads_per_sm / aijp::layout_ref::csr_block_size);
  ASSERT_EQ(aijp::layout_ref::csr_vector_slots(a.rows, lanes, resident), aijp::layout_ref::csr_vector_stacked_slots)
      << "the matrix must need more than one wave with one row per lane group (lanes " << lanes << ")";
  check_format<double>(a, aijp::format_id::csr_vector, "stacked mixed rows");
  check_format<float>(a, aijp::format_id::csr_vector, "stacked mixed rows");
}

TEST_F(GpuTest, DeferredAnalysisAndAmortizedConversion)
{
  const auto a = aijp::gen::laplacian_3d_7pt(40, 40, 40);
  const auto xd = aijp::test::random_vector(a.cols, 21);
  device_vec<double> dx(xd);
  std::vector<double> want(a.rows);
  aijp::reference_spmv(a.view(), 1.0, xd.data(), 0.0, want.data());
  const auto bound = aijp::spmv_error_bounds(a.view(), 1.0, xd.data(), 0.0, want.data());
  const auto check = [&](aijp::gpu_matrix<double>& m, const std::string& what) {
    device_vec<double> dy(std::vector<double>(a.rows, std::numeric_limits<double>::quiet_NaN()));
    m.apply(1.0, dx.p, 0.0, dy.p, nullptr);
    expect_close(dy.get(), want, bound, what);
  };
  aijp::plan_options lazy;
  lazy.analyze = false;
  aijp::gpu_matrix<double> m(shared_context(), a.view(), lazy, nullptr);
  EXPECT_FALSE(m.report().analyzed);
  EXPECT_EQ(m.format(), aijp::format_id::cusparse_csr);
  check(m, "before analysis");

  aijp::plan_options once;
  once.expected_mults = 1;  // one product cannot pay for a conversion
  m.analyze(shared_context(), once, nullptr);
  ASSERT_TRUE(m.report().analyzed);
  ASSERT_TRUE(m.report().deferred.has_value()) << m.report().decision;
  EXPECT_EQ(m.format(), aijp::format_id::cusparse_csr);
  EXPECT_GT(m.report().saving_us, 0);
  EXPECT_GT(m.report().conversion_estimate_us, 0);
  check(m, "deferred");
  EXPECT_FALSE(m.convert_deferred(1, nullptr));
  const auto target = *m.report().deferred;
  EXPECT_TRUE(m.convert_deferred(1e9, nullptr));
  EXPECT_EQ(m.format(), target);
  EXPECT_FALSE(m.report().deferred.has_value());
  check(m, "converted after reuse");
}

TEST_F(GpuTest, DeviceStatisticsMatchHostOnSkewedMatrix)
{
  // 100000 rows: lengths cycle through 0..63 with a few very long rows, crossing many warps.
  aijp::csr_matrix<double> a;
  a.rows = 100000;
  a.cols = 5000;
  for (aijp::size_type r = 0; r < a.rows; ++r) {
    const int len = r % 997 == 0 ? 4000 : static_cast<int>((r * 37) % 64);
    for (int k = 0; k < len; ++k) {
      a.col_idx.push_back(k);
      a.values.push_back(1.0);
    }
    a.row_ptr.push_back(static_cast<aijp::index_type>(a.col_idx.size()));
  }
  aijp::gpu_matrix<double> m(shared_context(), a.view(), aijp::plan_options{}, nullptr);
  expect_same_stats(m.report().stats, aijp::compute_row_stats(a.view()), "skewed");
}

// Rows of 256 entries or more are listed rather than binned when at most 4096 of them exist (stats.cu);
// both sides of both limits give the host reference's statistics exactly: lengths 255/256, repeated and
// distinct long lengths, 4096 and 4097 long rows.
TEST_F(GpuTest, DeviceStatisticsListOrBinLongRows)
{
  const auto make = [](aijp::size_type rows, aijp::size_type long_rows, int variety) {
    aijp::csr_matrix<double> a;
    a.rows = rows;
    a.cols = 3000;
    const aijp::size_type stride = rows / long_rows;
    for (aijp::size_type r = 0; r < rows; ++r) {
      const bool is_long = r % stride == 0 && r / stride < long_rows;
      const int len = is_long ? 256 + static_cast<int>((r / stride) % variety) * 7 : static_cast<int>((r * 13) % 256);
      for (int k = 0; k < len; ++k) {
        a.col_idx.push_back(k);
        a.values.push_back(1.0);
      }
      a.row_ptr.push_back(static_cast<aijp::index_type>(a.col_idx.size()));
    }
    return a;
  };
  for (const auto& c : {std::make_tuple(20000, 1, 1), std::make_tuple(20000, 37, 5), std::make_tuple(40000, 4096, 300),
                        std::make_tuple(40000, 4097, 300), std::make_tuple(40000, 9000, 2)}) {
    const auto a = make(std::get<0>(c), std::get<1>(c), std::get<2>(c));
    const auto want = aijp::compute_row_stats(a.view());
    ASSERT_GE(want.max_len, 256);
    aijp::gpu_matrix<double> m(shared_context(), a.view(), aijp::plan_options{}, nullptr);
    expect_same_stats(m.report().stats, want, "long rows " + std::to_string(std::get<1>(c)));
  }
}

// More than 4096 long rows and a longest row beyond the histogram's shared-memory bins (12288): the lengths
// beyond them binned in global memory, where lanes of one length add it with one atomic (40 consecutive rows
// of 12500 entries: warps whose lanes share a length), the others in shared memory (most short rows share
// one length, 7, as a stencil's do). The host reference's statistics exactly.
TEST_F(GpuTest, DeviceStatisticsBinBeyondSharedMemory)
{
  aijp::csr_matrix<double> a;
  a.rows = 20000;
  a.cols = 13000;
  for (aijp::size_type r = 0; r < a.rows; ++r) {
    const int len = r == 5 ? 13000 : r >= 100 && r < 140 ? 12500 : r % 4 == 0 ? 256 + static_cast<int>(r % 3) : r % 3 != 0 ? 7 : static_cast<int>((r * 13) % 256);
    for (int k = 0; k < len; ++k) {
      a.col_idx.push_back(k);
      a.values.push_back(1.0);
    }
    a.row_ptr.push_back(static_cast<aijp::index_type>(a.col_idx.size()));
  }
  const auto want = aijp::compute_row_stats(a.view());
  ASSERT_EQ(want.max_len, 13000);
  aijp::gpu_matrix<double> m(shared_context(), a.view(), aijp::plan_options{}, nullptr);
  expect_same_stats(m.report().stats, want, "global bins");
}

// The locality samplers (aijp::sample_locality) against a host walk of the same groups: in row order, the
// distinct x sectors of the first 4096 entries of each sampled group of 32 rows; in the length-sorted order,
// the first 32 rows of the length of a row drawn in the group, within 8192 rows, at most 128 entries each,
// and the y sectors they write. Exact counts, so exact ratios; matrices whose lengths vary (where the scan
// for 32 rows of one length runs long), a stencil, and one whose rows are mostly of one length.
TEST_F(GpuTest, LocalitySamplesMatchAHostWalkOfTheSameGroups)
{
  const auto host_walk = [](const aijp::csr_matrix<double>& a, int shift) {
    constexpr aijp::size_type group = 32, scan = 8192;
    constexpr aijp::index_type per_row = 4096 / 32, cap = 4096;
    const aijp::size_type total = (a.rows + group - 1) / group;
    const aijp::size_type groups = std::min<aijp::size_type>(total, 2048);
    unsigned long long n_distinct = 0, n_entries = 0, s_distinct = 0, s_entries = 0, s_y = 0, s_rows = 0;
    const auto len = [&a](aijp::size_type r) { return a.row_ptr[r + 1] - a.row_ptr[r]; };
    for (aijp::size_type b = 0; b < groups; ++b) {
      const aijp::size_type g = b * total / groups;
      {
        const aijp::size_type r0 = g * group, r1 = std::min(r0 + group, a.rows);
        const aijp::index_type begin = a.row_ptr[r0], end = std::min(a.row_ptr[r1], begin + cap);
        std::set<int> sectors;
        for (aijp::index_type k = begin; k < end; ++k) sectors.insert(a.col_idx[k] >> shift);
        n_distinct += sectors.size();
        n_entries += static_cast<unsigned long long>(end - begin);
      }
      const unsigned offset = (static_cast<unsigned>(g) * 2654435761u >> 16) % group;
      const aijp::size_type r0 = std::min<aijp::size_type>(g * group + offset, a.rows - 1);
      std::vector<aijp::size_type> picked;
      for (aijp::size_type r = r0; r < a.rows && r < r0 + scan && picked.size() < group; ++r) {
        if (len(r) == len(r0)) picked.push_back(r);
      }
      std::set<int> sectors;
      for (std::size_t p = 0; p < picked.size(); ++p) {
        const aijp::index_type begin = a.row_ptr[picked[p]], end = std::min(a.row_ptr[picked[p] + 1], begin + per_row);
        for (aijp::index_type k = begin; k < end; ++k) sectors.insert(a.col_idx[k] >> shift);
        s_entries += static_cast<unsigned long long>(end - begin);
        s_y += p == 0 || (picked[p] >> shift) != (picked[p - 1] >> shift);
      }
      s_distinct += sectors.size();
      s_rows += picked.size();
    }
    const auto ratio = [](unsigned long long n, unsigned long long d) { return d ? static_cast<double>(n) / static_cast<double>(d) : 0.0; };
    aijp::locality_sample want;
    // The gather mixture: per sampled group b, the window around nonzero (2b + 1) nnz / (2 groups) within its
    // 32-row group (at most 4096 entries, centred, clamped to the group), binned by its sectors per nonzero.
    const aijp::size_type nnz = a.row_ptr[a.rows];
    std::array<unsigned long long, aijp::gather_mixture::bins> windows{};
    std::array<double, aijp::gather_mixture::bins> sums{};
    aijp::index_type longest_len = 0;
    unsigned long long longest_changes = 0, longest_entries = 0;
    for (aijp::size_type b = 0; b < groups && nnz > 0; ++b) {
      const aijp::size_type k = (2 * b + 1) * nnz / (2 * groups);
      const aijp::size_type row = static_cast<aijp::size_type>(std::upper_bound(a.row_ptr.begin(), a.row_ptr.end(), k) - a.row_ptr.begin()) - 1;
      const aijp::size_type g = row / group;
      const aijp::index_type gb = a.row_ptr[g * group], ge = a.row_ptr[std::min((g + 1) * group, a.rows)];
      const aijp::index_type width = std::min<aijp::index_type>(ge - gb, cap);
      const aijp::index_type begin = std::min(std::max(static_cast<aijp::index_type>(k) - width / 2, gb), ge - width);
      std::set<int> sectors;
      for (aijp::index_type e = begin; e < begin + width; ++e) sectors.insert(a.col_idx[e] >> shift);
      const double r = static_cast<double>(sectors.size()) / width;
      const int bin = std::min(aijp::gather_mixture::bins - 1, static_cast<int>(r * aijp::gather_mixture::bins));
      ++windows[bin];
      sums[bin] += r;
      // The row holding nonzero k, alone: at most 4096 of its entries centred on k, 1 + its consecutive entries in
      // different sectors per entry; the longest such row is kept (the most changes among rows of one length).
      const aijp::index_type rb = a.row_ptr[row], re = a.row_ptr[row + 1];
      const aijp::index_type n = std::min<aijp::index_type>(re - rb, cap);
      const aijp::index_type wb = std::min(std::max(static_cast<aijp::index_type>(k) - n / 2, rb), re - n);
      unsigned long long changes = 1;
      for (aijp::index_type e = wb + 1; e < wb + n; ++e) changes += (a.col_idx[e] >> shift) != (a.col_idx[e - 1] >> shift);
      if (std::make_pair(re - rb, changes) > std::make_pair(longest_len, longest_changes)) {
        longest_len = re - rb;
        longest_changes = changes;
        longest_entries = n;
      }
    }
    want.x_mixture.longest_row_len = static_cast<double>(longest_len);
    want.x_mixture.longest_row_ratio = ratio(longest_changes, longest_entries);
    for (int bin = 0; bin < aijp::gather_mixture::bins; ++bin) {
      want.x_mixture.share[bin] = ratio(windows[bin], groups);
      want.x_mixture.ratio[bin] = windows[bin] ? sums[bin] / windows[bin] : 0.0;
    }
    want.x_sectors_per_nnz = ratio(n_distinct, n_entries);
    want.sorted.x_sectors_per_nnz = ratio(s_distinct, s_entries);
    want.sorted.y_sectors_per_row = ratio(s_y, s_rows);
    return want;
  };
  for (const char* spec : {"normal:rows=60000,mean=9,sigma=4", "powerlaw:rows=50000,deg=8,exp=2.1", "lap7:24x24x24",
                           "stack:circuit:rows=3000,dense=4,len=2000+lap27:12x12x12", "banded:rows=5000,bw=3",
                           "circuit:rows=20000,dense=40,len=2000"}) {
    SCOPED_TRACE(spec);
    const auto a = aijp::gen::from_spec(spec);
    aijp::index_type *rp = nullptr, *ci = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&rp), a.row_ptr.size() * sizeof(aijp::index_type)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&ci), std::max<std::size_t>(a.col_idx.size(), 1) * sizeof(aijp::index_type)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(rp, a.row_ptr.data(), a.row_ptr.size() * sizeof(aijp::index_type), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ci, a.col_idx.data(), a.col_idx.size() * sizeof(aijp::index_type), cudaMemcpyHostToDevice), cudaSuccess);
    for (const int value_bytes : {8, 4}) {
      const auto got = aijp::sample_locality(a.rows, a.cols, rp, ci, value_bytes, nullptr);
      const auto want = host_walk(a, value_bytes == 8 ? 2 : 3);
      EXPECT_DOUBLE_EQ(got.x_sectors_per_nnz, want.x_sectors_per_nnz) << value_bytes;
      EXPECT_DOUBLE_EQ(got.sorted.x_sectors_per_nnz, want.sorted.x_sectors_per_nnz) << value_bytes;
      EXPECT_DOUBLE_EQ(got.sorted.y_sectors_per_row, want.sorted.y_sectors_per_row) << value_bytes;
      EXPECT_GT(want.sorted.x_sectors_per_nnz, 0.0);
      ASSERT_TRUE(want.x_mixture.known());
      for (int bin = 0; bin < aijp::gather_mixture::bins; ++bin) {
        EXPECT_DOUBLE_EQ(got.x_mixture.share[bin], want.x_mixture.share[bin]) << value_bytes << " bin " << bin;
        EXPECT_NEAR(got.x_mixture.ratio[bin], want.x_mixture.ratio[bin], 1e-12) << value_bytes << " bin " << bin;  // sums in any order
      }
      EXPECT_EQ(got.x_mixture.longest_row_len, want.x_mixture.longest_row_len) << value_bytes;
      EXPECT_DOUBLE_EQ(got.x_mixture.longest_row_ratio, want.x_mixture.longest_row_ratio) << value_bytes;
      EXPECT_GT(want.x_mixture.longest_row_ratio, 0.0);
      if (std::string(spec).rfind("circuit:", 0) == 0 && value_bytes == 8) {
        // 80000 of ~160000 nonzeros in 40 rows of random columns 10 apart, the rest near the diagonal: half the
        // windows lie in the dense rows (0.70 sectors per nonzero: a window spans two rows of the same columns), half in
        // the bulk (0.11-0.13), while the per-group ratio sees the bulk (0.17; host walk, H100 session 42).
        double top = 0, bottom = 0;
        for (int bin = 0; bin < aijp::gather_mixture::bins; ++bin) {
          if (bin >= 5) top += got.x_mixture.share[bin];
          if (bin <= 1) bottom += got.x_mixture.share[bin];
        }
        EXPECT_GT(top, 0.4);
        EXPECT_GT(bottom, 0.4);
        EXPECT_GT(got.x_mixture.mean(), 2 * got.x_sectors_per_nnz);
        // Its dense rows of 2000, columns about 10 apart: nearly every entry in a sector of its own, where the
        // windows of two such rows share them.
        EXPECT_EQ(got.x_mixture.longest_row_len, 2000);
        EXPECT_GT(got.x_mixture.longest_row_ratio, 0.8);  // 0.875 by the host walk
      }
      if (std::string(spec).rfind("banded:", 0) == 0) {
        // Rows of 7 contiguous columns: a row spans at most 3 sectors of 4 doubles, 2 of 8 floats.
        EXPECT_EQ(got.x_mixture.longest_row_len, 7);
        EXPECT_LE(got.x_mixture.longest_row_ratio, (value_bytes == 8 ? 3.0 : 2.0) / 7.0);
      }
    }
    EXPECT_EQ(cudaFree(rp), cudaSuccess);
    EXPECT_EQ(cudaFree(ci), cudaSuccess);
  }
}

// The placement of a block's long rows (host only: runs without a device). For the warm-up's block shapes
// and 200 seeds: the long rows lie in one 32-row group other than the first (one warp of a thread-per-row
// format, one SELL-32 slice, as the former rows 0 .. k - 1 did), the pad and first column are odd (off a
// sector), the shared window fits, and the rows spread over the matrix (not the former row 0 for all).
TEST(DeviceGenerator, BlockLayoutIsOffRowZeroAndOffSectors)
{
  for (const auto& [rows, window] : {std::pair<aijp::size_type, aijp::size_type>{16000, 400}, {16000, 1600}, {2000000, 200000}}) {
    for (const int k : {1, 2, 8, 20, 32}) {
      std::set<aijp::size_type> first_rows;
      aijp::size_type low_half = 0;
      for (std::uint64_t seed = 1; seed <= 200; ++seed) {
        aijp::device_generator_spec spec;
        spec.dist = aijp::device_generator_spec::lengths::block;
        spec.rows = spec.cols = rows;
        spec.mean = 8;
        spec.param = k;
        spec.window = window;
        spec.seed = seed;
        const auto b = aijp::block_layout(spec);
        SCOPED_TRACE(spec.to_string());
        EXPECT_GE(b.first_row, 32);
        EXPECT_EQ(b.first_row / 32, (b.first_row + k - 1) / 32);
        EXPECT_LT(b.first_row + k, rows + 1);
        EXPECT_EQ(b.pad % 2, 1);
        EXPECT_LE(b.pad, 7);
        EXPECT_EQ(b.first_col % 2, 1);
        EXPECT_LE(b.first_col + window, rows);
        first_rows.insert(b.first_row);
        low_half += b.first_row < rows / 2;
      }
      // 200 draws of 499 groups of 32 (16000 rows, 32 long rows) repeat ~36 of them by chance.
      EXPECT_GE(first_rows.size(), 150u) << rows << " rows, " << k << " long";
      EXPECT_GT(low_half, 60);
      EXPECT_LT(low_half, 140);
    }
  }
  aijp::device_generator_spec other;
  other.rows = other.cols = 1000;
  other.window = 1000;
  EXPECT_EQ(aijp::block_layout(other).first_row, 0);  // not a block: nothing placed
  EXPECT_EQ(aijp::block_layout(other).pad, 0);
}

// The warm-up's device generator: a block of long rows on top of short ones has exactly the lengths asked
// for where block_layout places them (the row before them `pad` longer, so their entries start off a sector),
// the long rows on the same contiguous columns from an odd column, sorted distinct columns in range
// elsewhere, and the device statistics (with the chain group's nonzeros) equal the host reference's on a
// host copy.
TEST_F(GpuTest, DeviceGeneratedBlockOfLongRows)
{
  aijp::device_generator_spec spec;
  spec.dist = aijp::device_generator_spec::lengths::block;
  spec.rows = spec.cols = 16000;
  spec.mean = 8;
  spec.param = 20;
  spec.window = 1600;
  const auto b = aijp::block_layout(spec);
  ASSERT_GE(b.first_row, 32);
  ASSERT_GE(b.pad, 1);
  const auto m = aijp::generate_on_device<double>(spec, nullptr);
  const auto v = m.view();
  ASSERT_EQ(v.rows, 16000);
  ASSERT_EQ(v.nnz, 20 * 1600 + (16000 - 20) * 8 + b.pad);
  std::vector<aijp::index_type> row_ptr(v.rows + 1);
  ASSERT_EQ(cudaMemcpy(row_ptr.data(), v.row_ptr, row_ptr.size() * sizeof(aijp::index_type), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<aijp::index_type> col(row_ptr.back());
  ASSERT_EQ(cudaMemcpy(col.data(), v.col_idx, col.size() * sizeof(aijp::index_type), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(row_ptr[b.first_row] % 2, 1) << "the long rows' first entry at " << row_ptr[b.first_row];
  for (aijp::size_type r = 0; r < v.rows; ++r) {
    const bool is_long = r >= b.first_row && r < b.first_row + 20;
    ASSERT_EQ(row_ptr[r + 1] - row_ptr[r], is_long ? 1600 : r + 1 == b.first_row ? 8 + b.pad : 8) << "row " << r;
    for (auto k = row_ptr[r]; k < row_ptr[r + 1]; ++k) {
      ASSERT_GE(col[k], 0);
      ASSERT_LT(col[k], v.cols);
      if (is_long) {
        ASSERT_EQ(col[k], b.first_col + (k - row_ptr[r])) << "row " << r;
      } else if (k > row_ptr[r]) {
        ASSERT_GT(col[k], col[k - 1]) << "row " << r;
      }
    }
  }
  aijp::csr_matrix<double> h;
  h.rows = v.rows;
  h.cols = v.cols;
  h.row_ptr = row_ptr;
  h.col_idx = col;
  h.values.assign(col.size(), 1.0);
  const auto want = aijp::compute_row_stats(h.view());
  EXPECT_EQ(want.max_len, 1600);
  EXPECT_EQ(want.chain_warp_nnz, 20 * 1600 + 12 * 8 + (b.first_row % 32 > 0 ? b.pad : 0));
  expect_same_stats(aijp::compute_row_stats_device(v.rows, v.cols, v.row_ptr, nullptr), want, "block");
  EXPECT_NE(spec.to_string().find("block:rows=16000"), std::string::npos) << spec.to_string();
  EXPECT_NE(spec.to_string().find(",placed=hashed,"), std::string::npos) << spec.to_string();
  aijp::device_generator_spec bad = spec;
  bad.param = 0;
  EXPECT_THROW(aijp::generate_on_device<double>(bad, nullptr), aijp::bad_input);
}

// The full warm-up grid's points appended after the first 149 (so the earlier points keep their seeds and a
// previous full run's samples file resumes): the 7 beyond the L2 (seeds 150-156), then cuSPARSE SELL's 14
// blocks in the gap of stored entries (seeds 157-170).
constexpr std::size_t beyond_l2_first = 149, csell_gap_first = 156, csell_gap_points = 14;
// The small-y points after the gap series (rows 320, 400, 480 x means 12, 40), in both grids.
constexpr std::size_t small_y_points = 6;

// The warm-up's points beyond the L2 (appended after the first 149): blocks of 200000-entry rows on 2M short
// rows and random columns with x of 16 and 32 MB; the quick grid has none of them. The 2-row block is
// generated: its long rows are exactly 200000 contiguous columns from block_layout's first column, where it
// places them, and its statistics give 2 lanes on the chain.
TEST_F(GpuTest, WarmupFullGridHasChainsAndGathersBeyondL2)
{
  const auto& dev = shared_context().device();
  const auto quick = aijp::warmup_grid(dev, false);
  const auto full = aijp::warmup_grid(dev, true);
  ASSERT_EQ(full.size(), csell_gap_first + csell_gap_points + small_y_points);
  std::set<std::string> keys;
  for (const auto& p : full) EXPECT_TRUE(keys.insert(p.key()).second) << "duplicate " << p.key();
  const std::vector<std::string> tail = {
      "block:rows=2000000,cols=2000000,mean=12,long_rows=1,placed=hashed,window=200000",
      "block:rows=2000000,cols=2000000,mean=12,long_rows=2,placed=hashed,window=200000",
      "block:rows=2000000,cols=2000000,mean=12,long_rows=8,placed=hashed,window=200000",
      "block:rows=2000000,cols=2000000,mean=12,long_rows=20,placed=hashed,window=200000",
      "block:rows=2000000,cols=2000000,mean=12,long_rows=32,placed=hashed,window=200000",
      "normal:rows=2000000,cols=2000000,mean=24,sigma=6,window=2000000",
      "normal:rows=4000000,cols=4000000,mean=12,sigma=3,window=4000000",
  };
  const std::size_t first = beyond_l2_first;
  for (std::size_t i = 0; i < tail.size(); ++i) {
    EXPECT_EQ(full[first + i].key(), tail[i] + ",seed=" + std::to_string(first + i + 1));
    EXPECT_TRUE(full[first + i].formats.empty()) << "every format";
    for (const auto& p : quick) EXPECT_NE(p.key().rfind(tail[i], 0), 0u) << "quick grid point " << p.key();
  }

  const auto b = aijp::block_layout(full[first + 1].spec);
  ASSERT_GE(b.first_row, 32);
  const auto m = aijp::generate_on_device<double>(full[first + 1].spec, nullptr);
  const auto v = m.view();
  ASSERT_EQ(v.rows, 2000000);
  ASSERT_EQ(v.nnz, 2 * 200000 + (2000000 - 2) * 12 + b.pad);
  std::vector<aijp::index_type> row_ptr(v.rows + 1);
  ASSERT_EQ(cudaMemcpy(row_ptr.data(), v.row_ptr, row_ptr.size() * sizeof(aijp::index_type), cudaMemcpyDeviceToHost), cudaSuccess);
  for (aijp::size_type r = 0; r < v.rows; ++r) {
    const aijp::index_type want = r >= b.first_row && r < b.first_row + 2 ? 200000 : r + 1 == b.first_row ? 12 + b.pad : 12;
    ASSERT_EQ(row_ptr[r + 1] - row_ptr[r], want) << "row " << r;
  }
  EXPECT_EQ(row_ptr[b.first_row] % 2, 1);
  std::vector<aijp::index_type> col(2 * 200000);
  ASSERT_EQ(cudaMemcpy(col.data(), v.col_idx + row_ptr[b.first_row], col.size() * sizeof(aijp::index_type), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (std::size_t k = 0; k < col.size(); ++k) {
    ASSERT_EQ(col[k], static_cast<aijp::index_type>(b.first_col + k % 200000)) << "entry " << k;
  }
  const auto s = aijp::compute_row_stats_device(v.rows, v.cols, v.row_ptr, nullptr);
  EXPECT_EQ(s.max_len, 200000);
  EXPECT_EQ(s.chain_warp_nnz, 2 * 200000 + 30 * 12 + (b.first_row % 32 > 0 ? b.pad : 0));
}

// SELL-32's stored entries (32 x n_iter_natural, cuSPARSE's sellValuesSize) of a warm-up block: the lengths the
// generator draws where block_layout places the long rows (DeviceGeneratedBlockOfLongRows checks them on the
// device), the longest row of each 32-row slice summed.
long long block_sell_stored(const aijp::device_generator_spec& s)
{
  const auto b = aijp::block_layout(s);
  const long long rows = static_cast<long long>(s.rows), first = static_cast<long long>(b.first_row);
  const long long mean = std::llround(s.mean), len = static_cast<long long>(std::min(s.window, s.cols));
  const long long count = static_cast<long long>(std::ceil(s.param));
  long long n = 0;
  for (long long slice = 0; slice < rows; slice += 32) {
    long long longest = 0;
    for (long long r = slice; r < std::min(rows, slice + 32); ++r) {
      longest = std::max(longest, r >= first && r < first + count ? len : r + 1 == first ? mean + b.pad : mean);
    }
    n += longest;
  }
  return 32 * n;
}

// The stored entries of cuSPARSE SELL's gap series, as the warm-up's comment lists them.
const std::vector<long long> csell_gap_stored = {185344, 198176, 210944, 223776, 242944, 262240, 281344,
                                                 185376, 198144, 211040, 223968, 243040, 262144, 281504};

// The full grid has 14 blocks that only cuSPARSE SELL times (before the 6 small-y points of both grids), all of whose layouts lie in the warm-up's gap
// of chain-bound stored entries (above the 16000-row block of 1600, 179104; below the normal rows of 8000 x 12
// +- 12, 293792: docs/models.md, Session 29), from its lower end to its upper end for each shape (1600 and 400
// long), with 1 and 32 long rows in turn. Host only: runs without a device (the grid's sizes do not depend on
// the device; its strips do, so an H100's properties).
TEST(WarmupGrid, FullGridHasCusparseSellBlocksInTheGapThenSmallY)
{
  aijp::device_properties d;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.max_threads_per_block = 1024;
  d.warp_size = 32;
  const auto quick = aijp::warmup_grid(d, false);
  const auto full = aijp::warmup_grid(d, true);
  ASSERT_EQ(full.size(), csell_gap_first + csell_gap_points + small_y_points);
  for (std::size_t i = 0; i < csell_gap_first; ++i) {
    EXPECT_TRUE(full[i].formats.empty()) << full[i].key();
    EXPECT_TRUE(full[i].measures(aijp::format_id::sell_c_sigma)) << full[i].key();
  }
  for (std::size_t i = 0; i + small_y_points < quick.size(); ++i) EXPECT_TRUE(quick[i].formats.empty()) << quick[i].key();
  std::array<long long, 2> lowest{1LL << 62, 1LL << 62}, highest{0, 0};
  for (std::size_t i = 0; i < csell_gap_points; ++i) {
    const auto& p = full[csell_gap_first + i];
    SCOPED_TRACE(p.key());
    const bool long1600 = i < csell_gap_points / 2;
    EXPECT_EQ(p.spec.dist, aijp::device_generator_spec::lengths::block);
    EXPECT_EQ(p.spec.seed, csell_gap_first + i + 1);
    EXPECT_EQ(p.spec.mean, 8);
    EXPECT_EQ(p.spec.window, long1600 ? 1600 : 400);
    EXPECT_EQ(p.spec.param, i % 2 == 0 ? 1.0 : 32.0);
    EXPECT_EQ(p.spec.rows % 32, 0);
    ASSERT_EQ(p.formats.size(), 1u);
    EXPECT_EQ(p.formats[0], aijp::format_id::cusparse_sell);
    EXPECT_TRUE(p.measures(aijp::format_id::cusparse_sell));
    EXPECT_FALSE(p.measures(aijp::format_id::sell_c_sigma));
    const long long stored = block_sell_stored(p.spec);
    EXPECT_EQ(stored, csell_gap_stored[i]);
    EXPECT_GT(stored, 179104);
    EXPECT_LT(stored, 293792);
    lowest[long1600] = std::min(lowest[long1600], stored);
    highest[long1600] = std::max(highest[long1600], stored);
  }
  for (int s = 0; s < 2; ++s) {
    EXPECT_LT(lowest[s], 186000) << "series " << s;   // within 7K of the gap's lower end
    EXPECT_GT(highest[s], 281000) << "series " << s;  // within 13K of its upper end
  }
  // Then, in both grids, the small-y points: y of at most small_y_bytes in double (the floors of
  // format_floor_small_y_us), random columns, timed for COO only (the format that clears y with a memset).
  for (const auto* g : {&full, &quick}) {
    ASSERT_GE(g->size(), small_y_points);
    for (std::size_t i = g->size() - small_y_points; i < g->size(); ++i) {
      const auto& p = (*g)[i];
      SCOPED_TRACE(p.key());
      EXPECT_EQ(p.spec.dist, aijp::device_generator_spec::lengths::constant);
      EXPECT_LE(static_cast<double>(p.spec.rows) * sizeof(double), aijp::small_y_bytes);
      EXPECT_GE(p.spec.rows, 256);
      EXPECT_EQ(p.spec.window, p.spec.rows);
      EXPECT_EQ(p.spec.seed, i + 1);
      ASSERT_EQ(p.formats.size(), 1u);
      EXPECT_EQ(p.formats[0], aijp::format_id::coo);
    }
  }
  // The host count is the one the samples record: the 16000-row blocks of the H100 gated warm-up (session 28).
  aijp::device_generator_spec b = full[csell_gap_first].spec;
  b.rows = b.cols = 16000;
  for (const auto& [seed, k, len, want] : std::vector<std::tuple<int, double, aijp::size_type, long long>>{
           {134, 1, 400, 140544}, {142, 32, 400, 140640}, {135, 1, 1600, 178944}, {143, 32, 1600, 179104}}) {
    b.seed = seed;
    b.param = k;
    b.window = len;
    EXPECT_EQ(block_sell_stored(b), want) << b.to_string();
  }
}

// The gap series on the device: the statistics the warm-up records give the stored entries the host counts, and
// cuSPARSE SELL takes every one of them.
TEST_F(GpuTest, WarmupCusparseSellGapSeriesOnTheDevice)
{
  const auto full = aijp::warmup_grid(shared_context().device(), true);
  ASSERT_EQ(full.size(), csell_gap_first + csell_gap_points + small_y_points);
  for (std::size_t i = 0; i < csell_gap_points; ++i) {
    const auto& p = full[csell_gap_first + i];
    SCOPED_TRACE(p.key());
    const auto m = aijp::generate_on_device<double>(p.spec, nullptr);
    const auto v = m.view();
    const auto s = aijp::compute_row_stats_device(v.rows, v.cols, v.row_ptr, nullptr);
    EXPECT_EQ(32 * static_cast<long long>(s.n_iter_natural), csell_gap_stored[i]);
    EXPECT_EQ(s.max_len, static_cast<aijp::index_type>(p.spec.window));
    aijp::plan_options po;
    po.forced = aijp::format_id::cusparse_sell;
    aijp::gpu_matrix<double> g(shared_context(), v, aijp::memory_space::device, po, nullptr);
    EXPECT_EQ(g.format(), aijp::format_id::cusparse_sell) << g.report().decision;
  }
}

TEST_F(GpuTest, RejectsInvalidColumnIndexWithClearError)
{
  aijp::csr_matrix<double> a;
  a.rows = 2;
  a.cols = 2;
  a.row_ptr = {0, 1, 2};
  a.col_idx = {0, 5};
  a.values = {1, 1};
  try {
    aijp::gpu_matrix<double> m(shared_context(), a.view(), aijp::plan_options{}, nullptr);
    FAIL() << "no exception";
  } catch (const aijp::bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("column index"), std::string::npos) << e.what();
  }
}

// The upload's column check and the diagonal read a row with a group of threads (up to a warp, about the
// mean row length): a bad column, an unsorted pair or a column step found by any thread of a long row's group
// counts, and the diagonal adds the duplicates wherever they sit in the row.
TEST_F(GpuTest, ColumnCheckAndDiagonalSeeEveryEntryOfLongRows)
{
  // 64 rows: row 0 holds 200 entries (columns 0..199 of 256, the diagonal twice, at positions 0 and 150), the
  // others 0-3 entries; mean ~5 nonzeros, so groups of 8 threads.
  const auto make = [] {
    aijp::csr_matrix<double> a;
    a.rows = 64;
    a.cols = 256;
    for (int c = 0; c < 200; ++c) {
      a.col_idx.push_back(c == 150 ? 0 : c);
      a.values.push_back(1.0 + c);
    }
    a.row_ptr.push_back(static_cast<aijp::index_type>(a.col_idx.size()));
    for (int r = 1; r < 64; ++r) {
      for (int k = 0; k < r % 4; ++k) {
        a.col_idx.push_back((r + 7 * k) % 256);
        a.values.push_back(0.5 * r - k);
      }
      a.row_ptr.push_back(static_cast<aijp::index_type>(a.col_idx.size()));
    }
    return a;
  };
  aijp::csr_matrix<double> a = make();
  {
    aijp::gpu_matrix<double> m(shared_context(), a.view(), aijp::test::not_analysed(), nullptr);
    aijp::test::device_vec<double> d(std::vector<double>(a.rows, -1.0));
    m.diagonal(d.p, nullptr);
    const auto got = d.get();
    for (aijp::index_type r = 0; r < a.rows; ++r) {
      double want = 0;
      for (aijp::index_type k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) want += a.col_idx[k] == r ? a.values[k] : 0.0;
      EXPECT_EQ(got[r], want) << "row " << r;
    }
    EXPECT_EQ(got[0], 1.0 + 151.0) << "both of row 0's diagonal entries";
  }
  // Row 0's entry at position 150 (column 0 after 149) makes the row unsorted: no delta-encoded layout.
  {
    aijp::plan_options po;
    po.forced = aijp::format_id::sell_delta16;
    aijp::gpu_matrix<double> m(shared_context(), a.view(), po, nullptr);
    EXPECT_EQ(m.format(), aijp::format_id::cusparse_csr);
    EXPECT_NE(m.report().decision.find("unsorted"), std::string::npos) << m.report().decision;
  }
  // A column outside [0, cols) at position 77 of row 0 (a thread other than the group's first finds it).
  a.col_idx[77] = 256;
  try {
    aijp::gpu_matrix<double> m(shared_context(), a.view(), aijp::plan_options{}, nullptr);
    ADD_FAILURE() << "no exception for a column outside the matrix";
  } catch (const aijp::bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("1 rows have"), std::string::npos) << e.what();
  }
  // Row pointers that decrease at row 4 (206, then 205): reported, and nothing past the arrays is read.
  a = make();
  std::swap(a.row_ptr[4], a.row_ptr[5]);
  if (a.row_ptr[4] == a.row_ptr[5]) a.row_ptr[5] -= 1;
  try {
    aijp::gpu_matrix<double> m(shared_context(), a.view(), aijp::plan_options{}, nullptr);
    ADD_FAILURE() << "no exception for decreasing row pointers";
  } catch (const aijp::bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("decreasing row_ptr"), std::string::npos) << e.what();
  }
}

// The context's preload (context_options::preload, double by default) reaches the module of every format
// source compiled for double and of the value-type neutral units, and loads every function in them: a
// second preload finds nothing left to load. Float modules are not part of it.
TEST_F(GpuTest, ContextPreloadsEveryModuleOfItsValueType)
{
  const aijp::kernel_preload_report& r = shared_context().preload();
  ASSERT_TRUE(r.note.empty()) << r.note;
  const auto has = [&](const std::string& unit) { return std::find(r.units.begin(), r.units.end(), unit) != r.units.end(); };
  for (const char* u : {"coo.cu double part 0", "csr.cu double part 1", "csr.cu double part 2", "ell.cu double part 1",
                        "ell.cu double part 2", "ell.cu double part 3", "hyb.cu double part 0", "jad.cu double part 0",
                        "sell_sigma.cu double part 0", "sell_delta16.cu double part 0",
                        "partitioned.cu double part 0", "cusparse_variants.cu double part 1", "stats.cu", "features.cu",
                        "gpu_matrix.cu", "vector_ops.cu"}) {
    EXPECT_TRUE(has(u)) << u << " not preloaded";
  }
  for (const auto& u : r.units) EXPECT_EQ(u.find("float"), std::string::npos) << u;
  EXPECT_GT(r.functions, 2 * r.modules);  // every unit holds kernels beyond its anchor
  const aijp::kernel_preload_report again = aijp::preload_kernels(aijp::kernel_preload::double_values);
  EXPECT_EQ(again.modules, r.modules);
  EXPECT_EQ(again.functions, r.functions);
  EXPECT_EQ(again.loaded_now, 0);
  const aijp::kernel_preload_report all = aijp::preload_kernels(aijp::kernel_preload::all);
  EXPECT_TRUE(all.note.empty()) << all.note;
  EXPECT_GT(all.modules, r.modules);
  EXPECT_EQ(aijp::preload_kernels(aijp::kernel_preload::all).loaded_now, 0);
}

}  // namespace
