// Pieces shared by the sliced-ELL formats (SELL-C-sigma, SELL-delta16, cuSPARSE SELL): slice sizing over a
// row order, the CUB scan of the slice offsets, and the fill of a padded slice layout.
//
// Layout (as sell_sigma.cu without sorting, format `sell`): layout row i sits in slice s = i / 32 at lane i % 32; slice s holds
// width_s = (longest row of the slice) columns stored column-major, entry j of layout row i at
// slice_ptr[s] + 32 j + i % 32. Every slice, the last one too, is 32 rows tall, so the padded size is
// slice_ptr[slices] = 32 * sum_s width_s. Layout row i holds CSR row perm[i] (the identity without perm).
// fill_slices pads with column -1 (cuSPARSE's convention for SELL) and value 0: kernels that see a padding
// column skip the entry, so a NaN or Inf in x never leaks into another row through 0 * x[c]. (SELL-delta16
// fills its own arrays: deltas, padding repeats the row's last column.)
#pragma once

#include "../async_ops.hpp"
#include "../format_impl.hpp"

#include <cub/device/device_scan.cuh>

#include <cstddef>

namespace aijp::detail::sell_common {

constexpr int slice_height = 32;  // = warp size; predict.cpp models the padding of every SELL layout with it
constexpr int block_size = 256;
constexpr index_type padding_column = -1;

// The SpMV kernels walk a row in chunks of `chunk` slots: first the chunk's column indices (or deltas) and
// values (predicated past the slice width), then its x gathers, then the fused multiply-adds, so a thread
// keeps `chunk` independent loads in flight at each step. With `#pragma unroll 4` instead, the remainder
// iterations (3 of a 7-entry stencil row) each run a dependent index -> x -> fma chain. Measured on an
// H200 (2026-11-22, double, warm L2, median of 50 launches of each kernel variant on the layouts of
// layout_ref_sell.hpp; unroll-4 loop -> chunks of 4):
//   3D 7-point Laplacian 200^3         sell_sigma 231 -> 198 us, sell_delta16 217 -> 188 us
//   3D 27-point stencil 100^3          sell_sigma  92 ->  86 us, sell_delta16  83 ->  77 us
//   FEM 3 dof/node 60^3                sell_sigma  52 ->  49 us, sell_delta16  48 ->  46 us
//   2M rows of N(24, 6^2) random cols  sell_sigma 322 -> 328 us, sell_delta16 325 -> 348 us (60000
//                                      columns; bound by the x gathers, not by the index loads)
// The structured matrices, where these layouts are chosen at all, win; hence 4, for both kernels.
constexpr int chunk = 4;

inline unsigned grid_for(size_type n) { return static_cast<unsigned>((n + block_size - 1) / block_size); }

__host__ __device__ inline size_type slice_count(size_type rows) { return (rows + slice_height - 1) / slice_height; }

/// Bits needed to write v (0 for v = 0).
inline int bits_for(unsigned long long v)
{
  int b = 0;
  for (; v != 0; v >>= 1) ++b;
  return b;
}

// slice_len[s] = 32 * (longest row of slice s) over the layout order, computed by the warp that owns the
// slice. Rows past the end count as empty; every lane reaches the shuffles (no early return).
template <bool permuted>
__global__ void slice_widths(size_type rows, const index_type* __restrict__ row_ptr, const index_type* __restrict__ perm,
                             long long* __restrict__ slice_len)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  int len = 0;
  if (i < rows) {
    const index_type r = permuted ? perm[i] : static_cast<index_type>(i);
    len = row_ptr[r + 1] - row_ptr[r];
  }
  for (int off = 16; off > 0; off /= 2) len = max(len, __shfl_xor_sync(0xffffffffu, len, off));
  if ((threadIdx.x & 31) == 0 && i < rows) slice_len[i / slice_height] = static_cast<long long>(len) * slice_height;
}

