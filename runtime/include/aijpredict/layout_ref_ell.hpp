// Host references of the ELLPACK family: ELL, ELLPACK-R, PELLR, JAD and HYB built on the host from a CSR
// matrix with the same arrays the device formats hold (kernels/src/formats/ell.cu, jad.cu, hyb.cu), and
// products that walk those arrays the way the device kernels do. They are the oracles that pin the layouts
// down in tests (hand-checked arrays on tiny matrices, products against aijp::reference_spmv, iteration
// counts against row_stats); header-only host C++, no CUDA.
//
// Conventions shared with the device code:
// - Padded layouts are column-major: slot j of stored row i at j * rows + i (64-bit offsets). A stored row
//   holds the first min(len, width) entries of its matrix row in CSR order. Padding is column 0, value 0
//   (ELLPACK-R and PELLR never read their padding; the device leaves it unwritten).
// - The length sort is stable and decreasing: rows of equal length keep their natural order.
// - Products accumulate each row in CSR order starting from 0, then y = alpha sum (+ beta y); for
//   beta == 0, y is not read.
#pragma once

#include <aijpredict/csr.hpp>
#include <aijpredict/error.hpp>
#include <aijpredict/stats.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

namespace aijp::layout_ref {

/// Slots whose loads the ELL family's SpMV kernel issues together (kernels/src/formats/ell_common.cuh, ell_spmv):
/// a row of n slots takes ceil(n / ell_chunk) dependent rounds (the cost models count the chain so).
constexpr int ell_chunk = 4;

/// ELL / ELLPACK-R / PELLR / the ELL part of HYB: `rows` stored rows x `width` slots, column-major.
template <typename Value>
struct ell_layout {
  size_type rows = 0;
  size_type cols = 0;
  index_type width = 0;
  std::vector<index_type> col;      ///< rows * width, col[j * rows + i]
  std::vector<Value> val;           ///< rows * width
  std::vector<index_type> row_len;  ///< ELLR, PELLR: stored entries of stored row i (empty for plain ELL)
  std::vector<index_type> perm;     ///< PELLR: matrix row of stored row i (empty: identity)

  size_type slot(index_type j, size_type i) const { return static_cast<size_type>(j) * rows + i; }
};

/// JAD: rows sorted by decreasing length; diagonal k = entry k of every sorted row longer than k.
template <typename Value>
struct jad_layout {
  size_type rows = 0;
  size_type cols = 0;
  std::vector<index_type> perm;    ///< matrix row of sorted row i
  std::vector<index_type> jd_ptr;  ///< K + 1 entries: diagonal k is [jd_ptr[k], jd_ptr[k+1]); jd_ptr[K] = nnz
  std::vector<index_type> col;     ///< nnz, entry k of sorted row i at jd_ptr[k] + i
  std::vector<Value> val;

