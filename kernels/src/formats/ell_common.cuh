// Shared pieces of the ELLPACK family (ell.cu: ELL, ELLPACK-R, PELLR; jad.cu: JAD; hyb.cu: HYB):
// the padded column-major layout, its fill and thread-per-row SpMV kernels, the stable device sort of the
// rows by decreasing length, and scratch memory for the conversions.
//
// Padded layout (ELL, ELLPACK-R, PELLR, the ELL part of HYB): `stored` rows x `width` slots, column-major,
// slot j of stored row i at j * stored + i, so lane i of a warp reads slot j of 32 consecutive rows in one
// contiguous segment. Offsets are 64-bit: stored * width exceeds 2^31 on large matrices. A stored row holds
// the first min(len, width) entries of its matrix row in CSR order (summation order = CSR order).
// Padding (ELL and HYB only, whose kernels walk every slot) is column 0, value 0; ELLPACK-R and PELLR stop
// at each row's length and never write or read their padding.
#pragma once

#include "../format_impl.hpp"

#include <aijpredict/layout_ref_ell.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <string>

namespace aijp::detail::ell_family {

/// Threads per block of every kernel of the family: 8 warps, so 8 blocks fill an SM of 2048 threads.
constexpr int block_size = 256;
// Slots whose loads the SpMV kernel issues together (ell_spmv; the cost models count its rounds).
constexpr int chunk = layout_ref::ell_chunk;

inline unsigned grid_for(size_type threads)
{
  return static_cast<unsigned>((threads + block_size - 1) / block_size);
}

/// rows * width slots of a padded layout, or aijp::not_supported when the index and column arrays of that
/// many slots would not be addressable (no allocation could hold them: this is an overflow guard, the
/// planner's padding rule rejects far smaller layouts).
inline size_type padded_slots(size_type rows, index_type width, const char* format)
{
  constexpr size_type max_slots = std::numeric_limits<size_type>::max() / 16;  // 16 = largest value + index
  if (width > 0 && rows > max_slots / width) {
    AIJP_THROW(not_supported, std::string(format) + ": " + std::to_string(rows) + " rows x width " +
                                  std::to_string(width) + " overflows the padded layout");
  }
  return rows * static_cast<size_type>(width);
}

/// Conversion temporaries: one device allocation carved into pieces aligned to 256 bytes (CUB's temporary
/// storage alignment): reserve every piece, allocate(), then use at<T>(offset). Plain cudaMalloc / cudaFree
/// rather than the stream-ordered pool: on an H200 (2026-11-22) the first cudaMallocAsync of a process took
/// 9.4-13 ms (pool creation), later ones 0.16-0.26 ms for 64 MiB, against 0.1-0.4 ms for cudaMalloc +
/// cudaFree; cudaFree's implicit device synchronisation is harmless in a conversion, which ends with a
/// stream synchronisation anyway. Out of memory throws aijp::device_out_of_memory.
class scratch {
 public:
  template <typename T>
  std::size_t reserve(size_type count)
  {
    const std::size_t offset = bytes_;
    bytes_ += (static_cast<std::size_t>(count) * sizeof(T) + 255) / 256 * 256;
    return offset;
  }
  void allocate() { buffer_.resize(bytes_); }
  template <typename T>
  T* at(std::size_t offset)
  {
    return reinterpret_cast<T*>(buffer_.data() + offset);
  }

