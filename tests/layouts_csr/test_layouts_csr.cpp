// Host tests of the CSR-family layout references (aijpredict/layout_ref_csr.hpp): csr_scalar, csr_vector
// with every compiled lane count, and COO, against aijp::reference_spmv on a hand-checked matrix, the edge
// cases and a few shared matrices. The device kernels are checked against reference_spmv in tests/gpu.
#include <aijpredict/layout_ref_csr.hpp>
#include <aijpredict/reference.hpp>

#include "test_checks.hpp"
#include "test_matrices.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using aijp::test::cast;
using aijp::test::expect_close;

namespace lr = aijp::layout_ref;
using aijp::index_type;
using aijp::size_type;

template <typename T>
void run_coo(const aijp::csr_matrix<T>& a, T alpha, const T* x, T beta, T* y)
{
  const auto rows = lr::coo_row_indices(a.rows, a.nnz(), a.row_ptr.data());
  lr::coo_spmv(a.rows, a.nnz(), rows.data(), a.col_idx.data(), a.values.data(), alpha, x, beta, y);
}

// Checks every layout on one matrix: y = A x with NaN planted in y, and y = 2 A x + y / 2.
template <typename T>
void check_layouts(const aijp::csr_matrix<double>& a64, const std::string& name)
{
  const auto a = cast<T>(a64);
  const auto view = a.view();
  const auto xd = aijp::test::random_vector(a.cols, 11);
  const auto yd = aijp::test::random_vector(a.rows, 12);
  const std::vector<T> x(xd.begin(), xd.end()), y0(yd.begin(), yd.end());
  const int chosen = lr::csr_vector_lanes(a.rows > 0 ? static_cast<double>(a.nnz()) / a.rows : 0.0);

  struct layout {
    std::string name;
    std::function<void(T, T, T*)> apply;  // (alpha, beta, y)
  };
  std::vector<layout> layouts;
  layouts.push_back({"csr_scalar", [&](T al, T be, T* y) { lr::csr_scalar_spmv(view, al, x.data(), be, y); }});
  for (int lanes : lr::csr_vector_lane_set) {
    layouts.push_back({"csr_vector/" + std::to_string(lanes) + (lanes == chosen ? " (chosen)" : ""),
                       [&, lanes](T al, T be, T* y) { lr::csr_vector_spmv(view, lanes, al, x.data(), be, y); }});
  }
  layouts.push_back({"coo", [&](T al, T be, T* y) { run_coo(a, al, x.data(), be, y); }});

  std::vector<T> want(static_cast<size_t>(a.rows));
  aijp::reference_spmv(view, T(1), x.data(), T(0), want.data());
  const auto bound0 = aijp::spmv_error_bounds(view, T(1), x.data(), T(0), want.data());
  std::vector<T> want2 = y0;
  aijp::reference_spmv(view, T(2), x.data(), T(0.5), want2.data());
  const auto bound2 = aijp::spmv_error_bounds(view, T(2), x.data(), T(0.5), y0.data());
  const std::string type = sizeof(T) == 8 ? " / double" : " / float";
  for (const auto& l : layouts) {
    std::vector<T> y(static_cast<size_t>(a.rows), std::numeric_limits<T>::quiet_NaN());
    l.apply(T(1), T(0), y.data());
    expect_close(y, want, bound0, name + " / " + l.name + type + " y=Ax");
    y = y0;
    l.apply(T(2), T(0.5), y.data());
    expect_close(y, want2, bound2, name + " / " + l.name + type + " y=2Ax+y/2");
  }
}

void check_row_indices(const aijp::csr_matrix<double>& a, const std::string& name)
{
  const auto rows = lr::coo_row_indices(a.rows, a.nnz(), a.row_ptr.data());
  ASSERT_EQ(static_cast<size_type>(rows.size()), a.nnz()) << name;
  for (size_type r = 0; r < a.rows; ++r) {
    for (index_type k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) ASSERT_EQ(rows[k], r) << name << " entry " << k;
  }
}