  index_type diagonals() const { return static_cast<index_type>(jd_ptr.size()) - 1; }
};

/// HYB: ELL part of width K (padded, walked in full) plus COO entries sorted by row.
template <typename Value>
struct hyb_layout {
  ell_layout<Value> ell;
  std::vector<index_type> coo_row;
  std::vector<index_type> coo_col;
  std::vector<Value> coo_val;
};

/// Length of row r of a CSR matrix.
template <typename Value>
index_type row_length(const csr_view<Value>& a, size_type r)
{
  return a.row_ptr[r + 1] - a.row_ptr[r];
}

/// Longest row (0 for no rows).
template <typename Value>
index_type max_row_length(const csr_view<Value>& a)
{
  index_type m = 0;
  for (size_type r = 0; r < a.rows; ++r) m = std::max(m, row_length(a, r));
  return m;
}

/// Rows by decreasing length, stable (the device's CUB radix sort order): perm[i] = matrix row of sorted row i.
template <typename Value>
std::vector<index_type> sort_rows_by_length(const csr_view<Value>& a)
{
  std::vector<index_type> perm(static_cast<size_t>(a.rows));
  std::iota(perm.begin(), perm.end(), index_type(0));
  std::stable_sort(perm.begin(), perm.end(),
                   [&](index_type p, index_type q) { return row_length(a, p) > row_length(a, q); });
  return perm;
}

/// Eq. 1 of the PELLR paper: sum over groups of `warp` consecutive stored rows of the longest one, for the
/// row lengths in the order a thread-per-row kernel walks them.
inline size_type n_iter(const std::vector<index_type>& lengths_in_kernel_order, int warp = stats_warp_size)
{
  size_type total = 0;
  for (size_t w = 0; w < lengths_in_kernel_order.size(); w += static_cast<size_t>(warp)) {
    const size_t end = std::min(lengths_in_kernel_order.size(), w + static_cast<size_t>(warp));
    total += *std::max_element(lengths_in_kernel_order.begin() + static_cast<std::ptrdiff_t>(w),
                               lengths_in_kernel_order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return total;
}

namespace detail {

// Padded layout over the stored rows `order` (matrix row of each stored row), first min(len, width) entries.
template <typename Value>
ell_layout<Value> build_padded(const csr_view<Value>& a, index_type width, const std::vector<index_type>& order,
                               bool with_lengths)
{
  AIJP_ENSURE(width >= 0, bad_input, "ELL width must be non-negative");
  AIJP_ENSURE(width == 0 || a.cols > 0, bad_input, "padding reads x[0]: a padded layout needs a column");
  ell_layout<Value> e;
  e.rows = a.rows;
  e.cols = a.cols;
  e.width = width;
  const size_t slots = static_cast<size_t>(a.rows) * static_cast<size_t>(width);
  e.col.assign(slots, 0);
  e.val.assign(slots, Value(0));
  if (with_lengths) e.row_len.assign(static_cast<size_t>(a.rows), 0);
  for (size_type i = 0; i < a.rows; ++i) {
    const size_type r = order.empty() ? i : order[static_cast<size_t>(i)];
    const index_type begin = a.row_ptr[r];
    const index_type stored = std::min(row_length(a, r), width);
    if (with_lengths) e.row_len[static_cast<size_t>(i)] = stored;
    for (index_type j = 0; j < stored; ++j) {
      e.col[static_cast<size_t>(e.slot(j, i))] = a.col_idx[begin + j];
      e.val[static_cast<size_t>(e.slot(j, i))] = a.values[begin + j];
    }
  }
  return e;
}

template <typename Value>
void store(Value alpha, Value sum, Value beta, Value* y, size_type r)
{
  y[r] = beta == Value(0) ? alpha * sum : alpha * sum + beta * y[r];
}

}  // namespace detail

/// ELLPACK: width = the longest row; every row padded to it.
template <typename Value>
ell_layout<Value> build_ell(const csr_view<Value>& a)
{
  return detail::build_padded(a, max_row_length(a), {}, false);
}

/// ELLPACK-R: ELL plus the row lengths.
template <typename Value>
ell_layout<Value> build_ellr(const csr_view<Value>& a)
{
  return detail::build_padded(a, max_row_length(a), {}, true);
}

/// PELLR: ELLPACK-R over the rows sorted by decreasing length, with the permutation.
template <typename Value>
ell_layout<Value> build_pellr(const csr_view<Value>& a)
{
  auto perm = sort_rows_by_length(a);
  auto e = detail::build_padded(a, max_row_length(a), perm, true);
  e.perm = std::move(perm);
  return e;
}

/// JAD of the rows sorted by decreasing length.
template <typename Value>
jad_layout<Value> build_jad(const csr_view<Value>& a)
{
  jad_layout<Value> j;
  j.rows = a.rows;
  j.cols = a.cols;
  j.perm = sort_rows_by_length(a);
  const index_type k_max = max_row_length(a);
  j.jd_ptr.assign(static_cast<size_t>(k_max) + 1, 0);
  size_type longer = a.rows;  // sorted rows with more than k entries: a prefix of the sorted order
  for (index_type k = 0; k < k_max; ++k) {
    while (longer > 0 && row_length(a, j.perm[static_cast<size_t>(longer) - 1]) <= k) --longer;
    j.jd_ptr[static_cast<size_t>(k) + 1] = j.jd_ptr[static_cast<size_t>(k)] + static_cast<index_type>(longer);
  }
  j.col.assign(static_cast<size_t>(a.nnz), 0);
  j.val.assign(static_cast<size_t>(a.nnz), Value(0));
  for (size_type i = 0; i < a.rows; ++i) {
    const index_type r = j.perm[static_cast<size_t>(i)];
    for (index_type k = 0; k < row_length(a, r); ++k) {
      const size_t dst = static_cast<size_t>(j.jd_ptr[static_cast<size_t>(k)] + i);
      j.col[dst] = a.col_idx[a.row_ptr[r] + k];
      j.val[dst] = a.values[a.row_ptr[r] + k];
    }
  }
  return j;
}

/// HYB with ELL width `width` (row_stats::hyb_ell_width for the Bell-Garland split).
template <typename Value>
hyb_layout<Value> build_hyb(const csr_view<Value>& a, index_type width)
{
  hyb_layout<Value> h;
  h.ell = detail::build_padded(a, width, {}, false);
  for (size_type r = 0; r < a.rows; ++r) {
    for (index_type k = a.row_ptr[r] + width; k < a.row_ptr[r + 1]; ++k) {
      h.coo_row.push_back(static_cast<index_type>(r));
      h.coo_col.push_back(a.col_idx[k]);
      h.coo_val.push_back(a.values[k]);
    }
  }
  return h;
}

/// y = alpha A x + beta y walking a padded layout: every slot for ELL (row_len empty), the row's own length
/// for ELLPACK-R and PELLR; results go to y[perm[i]] when permuted.
template <typename Value>
void spmv(const ell_layout<Value>& e, Value alpha, const Value* x, Value beta, Value* y)
{
  for (size_type i = 0; i < e.rows; ++i) {
    const index_type n = e.row_len.empty() ? e.width : e.row_len[static_cast<size_t>(i)];
    Value sum = 0;
    for (index_type j = 0; j < n; ++j) {
      const size_t s = static_cast<size_t>(e.slot(j, i));
      sum += e.val[s] * x[e.col[s]];
    }
    detail::store(alpha, sum, beta, y, e.perm.empty() ? i : e.perm[static_cast<size_t>(i)]);
  }
}

/// y = alpha A x + beta y walking the jagged diagonals: sorted row i reads entry k at jd_ptr[k] + i while
/// diagonal k has more than i entries.
template <typename Value>
void spmv(const jad_layout<Value>& j, Value alpha, const Value* x, Value beta, Value* y)
{
  for (size_type i = 0; i < j.rows; ++i) {
    Value sum = 0;
    for (index_type k = 0; k < j.diagonals() && j.jd_ptr[static_cast<size_t>(k) + 1] - j.jd_ptr[static_cast<size_t>(k)] > i;
         ++k) {
      const size_t p = static_cast<size_t>(j.jd_ptr[static_cast<size_t>(k)] + i);
      sum += j.val[p] * x[j.col[p]];
    }
    detail::store(alpha, sum, beta, y, j.perm[static_cast<size_t>(i)]);
  }
}

/// y = alpha A x + beta y for HYB in the device's two steps: the ELL part writes y with the beta semantics,
/// then every COO entry adds alpha a x (the device reduces a row's COO products before adding them; the
/// sum differs from this one only in rounding).
template <typename Value>
void spmv(const hyb_layout<Value>& h, Value alpha, const Value* x, Value beta, Value* y)
{
  spmv(h.ell, alpha, x, beta, y);
  for (size_t e = 0; e < h.coo_row.size(); ++e) y[h.coo_row[e]] += alpha * (h.coo_val[e] * x[h.coo_col[e]]);
}

}  // namespace aijp::layout_ref
