// Host references of the CSR-family layouts (kernels/src/formats/csr.cu and coo.cu): each walks the layout
// the device kernel walks, in the kernel's order where that order is fixed, so tests can check the layout
// logic on the host and the device results can be compared against a walk of the same data.
//
//  - csr_scalar: one thread per row summing its entries in ascending order with fused multiply-adds. The
//    device kernel uses the same explicit fma and the same final update, so on the same inputs the two are
//    bit-identical (the host uses std::fma, a single rounding, like the device instruction).
//  - csr_vector: L lanes per row (csr_vector_lanes), lane l accumulating its entries with fma, then the
//    tree reduction of __shfl_down_sync (offsets L/2, ..., 1). For L = 32 and rows longer than 32 the
//    kernel starts at the 32-aligned index below the row start (coalesced segments, as in CUSP), so the
//    entry at absolute index k belongs to lane k mod 32; this is emulated too. Bit-identical as well (the
//    kernel may give a lane group several rows at once; that changes no lane's order within a row).
//  - coo: row indices expanded from row_ptr (the device builds them by binary search over row_ptr),
//    y = beta y (zeroed, not multiplied, when beta == 0) and then one update y[r] += alpha * s per run of
//    consecutive entries of row r. The device splits runs at warp-tile and chunk boundaries and adds the
//    pieces atomically in a nondeterministic order, so only the layout, not the rounding, is reproduced.
//
// Header-only, plain C++17 (no CUDA): runtime/ and the tests use it; kernels/ reads csr_vector_lanes so the
// lane rule has one definition.
#pragma once

#include <aijpredict/csr.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace aijp::layout_ref {

/// Lanes per row of csr_vector: the smallest power of two >= the mean row length, at least 2, at most 32
/// (the rule of the 2013 Kepler CRS study). Same rule as csr_vector_lanes in runtime/src/predict.cpp,
/// which the cost model uses.
inline int csr_vector_lanes(double mean_row_length)
{
  int lanes = 2;
  while (lanes < 32 && lanes < mean_row_length) lanes *= 2;
  return lanes;
}

/// The lane counts csr_vector has compiled kernels for.
constexpr std::array<int, 5> csr_vector_lane_set{2, 4, 8, 16, 32};

/// Width of the aligned walk: with this many lanes, rows longer than this start at an aligned index.
constexpr int csr_vector_aligned_lanes = 32;

/// Threads per block of the CSR kernels (csr_scalar, csr_vector).
constexpr int csr_block_size = 256;

/// Rows per lane group of csr_vector on matrices that need more than one wave of resident blocks with one
/// row per group. H200, double, CUDA 13.0, 2026-11-22 (scratch benchmark through gpu_matrix::apply): the 3D
/// 7-point Laplacian (8M rows, mean 7, 8 lanes) took 398-442 us with one row per group and 244 us with 4;
/// a 3-dof FEM matrix (648k rows, mean 21, 32 lanes) 122 us and 74 us; 2 rows gave 269 / 83 us, 8 rows
/// 236 / 76 us. Below one wave one row per group wins: the warp of the longest row is the critical path
/// (ego-Facebook, 4k rows, longest 1045: 7.0 us with one, 16 us with 4).
constexpr int csr_vector_stacked_slots = 4;

/// Lane steps whose loads csr_vector issues together with one row per lane group: a row of n steps takes
/// ceil(n / csr_chunk) dependent rounds (kernels/src/formats/csr.cu; the cost models count the chain so).
constexpr int csr_chunk = 4;

/// Blocks of csr_block_size threads csr_vector launches for `rows` rows with `lanes` lanes per row and
/// `slots` rows per lane group.
inline size_type csr_vector_blocks(size_type rows, int lanes, int slots)
{
  const size_type rows_per_block = static_cast<size_type>(csr_block_size / lanes) * slots;
  return (rows + rows_per_block - 1) / rows_per_block;
}

/// Rows per lane group of csr_vector (the one rule the kernel and the cost models share):
/// csr_vector_stacked_slots when one row per group would need more blocks than `resident_blocks` (SMs x
/// resident blocks of csr_block_size threads per SM, i.e. more than one wave), else 1. `resident_blocks`
/// <= 0 means the device is unknown: 1.
inline int csr_vector_slots(size_type rows, int lanes, size_type resident_blocks)
{
  if (resident_blocks <= 0) return 1;
  return csr_vector_blocks(rows, lanes, 1) > resident_blocks ? csr_vector_stacked_slots : 1;
}

