// Host tests of the ELLPACK-family layout references (aijpredict/layout_ref_ell.hpp): hand-checked arrays of
// tiny matrices, iteration counts against row_stats, and products walking each layout against
// aijp::reference_spmv on the edge cases, generated matrices and the shared real matrices.
#include <aijpredict/layout_ref_ell.hpp>
#include <aijpredict/reference.hpp>
#include <aijpredict/stats.hpp>

#include "test_checks.hpp"
#include "test_matrices.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {

using aijp::test::cast;
using aijp::test::expect_close;

using aijp::index_type;
using aijp::size_type;
namespace ref = aijp::layout_ref;

aijp::csr_matrix<double> from_rows(size_type cols, const std::vector<std::vector<std::pair<int, double>>>& rows)
{
  aijp::csr_matrix<double> a;
  a.rows = static_cast<size_type>(rows.size());
  a.cols = cols;
  for (const auto& row : rows) {
    for (const auto& [c, v] : row) {
      a.col_idx.push_back(c);
      a.values.push_back(v);
    }
    a.row_ptr.push_back(static_cast<index_type>(a.col_idx.size()));
  }
  return a;
}

// Row r has lengths[r] entries in columns (r + 3 k) mod cols, values 1 + (r + k) mod 5.
aijp::csr_matrix<double> with_lengths(const std::vector<int>& lengths, size_type cols)
{
  std::vector<std::vector<std::pair<int, double>>> rows;
  for (size_t r = 0; r < lengths.size(); ++r) {
    rows.emplace_back();
    for (int k = 0; k < lengths[r]; ++k) {
      rows.back().push_back({static_cast<int>((r + 3 * static_cast<size_t>(k)) % static_cast<size_t>(cols)),
                             1.0 + static_cast<double>((r + static_cast<size_t>(k)) % 5)});
    }
  }
  return from_rows(cols, rows);
}

//     [1 0 2 0]   lengths 2, 3, 0, 1; sorted by decreasing length (stable): rows 1, 0, 3, 2
// A = [3 4 0 5]
//     [0 0 0 0]
//     [0 0 6 0]
aijp::csr_matrix<double> four_by_four()
{
  return from_rows(4, {{{0, 1}, {2, 2}}, {{0, 3}, {1, 4}, {3, 5}}, {}, {{2, 6}}});
}

// Every layout's product against the CSR reference: y = A x into NaN-filled y (beta = 0 must not read it)
// and y = 2 A x + y0 / 2, within the dot-product error bound.
template <typename T>
void check_products(const aijp::csr_matrix<double>& a64, const std::string& name)
{
  const auto a = cast<T>(a64);
  const auto v = a.view();
  const auto xd = aijp::test::random_vector(a.cols, 21);
  const auto yd = aijp::test::random_vector(a.rows, 22);
  const std::vector<T> x(xd.begin(), xd.end()), y0(yd.begin(), yd.end());
  const auto stats = aijp::compute_row_stats(v);

  struct product {
    std::string layout;
    std::vector<T> y;
  };
  for (const auto& [alpha, beta] : {std::pair<T, T>{T(1), T(0)}, std::pair<T, T>{T(2), T(0.5)}}) {
    std::vector<T> want = y0;
    aijp::reference_spmv(v, alpha, x.data(), beta, want.data());
    const auto bound = aijp::spmv_error_bounds(v, alpha, x.data(), beta, y0.data());
    const std::vector<T> start = beta == T(0) ? std::vector<T>(y0.size(), std::numeric_limits<T>::quiet_NaN()) : y0;
    std::vector<product> got;
    const auto run = [&](const std::string& layout, const auto& l) {
      got.push_back({layout, start});
      ref::spmv(l, alpha, x.data(), beta, got.back().y.data());
    };
    run("ell", ref::build_ell(v));
    run("ellr", ref::build_ellr(v));
    run("pellr", ref::build_pellr(v));
    run("jad", ref::build_jad(v));
    run("hyb", ref::build_hyb(v, stats.hyb_ell_width));
    run("hyb_k0", ref::build_hyb(v, 0));
    if (a.cols > 0) run("hyb_k2", ref::build_hyb(v, 2));  // forced width: padding reads x[0]
    for (const auto& p : got) {
      int reported = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const double err = std::abs(static_cast<double>(p.y[i]) - static_cast<double>(want[i]));
        if (!(err <= bound[i]) && reported++ < 5) {
          ADD_FAILURE() << name << " / " << p.layout << (sizeof(T) == 8 ? " / double" : " / float") << " alpha "
                        << alpha << " beta " << beta << ": row " << i << " got " << p.y[i] << " want " << want[i];
        }
      }
    }
  }
}