// Thread per layout row i in [first, last) (multiples of 32; last = slice_count(rows) * 32 for all), the 32
// lanes of the last slice included (rows >= `rows` are all padding, so a library that reads whole slices,
// like cuSPARSE, never meets uninitialised memory). The warp writes one contiguous 32-entry segment per
// column j. with_columns == false rewrites the values only (value refresh).
template <typename Value, typename Offset, bool permuted, bool with_columns>
__global__ void fill_slices(size_type rows, size_type first, size_type last, const index_type* __restrict__ row_ptr,
                            const index_type* __restrict__ col_idx, const Value* __restrict__ values,
                            const index_type* __restrict__ perm, const Offset* __restrict__ slice_ptr,
                            index_type* __restrict__ sell_col, Value* __restrict__ sell_val)
{
  const size_type i = first + static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_type s = i / slice_height;
  if (i >= last || s >= slice_count(rows)) return;
  const long long base = static_cast<long long>(slice_ptr[s]) + (i % slice_height);
  const int width = static_cast<int>((static_cast<long long>(slice_ptr[s + 1]) - slice_ptr[s]) / slice_height);
  index_type begin = 0;
  int len = 0;
  if (i < rows) {
    const index_type r = permuted ? perm[i] : static_cast<index_type>(i);
    begin = row_ptr[r];
    len = row_ptr[r + 1] - begin;
  }
  for (int j = 0; j < width; ++j) {
    const long long k = base + static_cast<long long>(j) * slice_height;
    if (with_columns) sell_col[k] = j < len ? col_idx[begin + j] : padding_column;
    sell_val[k] = j < len ? values[begin + j] : Value(0);
  }
}

// Layout rows of all slices, and the threads of fill_slices over all of them.
inline size_type padded_rows(size_type rows) { return slice_count(rows) * slice_height; }
inline unsigned fill_grid(size_type rows) { return grid_for(padded_rows(rows)); }

/// In-place exclusive sum over `count` entries of `data` (slice widths plus a trailing zero, which becomes
/// the total). `temp` must live until the scan has run (the caller synchronises before releasing it).
template <typename TempBuffer>  // device_buffer<unsigned char>, or a pooled scratch_buffer (staged conversions)
void exclusive_scan(long long* data, size_type count, TempBuffer& temp, cudaStream_t stream)
{
  std::size_t temp_bytes = 0;
  AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, data, data, static_cast<int>(count), stream));
  temp.resize(temp_bytes);
  AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), temp_bytes, data, data, static_cast<int>(count), stream));
}

/// Slice offsets (64-bit, slices + 1 entries) of the layout order given by `perm` (nullptr: natural order),
/// enqueued on `stream`: widths, then the scan. slice_ptr[slices] is the padded size once the stream has run.
/// slice_ptr from `reserve` while it has room (a layout's own offsets; not for temporaries).
template <typename TempBuffer>
void slice_offsets(const index_type* row_ptr, size_type rows, const index_type* perm, device_buffer<long long>& slice_ptr,
                   TempBuffer& temp, cudaStream_t stream, layout_reserve* reserve = nullptr)
{
  const size_type slices = slice_count(rows);
  slice_ptr.resize(static_cast<std::size_t>(slices + 1), reserve);
  AIJP_CUDA_CHECK(cudaMemsetAsync(slice_ptr.data(), 0, (slices + 1) * sizeof(long long), stream));
  if (rows > 0) {
    if (perm) {
      slice_widths<true><<<grid_for(rows), block_size, 0, stream>>>(rows, row_ptr, perm, slice_ptr.data());
    } else {
      slice_widths<false><<<grid_for(rows), block_size, 0, stream>>>(rows, row_ptr, nullptr, slice_ptr.data());
    }
    AIJP_CHECK_LAUNCH();
  }
  exclusive_scan(slice_ptr.data(), slices + 1, temp, stream);
}

/// Copies one device value to the host and waits for `stream` (the one synchronisation of a conversion).
template <typename T>
T read_back(const T* device_ptr, cudaStream_t stream)
{
  T host{};
  AIJP_CUDA_CHECK(cudaMemcpyAsync(&host, device_ptr, sizeof(T), cudaMemcpyDeviceToHost, stream));
  detail::wait_stream(stream);
  return host;
}

}  // namespace aijp::detail::sell_common
