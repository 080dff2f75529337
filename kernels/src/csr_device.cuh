// Device helpers over a CSR row_ptr, shared by kernels that split work by entries.
#pragma once

#include <aijpredict/csr.hpp>

namespace aijp::detail {

/// The row holding entry k (0 <= k < row_ptr[rows]): the largest r with row_ptr[r] <= k, so empty rows are
/// skipped. Binary search, so that work split by entries never serialises on one long row.
__device__ inline size_type row_of_entry(const index_type* __restrict__ row_ptr, size_type rows, size_type k)
{
  size_type lo = 0, hi = rows;  // invariant: row_ptr[lo] <= k < row_ptr[hi] (row_ptr[rows] == nnz > k)
  while (hi - lo > 1) {
    const size_type mid = lo + (hi - lo) / 2;
    if (row_ptr[mid] <= k) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace aijp::detail