TEST(layouts_csr, LanesAreTheSmallestPowerOfTwoAtLeastTheMeanWithinTwoToThirtyTwo)
{
  EXPECT_EQ(lr::csr_vector_lanes(0.0), 2);
  EXPECT_EQ(lr::csr_vector_lanes(1.0), 2);
  EXPECT_EQ(lr::csr_vector_lanes(2.0), 2);
  EXPECT_EQ(lr::csr_vector_lanes(2.01), 4);
  EXPECT_EQ(lr::csr_vector_lanes(4.0), 4);
  EXPECT_EQ(lr::csr_vector_lanes(7.2), 8);
  EXPECT_EQ(lr::csr_vector_lanes(16.0), 16);
  EXPECT_EQ(lr::csr_vector_lanes(16.5), 32);
  EXPECT_EQ(lr::csr_vector_lanes(32.0), 32);
  EXPECT_EQ(lr::csr_vector_lanes(1e6), 32);
  for (double mean = 0; mean < 100; mean += 0.25) {
    const int l = lr::csr_vector_lanes(mean);
    EXPECT_NE(std::find(lr::csr_vector_lane_set.begin(), lr::csr_vector_lane_set.end(), l), lr::csr_vector_lane_set.end())
        << "no compiled kernel for " << l << " lanes (mean " << mean << ")";
  }
}

TEST(layouts_csr, VectorStacksRowsOnlyBeyondOneWaveOfResidentBlocks)
{
  // 256-thread blocks hold 256 / lanes rows per slot: 8 rows with 32 lanes, 128 with 2.
  EXPECT_EQ(lr::csr_vector_blocks(0, 32, 1), 0);
  EXPECT_EQ(lr::csr_vector_blocks(8, 32, 1), 1);
  EXPECT_EQ(lr::csr_vector_blocks(9, 32, 1), 2);
  EXPECT_EQ(lr::csr_vector_blocks(33, 32, 4), 2);
  EXPECT_EQ(lr::csr_vector_blocks(1000000, 2, 4), (1000000 + 511) / 512);
  // One wave on an H100/H200: 132 SMs x 8 resident blocks = 1056 blocks.
  const size_type wave = 132 * 8;
  for (int lanes : lr::csr_vector_lane_set) {
    const size_type rows_per_wave = wave * (lr::csr_block_size / lanes);
    EXPECT_EQ(lr::csr_vector_slots(rows_per_wave, lanes, wave), 1) << lanes;
    EXPECT_EQ(lr::csr_vector_slots(rows_per_wave + 1, lanes, wave), lr::csr_vector_stacked_slots) << lanes;
    // Unknown device: one row per group.
    EXPECT_EQ(lr::csr_vector_slots(rows_per_wave * 100, lanes, 0), 1) << lanes;
  }
  EXPECT_EQ(lr::csr_vector_slots(8000000, 8, wave), lr::csr_vector_stacked_slots);  // lap7 200^3
  EXPECT_EQ(lr::csr_vector_slots(4039, 32, wave), 1);                              // ego-Facebook
}

TEST(layouts_csr, VectorLanesOwnEveryEntryOnce)
{
  // Short rows and rows of at most 32 under 32 lanes: lane = offset in the row modulo the lanes.
  EXPECT_EQ(lr::csr_vector_lane_of(5, 5, 9, 4), 0);
  EXPECT_EQ(lr::csr_vector_lane_of(8, 5, 9, 4), 3);
  EXPECT_EQ(lr::csr_vector_lane_of(36, 5, 37, 32), 31);
  // Longer rows under 32 lanes start at the aligned index below the row start: lane = index mod 32.
  EXPECT_EQ(lr::csr_vector_lane_of(5, 5, 38, 32), 5);
  EXPECT_EQ(lr::csr_vector_lane_of(32, 5, 38, 32), 0);
  EXPECT_EQ(lr::csr_vector_lane_of(37, 5, 38, 32), 5);
  // Every lane gets ceil or floor of len / lanes entries.
  for (int lanes : lr::csr_vector_lane_set) {
    for (size_type begin : {0, 3, 31, 32, 33}) {
      for (size_type len : {0, 1, 2, 31, 32, 33, 64, 65, 100}) {
        std::vector<int> count(32, 0);
        for (size_type k = begin; k < begin + len; ++k) ++count[lr::csr_vector_lane_of(k, begin, begin + len, lanes)];
        int total = 0;
        for (int l = 0; l < 32; ++l) {
          if (l >= lanes) {
            EXPECT_EQ(count[l], 0);
          }
          EXPECT_LE(count[l], (len + lanes - 1) / lanes + (lanes == 32 && len > 32 ? 1 : 0));
          total += count[l];
        }
        EXPECT_EQ(total, len) << "lanes " << lanes << " begin " << begin << " len " << len;
      }
    }
  }
}