// Structural invariants every layout of `a` must satisfy, and the iteration counts of Eq. 1 for the order
// each kernel walks: natural for ELLPACK-R, sorted for PELLR and JAD.
void check_structure(const aijp::csr_matrix<double>& a, const std::string& name)
{
  SCOPED_TRACE(name);
  const auto v = a.view();
  const auto s = aijp::compute_row_stats(v);

  const auto ell = ref::build_ell(v);
  EXPECT_EQ(ell.width, s.max_len);
  EXPECT_EQ(ell.col.size(), static_cast<size_t>(a.rows) * static_cast<size_t>(s.max_len));

  const auto ellr = ref::build_ellr(v);
  EXPECT_EQ(ref::n_iter(ellr.row_len), s.n_iter_natural);

  const auto pellr = ref::build_pellr(v);
  EXPECT_EQ(ref::n_iter(pellr.row_len), s.n_iter_sorted);
  EXPECT_TRUE(std::is_sorted(pellr.row_len.rbegin(), pellr.row_len.rend())) << "lengths must not increase";
  std::vector<index_type> seen(static_cast<size_t>(a.rows), 0);
  for (size_t i = 0; i < pellr.perm.size(); ++i) {
    ++seen[static_cast<size_t>(pellr.perm[i])];
    EXPECT_EQ(pellr.row_len[i], ref::row_length(v, pellr.perm[i]));
    // stable: equal lengths keep the natural order
    if (i > 0 && pellr.row_len[i] == pellr.row_len[i - 1]) {
      EXPECT_LT(pellr.perm[i - 1], pellr.perm[i]);
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), a.rows) << "perm is not a permutation";

  const auto jad = ref::build_jad(v);
  EXPECT_EQ(jad.perm, pellr.perm);
  ASSERT_EQ(jad.diagonals(), s.max_len);
  EXPECT_EQ(jad.jd_ptr.front(), 0);
  EXPECT_EQ(jad.jd_ptr.back(), a.nnz());
  // Diagonal k holds one entry of each sorted row longer than k, so its size is non-increasing in k and
  // sorted row i's length is the number of diagonals with more than i entries.
  for (index_type k = 0; k < jad.diagonals(); ++k) {
    const index_type size = jad.jd_ptr[static_cast<size_t>(k) + 1] - jad.jd_ptr[static_cast<size_t>(k)];
    EXPECT_EQ(size, std::count_if(pellr.row_len.begin(), pellr.row_len.end(), [&](index_type l) { return l > k; }));
  }

  const auto hyb = ref::build_hyb(v, s.hyb_ell_width);
  EXPECT_EQ(hyb.ell.width, s.hyb_ell_width);
  EXPECT_EQ(static_cast<size_type>(hyb.coo_row.size()), s.hyb_coo_nnz);
  EXPECT_TRUE(std::is_sorted(hyb.coo_row.begin(), hyb.coo_row.end())) << "COO part must be sorted by row";
}