namespace detail {

// The final update shared by the CSR kernels: y = alpha s with beta == 0 (y not read), else
// fma(alpha, s, beta y) (the device kernels write the same expression explicitly).
template <typename Value>
Value csr_update(Value alpha, Value sum, Value beta, Value y_old)
{
  return beta == Value(0) ? alpha * sum : std::fma(alpha, sum, beta * y_old);
}

}  // namespace detail

/// y = alpha A x + beta y, one thread per row (csr_scalar). beta == 0 does not read y.
template <typename Value>
void csr_scalar_spmv(const csr_view<Value>& a, Value alpha, const Value* x, Value beta, Value* y)
{
  for (size_type r = 0; r < a.rows; ++r) {
    Value sum = 0;
    for (index_type k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) sum = std::fma(a.values[k], x[a.col_idx[k]], sum);
    y[r] = detail::csr_update(alpha, sum, beta, beta == Value(0) ? Value(0) : y[r]);
  }
}

/// Lane that owns the entry at absolute index k of a row [begin, end) in csr_vector with `lanes` lanes.
inline int csr_vector_lane_of(size_type k, size_type begin, size_type end, int lanes)
{
  if (lanes == csr_vector_aligned_lanes && end - begin > csr_vector_aligned_lanes) {
    return static_cast<int>(k % csr_vector_aligned_lanes);
  }
  return static_cast<int>((k - begin) % lanes);
}

/// y = alpha A x + beta y as csr_vector computes it with `lanes` (a power of two in 2..32) lanes per row:
/// per-lane fma partial sums in ascending index order, then the shuffle-down tree. beta == 0 does not read y.
template <typename Value>
void csr_vector_spmv(const csr_view<Value>& a, int lanes, Value alpha, const Value* x, Value beta, Value* y)
{
  std::array<Value, 32> part{};
  for (size_type r = 0; r < a.rows; ++r) {
    const size_type begin = a.row_ptr[r], end = a.row_ptr[r + 1];
    std::fill(part.begin(), part.begin() + lanes, Value(0));
    for (size_type k = begin; k < end; ++k) {
      Value& s = part[static_cast<size_t>(csr_vector_lane_of(k, begin, end, lanes))];
      s = std::fma(a.values[k], x[a.col_idx[k]], s);
    }
    // __shfl_down_sync(sum, off, lanes): lane i < off receives lane i + off's partial sum.
    for (int off = lanes / 2; off > 0; off /= 2) {
      for (int i = 0; i < off; ++i) part[static_cast<size_t>(i)] += part[static_cast<size_t>(i + off)];
    }
    y[r] = detail::csr_update(alpha, part[0], beta, beta == Value(0) ? Value(0) : y[r]);
  }
}

/// The COO row index of every nonzero: row_idx[k] = the row r with row_ptr[r] <= k < row_ptr[r + 1]
/// (the largest such r, so empty rows get no entry), found by binary search as on the device.
inline std::vector<index_type> coo_row_indices(size_type rows, size_type nnz, const index_type* row_ptr)
{
  std::vector<index_type> row_idx(static_cast<size_t>(nnz));
  for (size_type k = 0; k < nnz; ++k) {
    // upper_bound over row_ptr[0..rows]: row_ptr[rows] == nnz > k, so the result is in [1, rows].
    const index_type* it = std::upper_bound(row_ptr, row_ptr + rows + 1, static_cast<index_type>(k));
    row_idx[static_cast<size_t>(k)] = static_cast<index_type>(it - row_ptr - 1);
  }
  return row_idx;
}

/// y = alpha A x + beta y on the COO layout (row indices sorted ascending, as expanded from CSR): first
/// y = beta y (y = 0 without reading it when beta == 0), then y[r] += alpha * (sum of the run of row r).
template <typename Value>
void coo_spmv(size_type rows, size_type nnz, const index_type* row_idx, const index_type* col_idx, const Value* values,
              Value alpha, const Value* x, Value beta, Value* y)
{
  for (size_type r = 0; r < rows; ++r) y[r] = beta == Value(0) ? Value(0) : beta * y[r];
  size_type k = 0;
  while (k < nnz) {
    const index_type r = row_idx[k];
    Value sum = 0;
    for (; k < nnz && row_idx[k] == r; ++k) sum += values[k] * x[col_idx[k]];
    y[r] += alpha * sum;
  }
}

}  // namespace aijp::layout_ref