// 3 x 4 with an empty row: exact results (small integers), every layout.
TEST(layouts_csr, HandCheckedThreeByFour)
{
  aijp::csr_matrix<double> a;
  a.rows = 3;
  a.cols = 4;
  a.row_ptr = {0, 3, 3, 5};
  a.col_idx = {0, 2, 3, 1, 3};
  a.values = {1, 2, 3, 4, 5};
  const std::vector<double> x = {1, 2, 3, 4};
  const std::vector<double> want = {1 + 6 + 12, 0, 8 + 20};  // y = A x
  const auto v = a.view();
  std::vector<double> y(3, std::numeric_limits<double>::quiet_NaN());
  lr::csr_scalar_spmv(v, 1.0, x.data(), 0.0, y.data());
  EXPECT_EQ(y, want);
  for (int lanes : lr::csr_vector_lane_set) {
    y.assign(3, std::numeric_limits<double>::quiet_NaN());
    lr::csr_vector_spmv(v, lanes, 1.0, x.data(), 0.0, y.data());
    EXPECT_EQ(y, want) << lanes << " lanes";
  }
  const auto rows = lr::coo_row_indices(a.rows, a.nnz(), a.row_ptr.data());
  EXPECT_EQ(rows, (std::vector<index_type>{0, 0, 0, 2, 2}));
  y.assign(3, std::numeric_limits<double>::quiet_NaN());
  lr::coo_spmv(a.rows, a.nnz(), rows.data(), a.col_idx.data(), a.values.data(), 1.0, x.data(), 0.0, y.data());
  EXPECT_EQ(y, want);
  // y = 2 A x - y with y = (1, 1, 1)
  const std::vector<double> want2 = {2 * 19 - 1, -1, 2 * 28 - 1};
  y.assign(3, 1.0);
  lr::csr_scalar_spmv(v, 2.0, x.data(), -1.0, y.data());
  EXPECT_EQ(y, want2);
  y.assign(3, 1.0);
  lr::csr_vector_spmv(v, 4, 2.0, x.data(), -1.0, y.data());
  EXPECT_EQ(y, want2);
  y.assign(3, 1.0);
  lr::coo_spmv(a.rows, a.nnz(), rows.data(), a.col_idx.data(), a.values.data(), 2.0, x.data(), -1.0, y.data());
  EXPECT_EQ(y, want2);
}

TEST(layouts_csr, CooRowIndicesOnEdgeCases)
{
  for (const auto& e : aijp::test::edge_cases()) check_row_indices(e.a, e.name);
}

TEST(layouts_csr, EveryLayoutOnEdgeCases)
{
  for (const auto& e : aijp::test::edge_cases()) {
    SCOPED_TRACE(e.name);
    check_layouts<double>(e.a, e.name);
    check_layouts<float>(e.a, e.name);
  }
}

// Rows around the 32-lane alignment: lengths 0..100 starting at every offset modulo 32.
TEST(layouts_csr, EveryLayoutOnRowsAroundTheAlignedWalk)
{
  aijp::csr_matrix<double> a;
  a.rows = 303;
  a.cols = 128;
  const auto vals = aijp::test::random_vector(a.rows * 101, 7);
  for (size_type r = 0; r < a.rows; ++r) {
    const size_type len = (r * 37) % 101;
    for (size_type k = 0; k < len; ++k) {
      a.col_idx.push_back(static_cast<index_type>((r + 3 * k) % a.cols));
      a.values.push_back(vals[a.col_idx.size()]);
    }
    a.row_ptr.push_back(static_cast<index_type>(a.col_idx.size()));
  }
  check_layouts<double>(a, "aligned_walk");
  check_layouts<float>(a, "aligned_walk");
}

TEST(layouts_csr, EveryLayoutOnSharedMatrices)
{
  // Small and square, rectangular, power-law rows, dense rows (the 32-lane aligned walk), a structural one.
  for (const std::string name : {"bcsstk02", "lp_e226", "email-Eu-core", "mbeacxc", "bcsstk13", "delaunay_n15"}) {
    SCOPED_TRACE(name);
    const auto a = aijp::test::load_shared(name);
    check_row_indices(a, name);
    check_layouts<double>(a, name);
    check_layouts<float>(a, name);
  }
}

}  // namespace
