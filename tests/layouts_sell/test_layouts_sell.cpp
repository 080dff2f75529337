// Host tests of the sliced-ELL layout references (aijpredict/layout_ref_sell.hpp): SELL-C-sigma with the
// window sort and SELL-delta16, hand-checked arrays on a 6 x 6 matrix, products against aijp::reference_spmv
// on the edge cases and every shared real matrix, padded sizes against the row statistics (N_iter), and the
// cases delta16 must reject. The device kernels are checked against reference_spmv in tests/gpu.
#include <aijpredict/layout_ref_sell.hpp>
#include <aijpredict/reference.hpp>
#include <aijpredict/stats.hpp>

#include "test_checks.hpp"
#include "test_matrices.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using aijp::test::cast;
using aijp::test::expect_close;

namespace lr = aijp::layout_ref;
using aijp::index_type;
using aijp::size_type;

aijp::csr_matrix<double> from_rows(size_type rows, size_type cols, const std::vector<std::vector<std::pair<int, double>>>& r)
{
  aijp::csr_matrix<double> a;
  a.rows = rows;
  a.cols = cols;
  for (const auto& row : r) {
    for (const auto& [c, v] : row) {
      a.col_idx.push_back(c);
      a.values.push_back(v);
    }
    a.row_ptr.push_back(static_cast<index_type>(a.col_idx.size()));
  }
  return a;
}

// y = A x with NaN planted in y (beta = 0 must not read it), then y = 2 A x + y / 2, for one layout product.
template <typename T, typename Spmv>
void check_product(const aijp::csr_matrix<T>& a, Spmv spmv, const std::string& what)
{
  const auto xd = aijp::test::random_vector(a.cols, 21);
  const auto yd = aijp::test::random_vector(a.rows, 22);
  const std::vector<T> x(xd.begin(), xd.end()), y0(yd.begin(), yd.end());

  std::vector<T> got(static_cast<size_t>(a.rows), std::numeric_limits<T>::quiet_NaN());
  std::vector<T> want(static_cast<size_t>(a.rows));
  spmv(T(1), x.data(), T(0), got.data());
  aijp::reference_spmv(a.view(), T(1), x.data(), T(0), want.data());
  expect_close(got, want, aijp::spmv_error_bounds(a.view(), T(1), x.data(), T(0), want.data()), what + " y=Ax");

  got = y0;
  want = y0;
  spmv(T(2), x.data(), T(0.5), got.data());
  aijp::reference_spmv(a.view(), T(2), x.data(), T(0.5), want.data());
  expect_close(got, want, aijp::spmv_error_bounds(a.view(), T(2), x.data(), T(0.5), y0.data()), what + " y=2Ax+y/2");
}

template <typename T>
void check_sell_sigma(const aijp::csr_matrix<double>& a64, size_type sigma, const std::string& name)
{
  const auto a = cast<T>(a64);
  const auto l = lr::build_sell_sigma(a.view(), sigma);
  const std::string what = name + " / sell_sigma(" + std::to_string(sigma) + ")" + (sizeof(T) == 8 ? " / double" : " / float");
  check_product(a, [&](T alpha, const T* x, T beta, T* y) { lr::sell_sigma_spmv(l, alpha, x, beta, y); }, what);
}

template <typename T>
void check_sell_delta16(const aijp::csr_matrix<double>& a64, const std::string& name)
{
  const auto a = cast<T>(a64);
  const auto l = lr::build_sell_delta16(a.view());
  const std::string what = name + " / sell_delta16" + (sizeof(T) == 8 ? " / double" : " / float");
  check_product(a, [&](T alpha, const T* x, T beta, T* y) { lr::sell_delta16_spmv(l, alpha, x, beta, y); }, what);
}