 private:
  std::size_t bytes_ = 0;
  device_buffer<unsigned char> buffer_;
};

/// Sorts the rows by decreasing length on the device (cub::DeviceRadixSort::SortPairsDescending on
/// (length, row), stable: rows of equal length keep their natural order, which keeps y writes of regular
/// matrices coalesced). Writes sorted_len[i] = length of the i-th longest row and perm[i] = its index.
/// `max_len` bounds the lengths (row_stats::max_len): only its significant bits are sorted.
/// Defined in ell.cu; used by PELLR and JAD.
void sort_rows_by_length(size_type rows, const index_type* row_ptr, index_type max_len, index_type* sorted_len,
                         index_type* perm, cudaStream_t stream);

// Kernels and their launchers live in an unnamed namespace: each translation unit that includes this header
// gets its own instantiations (no cross-TU device symbols without separable compilation).
namespace {

// Thread per stored row i (matrix row perm[i], or i without perm): copies the first min(len, width) entries
// of the row into slots j * rows + i (consecutive threads write consecutive addresses); with `pad`, fills the
// remaining slots with (column 0, value 0). With row_len, stores min(len, width) there. The refresh of values
// passes with_columns = false and pad = false: the pattern and the zero padding stay as built.
template <typename Value, bool with_columns, bool pad>
__global__ void __launch_bounds__(block_size)
    ell_fill(size_type rows, index_type width, const index_type* __restrict__ row_ptr,
             const index_type* __restrict__ col_idx, const Value* __restrict__ values,
             const index_type* __restrict__ perm, index_type* __restrict__ row_len, index_type* __restrict__ ell_col,
             Value* __restrict__ ell_val)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const index_type r = perm ? perm[i] : static_cast<index_type>(i);
  const index_type begin = row_ptr[r];
  const index_type stored = min(row_ptr[r + 1] - begin, width);
  if (row_len) row_len[i] = stored;
  size_type slot = i;
  for (index_type j = 0; j < stored; ++j, slot += rows) {
    if (with_columns) ell_col[slot] = col_idx[begin + j];
    ell_val[slot] = values[begin + j];
  }
  if (pad) {
    for (index_type j = stored; j < width; ++j, slot += rows) {
      ell_col[slot] = 0;
      ell_val[slot] = Value(0);
    }
  }
}

// Thread per stored row i: walks `width` slots (ELL, HYB's ELL part) or its own row_len[i] (ELLPACK-R,
// PELLR), then writes y[perm[i]] (or y[i]) = alpha sum + beta y. beta_zero: y is not read.
template <typename Value, bool beta_zero, bool own_length>
__global__ void __launch_bounds__(block_size)
    ell_spmv(size_type rows, index_type width, const index_type* __restrict__ row_len,
             const index_type* __restrict__ perm, const index_type* __restrict__ ell_col,
             const Value* __restrict__ ell_val, Value alpha, const Value* __restrict__ x, Value beta,
             Value* __restrict__ y)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const index_type n = own_length ? row_len[i] : width;
  const size_type r = perm ? static_cast<size_type>(perm[i]) : i;
  const index_type* col = ell_col + i;
  const Value* val = ell_val + i;
  Value sum = 0;
  size_type slot = 0;
  // Chunks of `chunk` slots (sell_common::chunk's loop shape): the chunk's columns and values, predicated past
  // the row's n, then its x gathers, then the products in order, so a row of n takes ceil(n / chunk) dependent
  // rounds wherever its n falls. Under `#pragma unroll 4` the n % 4 remainder iterations were a round each, and
  // in a warp whose rows differ in length the two loops ran one after the other (docs/models.md, Session 39).
  for (index_type j = 0; j < n; j += chunk, slot += chunk * static_cast<size_type>(rows)) {
    bool in[chunk];
    index_type c[chunk];
    Value v[chunk], xv[chunk];
#pragma unroll
    for (int u = 0; u < chunk; ++u) {
      in[u] = u < n - j;  // j < n: no overflow
      const size_type at = slot + static_cast<size_type>(u) * rows;
      c[u] = in[u] ? col[at] : 0;
      v[u] = in[u] ? val[at] : Value(0);
    }
#pragma unroll
    for (int u = 0; u < chunk; ++u) xv[u] = in[u] ? __ldg(x + c[u]) : Value(0);
#pragma unroll
    for (int u = 0; u < chunk; ++u) {
      if (in[u]) sum += v[u] * xv[u];
    }
  }
  y[r] = beta_zero ? alpha * sum : alpha * sum + beta * y[r];
}

/// Launches ell_fill for `rows` stored rows (no launch for none).
template <typename Value, bool with_columns, bool pad>
void launch_ell_fill(size_type rows, index_type width, const device_csr<Value>& a, const index_type* perm,
                     index_type* row_len, index_type* ell_col, Value* ell_val, cudaStream_t stream)
{
  if (rows == 0) return;
  ell_fill<Value, with_columns, pad><<<grid_for(rows), block_size, 0, stream>>>(
      rows, width, a.row_ptr.data(), a.col_idx.data(), a.values.data(), perm, row_len, ell_col, ell_val);
  AIJP_CHECK_LAUNCH();
}

/// Launches ell_spmv, choosing the beta == 0 variant at run time (no launch for no rows).
template <typename Value, bool own_length>
void launch_ell_spmv(size_type rows, index_type width, const index_type* row_len, const index_type* perm,
                     const index_type* ell_col, const Value* ell_val, Value alpha, const Value* x, Value beta, Value* y,
                     cudaStream_t stream)
{
  if (rows == 0) return;
  if (beta == Value(0)) {
    ell_spmv<Value, true, own_length><<<grid_for(rows), block_size, 0, stream>>>(rows, width, row_len, perm, ell_col,
                                                                                ell_val, alpha, x, beta, y);
  } else {
    ell_spmv<Value, false, own_length><<<grid_for(rows), block_size, 0, stream>>>(rows, width, row_len, perm, ell_col,
                                                                                 ell_val, alpha, x, beta, y);
  }
  AIJP_CHECK_LAUNCH();
}

}  // namespace

}  // namespace aijp::detail::ell_family