TEST(layouts_ell, HandCheckedFourByFour)
{
  const auto a = four_by_four();
  const auto v = a.view();
  const std::vector<double> x{1, 2, 3, 4};
  const std::vector<double> want{7, 31, 0, 18};                  // A x, exact in binary
  const std::vector<double> want_scaled{2 * 7 + 3, 2 * 31 + 3, 3, 2 * 18 + 3};  // 2 A x + 3 y0, y0 = 1

  const auto ell = ref::build_ell(v);
  EXPECT_EQ(ell.width, 3);
  EXPECT_EQ(ell.col, (std::vector<index_type>{0, 0, 0, 2, /**/ 2, 1, 0, 0, /**/ 0, 3, 0, 0}));
  EXPECT_EQ(ell.val, (std::vector<double>{1, 3, 0, 6, /**/ 2, 4, 0, 0, /**/ 0, 5, 0, 0}));
  EXPECT_TRUE(ell.row_len.empty());
  EXPECT_TRUE(ell.perm.empty());

  const auto ellr = ref::build_ellr(v);
  EXPECT_EQ(ellr.col, ell.col);
  EXPECT_EQ(ellr.val, ell.val);
  EXPECT_EQ(ellr.row_len, (std::vector<index_type>{2, 3, 0, 1}));

  const auto pellr = ref::build_pellr(v);
  EXPECT_EQ(pellr.perm, (std::vector<index_type>{1, 0, 3, 2}));
  EXPECT_EQ(pellr.row_len, (std::vector<index_type>{3, 2, 1, 0}));
  EXPECT_EQ(pellr.col, (std::vector<index_type>{0, 0, 2, 0, /**/ 1, 2, 0, 0, /**/ 3, 0, 0, 0}));
  EXPECT_EQ(pellr.val, (std::vector<double>{3, 1, 6, 0, /**/ 4, 2, 0, 0, /**/ 5, 0, 0, 0}));

  // Diagonal 0: first entries of sorted rows 0..2 (rows 1, 0, 3); diagonal 1: second entries of rows 1, 0;
  // diagonal 2: third entry of row 1.
  const auto jad = ref::build_jad(v);
  EXPECT_EQ(jad.perm, (std::vector<index_type>{1, 0, 3, 2}));
  EXPECT_EQ(jad.jd_ptr, (std::vector<index_type>{0, 3, 5, 6}));
  EXPECT_EQ(jad.col, (std::vector<index_type>{0, 0, 2, /**/ 1, 2, /**/ 3}));
  EXPECT_EQ(jad.val, (std::vector<double>{3, 1, 6, /**/ 4, 2, /**/ 5}));

  const auto hyb = ref::build_hyb(v, 1);
  EXPECT_EQ(hyb.ell.col, (std::vector<index_type>{0, 0, 0, 2}));
  EXPECT_EQ(hyb.ell.val, (std::vector<double>{1, 3, 0, 6}));
  EXPECT_EQ(hyb.coo_row, (std::vector<index_type>{0, 1, 1}));
  EXPECT_EQ(hyb.coo_col, (std::vector<index_type>{2, 1, 3}));
  EXPECT_EQ(hyb.coo_val, (std::vector<double>{2, 4, 5}));

  const auto check = [&](const auto& layout, const char* what) {
    std::vector<double> y(4, std::numeric_limits<double>::quiet_NaN());
    ref::spmv(layout, 1.0, x.data(), 0.0, y.data());
    EXPECT_EQ(y, want) << what;
    std::vector<double> y2(4, 1.0);
    ref::spmv(layout, 2.0, x.data(), 3.0, y2.data());
    EXPECT_EQ(y2, want_scaled) << what;
  };
  check(ell, "ell");
  check(ellr, "ellr");
  check(pellr, "pellr");
  check(jad, "jad");
  check(hyb, "hyb K=1");
  check(ref::build_hyb(v, 0), "hyb K=0");
  check(ref::build_hyb(v, 3), "hyb K=3");
}

