// Host references of the sliced-ELL layouts of kernels/src/formats/sell_sigma.cu and sell_delta16.cu: each
// builds the arrays the device conversion builds and multiplies by walking them as the device kernel does,
// so tests check the layout logic (sorting windows, slice offsets, padding, delta encoding) on the host.
//
//  - SELL-C-sigma: inside each window of sigma consecutive rows the rows are sorted by decreasing length,
//    stably (the device radix sort is stable too), giving perm; layout row i (CSR row perm[i]) sits in slice
//    i / C at lane i % C; a slice is C rows tall (the last one too) and as wide as its longest row, stored
//    column-major: entry j of layout row i at slice_ptr[i / C] + C j + i % C. Padding is column -1, value 0,
//    and is skipped. With every row of the same length nothing is sorted (perm is the identity).
//    With sigma >= rows (a global sort) the padded size is C x N_iter sorted (row_stats::n_iter_sorted);
//    with sigma = 1 (no sort) it is C x N_iter natural, the SELL of kernels/src/sell.cu.
//  - SELL-delta16: the natural-order SELL-32 slices, with each row's first column kept as int32 (-1 for an
//    empty row) and slot j > 0 holding the 16-bit delta col[j] - col[j-1]; slot 0 and padding hold delta 0
//    and value 0 (padding repeats the last column and adds an exact zero). Rows with a decreasing column or
//    a jump above 65535 cannot be encoded: the builder throws aijp::not_supported, as the device does.
//
// Products accumulate each row in the kernel's order with fused multiply-adds (the device contracts
// `sum += v * x` to an fma); the final alpha/beta update may round differently from the device.
// Header-only, plain C++17 (no CUDA).
#pragma once

#include <aijpredict/csr.hpp>
#include <aijpredict/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace aijp::layout_ref {

/// Slice height of the device SELL layouts (one warp).
constexpr int sell_slice_height = 32;
/// Sorting window of the device SELL-C-sigma (kernels/src/formats/sell_sigma.cu: `sigma`).
constexpr size_type sell_sigma_window = 4096;
/// Largest column step SELL-delta16 encodes.
constexpr index_type sell_delta16_max_delta = 65535;

/// A SELL-C-sigma layout (host arrays).
template <typename Value>
struct sell_sigma_layout {
  size_type rows = 0;
  size_type cols = 0;
  int slice_height = sell_slice_height;
  bool permuted = false;              ///< false: every row has the same length and perm is the identity
  std::vector<index_type> perm;       ///< layout row i holds CSR row perm[i] (rows entries)
  std::vector<size_type> slice_ptr;   ///< slices + 1 offsets into col / val
  std::vector<index_type> col;        ///< padded, column-major per slice; padding is -1
  std::vector<Value> val;             ///< padded; padding is 0

  size_type slices() const { return static_cast<size_type>(slice_ptr.size()) - 1; }
  /// Stored entries, padding included.
  size_type padded_entries() const { return slice_ptr.back(); }
};

/// A SELL-delta16 layout (host arrays), natural row order.
template <typename Value>
struct sell_delta16_layout {
  size_type rows = 0;
  size_type cols = 0;
  int slice_height = sell_slice_height;
  std::vector<size_type> slice_ptr;    ///< slices + 1 offsets into delta / val
  std::vector<index_type> first_col;   ///< first column of each row, -1 for an empty row
  std::vector<std::uint16_t> delta;    ///< padded, column-major per slice; slot 0 and padding are 0
  std::vector<Value> val;              ///< padded; padding is 0

  size_type slices() const { return static_cast<size_type>(slice_ptr.size()) - 1; }
  size_type padded_entries() const { return slice_ptr.back(); }
};