// Structural properties of a SELL-C-sigma layout: perm is a permutation that keeps every row inside its
// window, lengths do not increase inside a window, and the padded size lies between the globally sorted
// and the natural-order bounds (sorting inside slice-aligned windows cannot do worse than no sort).
void check_sell_sigma_structure(const aijp::csr_matrix<double>& a, size_type sigma, const std::string& name)
{
  const auto l = lr::build_sell_sigma(a.view(), sigma);
  const auto stats = aijp::compute_row_stats(a.view());
  const auto len = [&](index_type r) { return a.row_ptr[r + 1] - a.row_ptr[r]; };
  std::vector<char> seen(static_cast<size_t>(a.rows), 0);
  for (size_type i = 0; i < a.rows; ++i) {
    const index_type r = l.perm[static_cast<size_t>(i)];
    ASSERT_TRUE(r >= 0 && r < a.rows && !seen[static_cast<size_t>(r)]) << name << ": perm is not a permutation at " << i;
    seen[static_cast<size_t>(r)] = 1;
    EXPECT_EQ(r / sigma, i / sigma) << name << ": row " << r << " left its window";
    if (i % sigma != 0) {
      EXPECT_GE(len(l.perm[static_cast<size_t>(i) - 1]), len(r)) << name << ": lengths increase at " << i;
    }
  }
  EXPECT_EQ(l.permuted, stats.min_len != stats.max_len) << name;
  EXPECT_GE(l.padded_entries(), lr::sell_slice_height * stats.n_iter_sorted) << name;
  EXPECT_LE(l.padded_entries(), lr::sell_slice_height * stats.n_iter_natural) << name;
}

// The 6 x 6 matrix of the hand-checked layouts (lengths 1, 3, 0, 2, 2, 1).
aijp::csr_matrix<double> small_matrix()
{
  return from_rows(6, 6,
                   {{{0, 1.0}},
                    {{1, 2.0}, {2, 3.0}, {5, 4.0}},
                    {},
                    {{0, 5.0}, {3, 6.0}},
                    {{2, 7.0}, {4, 8.0}},
                    {{5, 9.0}}});
}

TEST(layouts_sell, SigmaHandCheckedSmallMatrix)
{
  // sigma = 4, C = 2: window {0,1,2,3} sorts to 1 (3), 3 (2), 0 (1), 2 (0); window {4,5} stays 4 (2), 5 (1).
  // Slices: {1,3} width 3, {0,2} width 1, {4,5} width 2.
  const auto a = small_matrix();
  const auto l = lr::build_sell_sigma(a.view(), 4, 2);
  EXPECT_TRUE(l.permuted);
  EXPECT_EQ(l.perm, (std::vector<index_type>{1, 3, 0, 2, 4, 5}));
  EXPECT_EQ(l.slice_ptr, (std::vector<size_type>{0, 6, 8, 12}));
  EXPECT_EQ(l.col, (std::vector<index_type>{1, 0, 2, 3, 5, -1, 0, -1, 2, 5, 4, -1}));
  EXPECT_EQ(l.val, (std::vector<double>{2, 5, 3, 6, 4, 0, 1, 0, 7, 9, 8, 0}));
  const std::vector<double> x{1, 2, 3, 4, 5, 6};
  std::vector<double> y(6, std::numeric_limits<double>::quiet_NaN());
  lr::sell_sigma_spmv(l, 1.0, x.data(), 0.0, y.data());
  EXPECT_EQ(y, (std::vector<double>{1, 37, 0, 29, 61, 54}));
  lr::sell_sigma_spmv(l, 2.0, x.data(), -1.0, y.data());
  EXPECT_EQ(y, (std::vector<double>{1, 37, 0, 29, 61, 54}));
}

TEST(layouts_sell, SigmaPaddingNeverReadsX)
{
  // Padding is skipped: an Inf in x[0] reaches only the rows that hold column 0 (padding with column 0 and
  // value 0 would turn rows 2 and 5, which have padding, into 0 * Inf = NaN).
  const auto a = small_matrix();
  const auto l = lr::build_sell_sigma(a.view(), 4, 2);
  const std::vector<double> x{std::numeric_limits<double>::infinity(), 2, 3, 4, 5, 6};
  std::vector<double> y(6);
  lr::sell_sigma_spmv(l, 1.0, x.data(), 0.0, y.data());
  EXPECT_EQ(y[1], 37.0);
  EXPECT_EQ(y[2], 0.0);
  EXPECT_EQ(y[4], 61.0);
  EXPECT_EQ(y[5], 54.0);
  EXPECT_TRUE(std::isinf(y[0]) && std::isinf(y[3]));
}

TEST(layouts_sell, SigmaEqualRowLengthsAreNotSorted)
{
  // Tridiagonal-like: every row holds 2 entries, so perm is the identity and no padding exists in real rows.
  std::vector<std::vector<std::pair<int, double>>> rows;
  for (int r = 0; r < 70; ++r) rows.push_back({{r, 1.0 + r}, {(r + 1) % 70, -1.0}});
  const auto a = from_rows(70, 70, rows);
  const auto l = lr::build_sell_sigma(a.view());
  EXPECT_FALSE(l.permuted);
  for (size_type i = 0; i < a.rows; ++i) EXPECT_EQ(l.perm[static_cast<size_t>(i)], i);
  EXPECT_EQ(l.padded_entries(), 3 * 32 * 2);  // three slices of 32 rows (the last one padded) x width 2
  check_sell_sigma<double>(a, lr::sell_sigma_window, "uniform");
}

