// Compressed sparse row matrices: a non-owning view (host or device pointers) and an owning host matrix.
#pragma once

#include <cstdint>
#include <vector>

namespace aijp {

/// Local (per-process) row and column indices are 32-bit: every GPU format uses them.
using index_type = std::int32_t;
/// Sizes and counts that may exceed 2^31 (nonzeros, bytes).
using size_type = std::int64_t;

/// Non-owning CSR view. `row_ptr` has rows + 1 entries starting at 0; column indices within a row need
/// not be sorted. Pointers may refer to host or device memory; the consumer documents which.
template <typename Value>
struct csr_view {
  size_type rows = 0;
  size_type cols = 0;
  size_type nnz = 0;
  const index_type* row_ptr = nullptr;
  const index_type* col_idx = nullptr;
  const Value* values = nullptr;
};

/// Owning host CSR matrix (readers, generators, tests).
template <typename Value>
struct csr_matrix {
  size_type rows = 0;
  size_type cols = 0;
  std::vector<index_type> row_ptr{0};
  std::vector<index_type> col_idx;
  std::vector<Value> values;

  size_type nnz() const { return static_cast<size_type>(col_idx.size()); }
  csr_view<Value> view() const
  {
    return {rows, cols, nnz(), row_ptr.data(), col_idx.data(), values.data()};
  }
};

/// The same pattern with the values converted to To (double matrices measured in single precision).
template <typename To, typename From>
csr_matrix<To> value_cast(const csr_matrix<From>& a)
{
  csr_matrix<To> b;
  b.rows = a.rows;
  b.cols = a.cols;
  b.row_ptr = a.row_ptr;
  b.col_idx = a.col_idx;
  b.values.assign(a.values.begin(), a.values.end());
  return b;
}

}  // namespace aijp
