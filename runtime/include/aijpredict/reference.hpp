// Host reference products: the oracle every device format is tested against.
#pragma once

#include <aijpredict/csr.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace aijp {

/// y = alpha A x + beta y on the host; with beta == 0, y is not read (NaN in y does not propagate).
template <typename Value>
void reference_spmv(const csr_view<Value>& a, Value alpha, const Value* x, Value beta, Value* y)
{
  for (size_type r = 0; r < a.rows; ++r) {
    Value sum = 0;
    for (index_type k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) sum += a.values[k] * x[a.col_idx[k]];
    y[r] = beta == Value(0) ? alpha * sum : alpha * sum + beta * y[r];
  }
}

/// y = alpha A^T x + beta y on the host.
template <typename Value>
void reference_spmv_transpose(const csr_view<Value>& a, Value alpha, const Value* x, Value beta, Value* y)
{
  std::vector<Value> t(static_cast<size_t>(a.cols), Value(0));
  for (size_type r = 0; r < a.rows; ++r) {
    for (index_type k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) t[a.col_idx[k]] += a.values[k] * x[r];
  }
  for (size_type c = 0; c < a.cols; ++c) y[c] = beta == Value(0) ? alpha * t[c] : alpha * t[c] + beta * y[c];
}

/// Per-row error bound of a computed product (Higham's bound for a dot product, as Kokkos Kernels'
/// tests use it): |y - y_ref| <= gamma_len * (|alpha| |A| |x| + |beta| |y0|) with gamma_len = c len eps.
/// `y0` is y before the product (ignored for beta == 0).
template <typename Value>
std::vector<double> spmv_error_bounds(const csr_view<Value>& a, Value alpha, const Value* x, Value beta, const Value* y0,
                                      bool transpose = false)
{
  const double eps = std::numeric_limits<Value>::epsilon();
  const size_type n = transpose ? a.cols : a.rows;
  std::vector<double> absum(static_cast<size_t>(n), 0.0), len(static_cast<size_t>(n), 0.0);
  for (size_type r = 0; r < a.rows; ++r) {
    for (index_type k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      const size_type i = transpose ? a.col_idx[k] : r;
      const size_type j = transpose ? r : a.col_idx[k];
      absum[i] += std::abs(static_cast<double>(a.values[k]) * static_cast<double>(x[j]));
      len[i] += 1;
    }
  }
  std::vector<double> bound(static_cast<size_t>(n));
  for (size_type i = 0; i < n; ++i) {
    const double yterm = beta == Value(0) ? 0.0 : std::abs(static_cast<double>(beta) * static_cast<double>(y0[i]));
    bound[i] = 4.0 * (len[i] + 2) * eps * (std::abs(static_cast<double>(alpha)) * absum[i] + yterm) +
               std::numeric_limits<Value>::min();
  }
  return bound;
}

}  // namespace aijp