TEST(layouts_sell, SigmaWindowsKeepRowsLocal)
{
  // 10000 rows with lengths cycling 0..9: three windows of 4096 (the last partial).
  std::vector<std::vector<std::pair<int, double>>> rows(10000);
  for (int r = 0; r < 10000; ++r) {
    for (int k = 0; k < r % 10; ++k) rows[static_cast<size_t>(r)].push_back({(r + 97 * k) % 10000, 0.5 + k});
    std::sort(rows[static_cast<size_t>(r)].begin(), rows[static_cast<size_t>(r)].end());
  }
  const auto a = from_rows(10000, 10000, rows);
  check_sell_sigma_structure(a, lr::sell_sigma_window, "cycling lengths");
  check_sell_sigma<double>(a, lr::sell_sigma_window, "cycling lengths");
  check_sell_sigma<float>(a, lr::sell_sigma_window, "cycling lengths");
}

TEST(layouts_sell, SigmaEdgeCases)
{
  for (const auto& e : aijp::test::edge_cases()) {
    SCOPED_TRACE(e.name);
    check_sell_sigma_structure(e.a, lr::sell_sigma_window, e.name);
    for (size_type sigma : {size_type(1), size_type(64), lr::sell_sigma_window}) {
      check_sell_sigma<double>(e.a, sigma, e.name);
      check_sell_sigma<float>(e.a, sigma, e.name);
    }
  }
}

TEST(layouts_sell, SigmaEverySharedRealMatrix)
{
  const auto names = aijp::test::real_matrix_names();
  ASSERT_GE(names.size(), 40u);
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    const auto a = aijp::test::load_shared(n);
    check_sell_sigma_structure(a, lr::sell_sigma_window, n);
    check_sell_sigma<double>(a, lr::sell_sigma_window, n);
    check_sell_sigma<float>(a, lr::sell_sigma_window, n);
  }
}

// The padded size of SELL-32-sigma is 32 x N_iter sorted with a global window and 32 x N_iter natural
// without sorting (sigma = 1): the quantities predict.cpp charges for sell_sigma and sell.
TEST(layouts_sell, SigmaPaddedSizeMatchesRowStatistics)
{
  auto check = [](const aijp::csr_matrix<double>& a, const std::string& name) {
    const auto stats = aijp::compute_row_stats(a.view());
    const auto global = lr::build_sell_sigma(a.view(), std::max<size_type>(a.rows, 1));
    EXPECT_EQ(global.padded_entries(), lr::sell_slice_height * stats.n_iter_sorted) << name;
    const auto natural = lr::build_sell_sigma(a.view(), 1);
    EXPECT_EQ(natural.padded_entries(), lr::sell_slice_height * stats.n_iter_natural) << name;
  };
  for (const auto& e : aijp::test::edge_cases()) check(e.a, e.name);
  for (const auto& n : aijp::test::real_matrix_names()) check(aijp::test::load_shared(n), n);
}

TEST(layouts_sell, Delta16HandCheckedSmallMatrix)
{
  // C = 2, natural order: slices {0,1} width 3, {2,3} width 2, {4,5} width 2.
  const auto a = small_matrix();
  const auto l = lr::build_sell_delta16(a.view(), 2);
  EXPECT_EQ(l.slice_ptr, (std::vector<size_type>{0, 6, 10, 14}));
  EXPECT_EQ(l.first_col, (std::vector<index_type>{0, 1, -1, 0, 2, 5}));
  EXPECT_EQ(l.delta, (std::vector<std::uint16_t>{0, 0, 0, 1, 0, 3, 0, 0, 0, 3, 0, 0, 2, 0}));
  EXPECT_EQ(l.val, (std::vector<double>{1, 2, 0, 3, 0, 4, 0, 5, 0, 6, 7, 9, 8, 0}));
  const std::vector<double> x{1, 2, 3, 4, 5, 6};
  std::vector<double> y(6, std::numeric_limits<double>::quiet_NaN());
  lr::sell_delta16_spmv(l, 1.0, x.data(), 0.0, y.data());
  EXPECT_EQ(y, (std::vector<double>{1, 37, 0, 29, 61, 54}));
}