TEST(layouts_ell, IterationCountsOfThePellrPaperExample)
{
  // Wang & Gu 2020, section 3, with a warp of 8 threads: ELLR needs 4 + 3 + 7 + 4 = 18 iterations in the
  // natural order. The paper's sorted lists hold one row of length 3 fewer than its natural ones (a typo);
  // sorting these lengths gives [7 4 4 4 4 4 3 3] [3 x 8] [3 2 2 2 2 2 2 2] [2 2]: 7 + 3 + 3 + 2 = 15.
  const std::vector<int> lengths{2, 3, 3, 4, 4, 4, 2, 4, 2, 3, 2, 3, 2, 3, 2, 2, 2, 2, 7, 3, 3, 3, 3, 3, 4, 3};
  const auto a = with_lengths(lengths, 8);
  EXPECT_EQ(ref::n_iter(ref::build_ellr(a.view()).row_len, 8), 18);
  EXPECT_EQ(ref::n_iter(ref::build_pellr(a.view()).row_len, 8), 15);
  // Eq. 2 is the same in both orders: the sort changes iterations, not arithmetic.
  EXPECT_EQ(aijp::compute_row_stats(a.view()).n_p, 2 * 78 - 26);
}

TEST(layouts_ell, PellrIterationsEqualSortedRowStats)
{
  // Lengths cycling through 0..63 with a long row every 997 rows: warps of mixed lengths in natural order.
  std::vector<int> lengths;
  for (int r = 0; r < 5000; ++r) lengths.push_back(r % 997 == 0 ? 700 : (r * 37) % 64);
  const auto a = with_lengths(lengths, 1000);
  const auto s = aijp::compute_row_stats(a.view());
  const auto pellr = ref::build_pellr(a.view());
  EXPECT_EQ(ref::n_iter(pellr.row_len), s.n_iter_sorted);
  EXPECT_EQ(ref::n_iter(ref::build_ellr(a.view()).row_len), s.n_iter_natural);
  EXPECT_LT(s.n_iter_sorted, s.n_iter_natural);
  check_structure(a, "cycling lengths");
  check_products<double>(a, "cycling lengths");
  check_products<float>(a, "cycling lengths");
}

TEST(layouts_ell, HybSplitsAtTheBellGarlandWidth)
{
  // 6000 rows (threshold max(4096, rows / 3) = 4096 rows): 5000 rows of length 5 and 1000 of length 40, so
  // K = 5 and the COO part holds 1000 x 35 entries.
  std::vector<int> lengths;
  for (int r = 0; r < 6000; ++r) lengths.push_back(r % 6 == 5 ? 40 : 5);
  const auto a = with_lengths(lengths, 6000);
  const auto s = aijp::compute_row_stats(a.view());
  ASSERT_EQ(s.hyb_ell_width, 5);
  ASSERT_EQ(s.hyb_coo_nnz, 1000 * 35);
  const auto hyb = ref::build_hyb(a.view(), s.hyb_ell_width);
  EXPECT_EQ(hyb.ell.val.size(), 6000u * 5u);
  EXPECT_EQ(hyb.coo_val.size(), 35000u);
  check_structure(a, "hyb split");
  check_products<double>(a, "hyb split");
  check_products<float>(a, "hyb split");
}

TEST(layouts_ell, EdgeCases)
{
  for (const auto& e : aijp::test::edge_cases()) {
    check_structure(e.a, e.name);
    check_products<double>(e.a, e.name);
    check_products<float>(e.a, e.name);
  }
}

TEST(layouts_ell, SharedRealMatrices)
{
  const std::string dir = aijp::test::matrix_dir();
  if (dir.empty() || !std::ifstream(dir + "/MANIFEST.tsv")) GTEST_SKIP() << "AIJP_MATRIX_DIR not set or empty";
  const auto names = aijp::test::real_matrix_names();
  ASSERT_FALSE(names.empty());
  for (const auto& n : names) {
    const auto a = aijp::test::load_shared(n);
    check_structure(a, n);
    check_products<double>(a, n);
    check_products<float>(a, n);
  }
}

}  // namespace