namespace sell_detail {

inline index_type row_length(const index_type* row_ptr, size_type r) { return row_ptr[r + 1] - row_ptr[r]; }

// Slice offsets of the layout order `perm`: slice s is C x (longest row among layout rows sC .. sC+C-1).
inline std::vector<size_type> slice_offsets(const index_type* row_ptr, const std::vector<index_type>& perm, int c)
{
  const size_type rows = static_cast<size_type>(perm.size());
  const size_type slices = (rows + c - 1) / c;
  std::vector<size_type> ptr(static_cast<size_t>(slices) + 1, 0);
  for (size_type s = 0; s < slices; ++s) {
    index_type width = 0;
    for (size_type i = s * c; i < std::min<size_type>((s + 1) * c, rows); ++i) {
      width = std::max(width, row_length(row_ptr, perm[static_cast<size_t>(i)]));
    }
    ptr[static_cast<size_t>(s) + 1] = ptr[static_cast<size_t>(s)] + static_cast<size_type>(width) * c;
  }
  return ptr;
}

template <typename Value>
Value update(Value alpha, Value sum, Value beta, const Value* y, size_type r)
{
  return beta == Value(0) ? alpha * sum : alpha * sum + beta * y[r];
}

}  // namespace sell_detail

/// Builds SELL-C-sigma from a host CSR matrix: windows of `sigma` rows (sigma >= 1), slices of `c` rows.
/// The device uses sigma = sell_sigma_window and c = sell_slice_height; tests may pick small values to check
/// layouts by hand.
template <typename Value>
sell_sigma_layout<Value> build_sell_sigma(const csr_view<Value>& a, size_type sigma = sell_sigma_window,
                                          int c = sell_slice_height)
{
  AIJP_ENSURE(sigma >= 1 && c >= 1, bad_input, "build_sell_sigma: sigma and the slice height must be positive");
  sell_sigma_layout<Value> l;
  l.rows = a.rows;
  l.cols = a.cols;
  l.slice_height = c;
  l.perm.resize(static_cast<size_t>(a.rows));
  std::iota(l.perm.begin(), l.perm.end(), index_type(0));
  index_type min_len = 0, max_len = 0;
  for (size_type r = 0; r < a.rows; ++r) {
    const index_type len = sell_detail::row_length(a.row_ptr, r);
    min_len = r == 0 ? len : std::min(min_len, len);
    max_len = std::max(max_len, len);
  }
  l.permuted = min_len != max_len;
  if (l.permuted) {
    for (size_type w = 0; w < a.rows; w += sigma) {
      const auto first = l.perm.begin() + static_cast<std::ptrdiff_t>(w);
      const auto last = l.perm.begin() + static_cast<std::ptrdiff_t>(std::min(w + sigma, a.rows));
      std::stable_sort(first, last, [&](index_type p, index_type q) {
        return sell_detail::row_length(a.row_ptr, p) > sell_detail::row_length(a.row_ptr, q);
      });
    }
  }
  l.slice_ptr = sell_detail::slice_offsets(a.row_ptr, l.perm, c);
  l.col.assign(static_cast<size_t>(l.padded_entries()), index_type(-1));
  l.val.assign(static_cast<size_t>(l.padded_entries()), Value(0));
  for (size_type i = 0; i < a.rows; ++i) {
    const index_type r = l.perm[static_cast<size_t>(i)];
    const size_type base = l.slice_ptr[static_cast<size_t>(i / c)] + i % c;
    for (index_type j = 0; j < sell_detail::row_length(a.row_ptr, r); ++j) {
      const size_t k = static_cast<size_t>(base + static_cast<size_type>(j) * c);
      l.col[k] = a.col_idx[a.row_ptr[r] + j];
      l.val[k] = a.values[a.row_ptr[r] + j];
    }
  }
  return l;
}

/// y = alpha A x + beta y by walking a SELL-C-sigma layout: layout row i accumulates its slice entries in
/// column order, skips padding, and writes y[perm[i]]. beta == 0 does not read y.
template <typename Value>
void sell_sigma_spmv(const sell_sigma_layout<Value>& l, Value alpha, const Value* x, Value beta, Value* y)
{
  const int c = l.slice_height;
  for (size_type i = 0; i < l.rows; ++i) {
    const size_type s = i / c;
    const size_type width = (l.slice_ptr[static_cast<size_t>(s) + 1] - l.slice_ptr[static_cast<size_t>(s)]) / c;
    const size_type base = l.slice_ptr[static_cast<size_t>(s)] + i % c;
    Value sum = 0;
    for (size_type j = 0; j < width; ++j) {
      const size_t k = static_cast<size_t>(base + j * c);
      if (l.col[k] >= 0) sum = std::fma(l.val[k], x[l.col[k]], sum);
    }
    const size_type r = l.perm[static_cast<size_t>(i)];
    y[r] = sell_detail::update(alpha, sum, beta, y, r);
  }
}