TEST(layouts_sell, Delta16EmptyRowReadsNothing)
{
  const auto a = small_matrix();
  const auto l = lr::build_sell_delta16(a.view());
  std::vector<double> x(6, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> y(6, 7.0);
  lr::sell_delta16_spmv(l, 1.0, x.data(), 0.0, y.data());
  EXPECT_EQ(y[2], 0.0);  // row 2 is empty: 0, not NaN
  EXPECT_TRUE(std::isnan(y[0]));
}

TEST(layouts_sell, Delta16LargestDeltaAndDuplicateColumns)
{
  // A step of exactly 65535 is encoded; a repeated column (step 0) is summed like CSR does.
  const auto a = from_rows(3, 70000, {{{0, 1.0}, {65535, 2.0}, {65535, 3.0}}, {{7, 4.0}}, {{69999, 5.0}}});
  const auto l = lr::build_sell_delta16(a.view());
  std::vector<double> x(70000, 0.0);
  x[0] = 1;
  x[7] = 10;
  x[65535] = 100;
  x[69999] = 1000;
  std::vector<double> y(3);
  lr::sell_delta16_spmv(l, 1.0, x.data(), 0.0, y.data());
  EXPECT_EQ(y, (std::vector<double>{501, 40, 5000}));
}

TEST(layouts_sell, Delta16RejectsUnsortedRow)
{
  const auto a = from_rows(2, 10, {{{0, 1.0}, {1, 1.0}}, {{5, 1.0}, {3, 1.0}}});
  EXPECT_THROW(lr::build_sell_delta16(a.view()), aijp::not_supported);
}

TEST(layouts_sell, Delta16RejectsDeltaOf65536)
{
  const auto a = from_rows(2, 70000, {{{1, 1.0}}, {{3, 1.0}, {3 + 65536, 1.0}}});
  EXPECT_THROW(lr::build_sell_delta16(a.view()), aijp::not_supported);
  // The first column of a row is stored in full: a large first column alone is fine.
  const auto b = from_rows(2, 70000, {{{69999, 1.0}}, {{3, 1.0}, {3 + 65535, 1.0}}});
  EXPECT_NO_THROW(lr::build_sell_delta16(b.view()));
}

TEST(layouts_sell, Delta16EdgeCases)
{
  for (const auto& e : aijp::test::edge_cases()) {
    SCOPED_TRACE(e.name);
    check_sell_delta16<double>(e.a, e.name);
    check_sell_delta16<float>(e.a, e.name);
  }
}

TEST(layouts_sell, Delta16EverySharedRealMatrix)
{
  const auto names = aijp::test::real_matrix_names();
  ASSERT_GE(names.size(), 40u);
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    const auto a = aijp::test::load_shared(n);
    const auto stats = aijp::compute_row_stats(a.view());
    EXPECT_EQ(lr::build_sell_delta16(a.view()).padded_entries(), lr::sell_slice_height * stats.n_iter_natural) << n;
    check_sell_delta16<double>(a, n);
    check_sell_delta16<float>(a, n);
  }
}

TEST(layouts_sell, Delta16SevenPointStencilDeltasFit)
{
  // 3D 7-point Laplacian on n^3, n = 20 (the format targets n = 200): interior rows step by 1, n - 1 and
  // n^2 - n; a boundary row missing a neighbour steps by up to n^2, so every n <= 255 fits in 16 bits.
  const int n = 20;
  std::vector<std::vector<std::pair<int, double>>> rows(static_cast<size_t>(n) * n * n);
  for (int k = 0; k < n; ++k) {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < n; ++i) {
        const int r = (k * n + j) * n + i;
        auto& row = rows[static_cast<size_t>(r)];
        if (k > 0) row.push_back({r - n * n, -1.0});
        if (j > 0) row.push_back({r - n, -1.0});
        if (i > 0) row.push_back({r - 1, -1.0});
        row.push_back({r, 6.0});
        if (i < n - 1) row.push_back({r + 1, -1.0});
        if (j < n - 1) row.push_back({r + n, -1.0});
        if (k < n - 1) row.push_back({r + n * n, -1.0});
      }
    }
  }
  const auto a = from_rows(n * n * n, n * n * n, rows);
  const auto l = lr::build_sell_delta16(a.view());
  EXPECT_EQ(*std::max_element(l.delta.begin(), l.delta.end()), n * n);
  check_sell_delta16<double>(a, "laplace3d_20");
  check_sell_delta16<float>(a, "laplace3d_20");
  check_sell_sigma<double>(a, lr::sell_sigma_window, "laplace3d_20");
}

}  // namespace
