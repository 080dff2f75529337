// Checks shared by the io tests: CSR invariants and exact symmetry of host matrices.
#pragma once

#include <aijpredict/csr.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace aijp {
namespace test {

/// row_ptr shape, columns strictly ascending (sorted, no duplicates) and in range, values finite.
inline ::testing::AssertionResult valid_csr(const csr_matrix<double>& a)
{
  if (a.rows < 0 || a.cols < 0) return ::testing::AssertionFailure() << "negative size";
  if (a.row_ptr.size() != static_cast<std::size_t>(a.rows) + 1) {
    return ::testing::AssertionFailure() << "row_ptr has " << a.row_ptr.size() << " entries for " << a.rows
                                         << " rows";
  }
  if (a.row_ptr.front() != 0 || static_cast<std::size_t>(a.row_ptr.back()) != a.col_idx.size() ||
      a.col_idx.size() != a.values.size()) {
    return ::testing::AssertionFailure() << "row_ptr ends or array sizes inconsistent";
  }
  for (size_type r = 0; r < a.rows; ++r) {
    const auto b = a.row_ptr[static_cast<std::size_t>(r)];
    const auto e = a.row_ptr[static_cast<std::size_t>(r) + 1];
    if (e < b) return ::testing::AssertionFailure() << "row_ptr decreases at row " << r;
    for (auto k = b; k < e; ++k) {
      const auto c = a.col_idx[static_cast<std::size_t>(k)];
      if (c < 0 || c >= a.cols) return ::testing::AssertionFailure() << "column " << c << " out of range in row " << r;
      if (k > b && a.col_idx[static_cast<std::size_t>(k) - 1] >= c) {
        return ::testing::AssertionFailure() << "columns not strictly ascending in row " << r;
      }
      if (!std::isfinite(a.values[static_cast<std::size_t>(k)])) {
        return ::testing::AssertionFailure() << "non-finite value in row " << r;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

/// Transpose of a valid CSR matrix (columns come out ascending).
inline csr_matrix<double> transpose(const csr_matrix<double>& a)
{
  csr_matrix<double> t;
  t.rows = a.cols;
  t.cols = a.rows;
  t.row_ptr.assign(static_cast<std::size_t>(a.cols) + 1, 0);
  for (auto c : a.col_idx) ++t.row_ptr[static_cast<std::size_t>(c) + 1];
  for (size_type c = 0; c < a.cols; ++c) t.row_ptr[static_cast<std::size_t>(c) + 1] += t.row_ptr[static_cast<std::size_t>(c)];
  t.col_idx.resize(a.col_idx.size());
  t.values.resize(a.values.size());
  std::vector<index_type> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
  for (size_type r = 0; r < a.rows; ++r) {
    for (auto k = a.row_ptr[static_cast<std::size_t>(r)]; k < a.row_ptr[static_cast<std::size_t>(r) + 1]; ++k) {
      const auto dst = static_cast<std::size_t>(next[static_cast<std::size_t>(a.col_idx[static_cast<std::size_t>(k)])]++);
      t.col_idx[dst] = static_cast<index_type>(r);
      t.values[dst] = a.values[static_cast<std::size_t>(k)];
    }
  }
  return t;
}

/// Bitwise equality of shape, pattern and values.
inline bool same_matrix(const csr_matrix<double>& a, const csr_matrix<double>& b)
{
  return a.rows == b.rows && a.cols == b.cols && a.row_ptr == b.row_ptr && a.col_idx == b.col_idx &&
         a.values == b.values;
}

/// A == A^T exactly (pattern and values); with `negate`, A == -A^T.
inline bool exactly_symmetric(const csr_matrix<double>& a, bool negate = false)
{
  if (a.rows != a.cols) return false;
  auto t = transpose(a);
  if (negate) {
    for (auto& v : t.values) v = -v;
  }
  return same_matrix(a, t);
}

}  // namespace test
}  // namespace aijp