/// Builds SELL-delta16 (natural order, slices of `c` rows). Throws aijp::not_supported when a row has a
/// decreasing column or a step above sell_delta16_max_delta.
template <typename Value>
sell_delta16_layout<Value> build_sell_delta16(const csr_view<Value>& a, int c = sell_slice_height)
{
  AIJP_ENSURE(c >= 1, bad_input, "build_sell_delta16: the slice height must be positive");
  for (size_type r = 0; r < a.rows; ++r) {
    for (index_type k = a.row_ptr[r] + 1; k < a.row_ptr[r + 1]; ++k) {
      const index_type d = a.col_idx[k] - a.col_idx[k - 1];
      if (d < 0 || d > sell_delta16_max_delta) {
        AIJP_THROW(not_supported, "sell_delta16: row " + std::to_string(r) + " has the column step " +
                                      std::to_string(d) + " (unsorted, or above 65535)");
      }
    }
  }
  sell_delta16_layout<Value> l;
  l.rows = a.rows;
  l.cols = a.cols;
  l.slice_height = c;
  std::vector<index_type> identity(static_cast<size_t>(a.rows));
  std::iota(identity.begin(), identity.end(), index_type(0));
  l.slice_ptr = sell_detail::slice_offsets(a.row_ptr, identity, c);
  l.first_col.assign(static_cast<size_t>(a.rows), index_type(-1));
  l.delta.assign(static_cast<size_t>(l.padded_entries()), std::uint16_t(0));
  l.val.assign(static_cast<size_t>(l.padded_entries()), Value(0));
  for (size_type r = 0; r < a.rows; ++r) {
    const index_type begin = a.row_ptr[r];
    const index_type len = sell_detail::row_length(a.row_ptr, r);
    if (len > 0) l.first_col[static_cast<size_t>(r)] = a.col_idx[begin];
    const size_type base = l.slice_ptr[static_cast<size_t>(r / c)] + r % c;
    for (index_type j = 0; j < len; ++j) {
      const size_t k = static_cast<size_t>(base + static_cast<size_type>(j) * c);
      if (j > 0) l.delta[k] = static_cast<std::uint16_t>(a.col_idx[begin + j] - a.col_idx[begin + j - 1]);
      l.val[k] = a.values[begin + j];
    }
  }
  return l;
}

/// y = alpha A x + beta y by walking a SELL-delta16 layout: the column is a running sum of the deltas from
/// the row's first column, over the whole slice width (padding adds val 0 times x at the last column);
/// an empty row reads nothing. beta == 0 does not read y.
template <typename Value>
void sell_delta16_spmv(const sell_delta16_layout<Value>& l, Value alpha, const Value* x, Value beta, Value* y)
{
  const int c = l.slice_height;
  for (size_type r = 0; r < l.rows; ++r) {
    index_type col = l.first_col[static_cast<size_t>(r)];
    Value sum = 0;
    if (col >= 0) {
      const size_type s = r / c;
      const size_type width = (l.slice_ptr[static_cast<size_t>(s) + 1] - l.slice_ptr[static_cast<size_t>(s)]) / c;
      const size_type base = l.slice_ptr[static_cast<size_t>(s)] + r % c;
      for (size_type j = 0; j < width; ++j) {
        const size_t k = static_cast<size_t>(base + j * c);
        col += l.delta[k];
        sum = std::fma(l.val[k], x[col], sum);
      }
    }
    y[r] = sell_detail::update(alpha, sum, beta, y, r);
  }
}

}  // namespace aijp::layout_ref
