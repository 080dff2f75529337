// SELL-C-sigma with C = 32, sigma = 1: rows are cut into slices of 32 consecutive rows (one warp), each slice
// padded to its longest row and stored column-major, so lane i of a warp reads entry j of row i at
// slice_ptr[s] + 32 j + i: every load of the warp is one contiguous 256-byte (double) segment.
// Conversion runs on the device: slice widths (warp reduction), an exclusive scan (CUB), then a fill.
#include "format_impl.hpp"

#include <cub/device/device_scan.cuh>

namespace aijp::detail {

namespace {

constexpr int slice_height = 32;  // = warp size; predict.cpp models the padding with the same constant
constexpr int block_size = 256;

// slice_len[s] = 32 * (longest row of slice s), computed by the warp that owns the slice.
__global__ void sell_slice_sizes(size_type rows, const index_type* __restrict__ row_ptr, long long* __restrict__ slice_len)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  int len = r < rows ? row_ptr[r + 1] - row_ptr[r] : 0;
  for (int off = 16; off > 0; off /= 2) len = max(len, __shfl_xor_sync(0xffffffffu, len, off));
  if ((threadIdx.x & 31) == 0 && r < rows) slice_len[r / slice_height] = static_cast<long long>(len) * slice_height;
}

// Thread per row: copies the row into its column of the slice and pads with (column 0, value 0); padded
// entries read x[0], which stays in cache, and add exact zeros.
template <typename Value, bool with_columns>
__global__ void sell_fill(size_type rows, const index_type* __restrict__ row_ptr, const index_type* __restrict__ col_idx,
                          const Value* __restrict__ values, const long long* __restrict__ slice_ptr,
                          index_type* __restrict__ sell_col, Value* __restrict__ sell_val)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const size_type s = r / slice_height;
  const long long base = slice_ptr[s] + (r % slice_height);
  const int width = static_cast<int>((slice_ptr[s + 1] - slice_ptr[s]) / slice_height);
  const index_type begin = row_ptr[r];
  const int len = row_ptr[r + 1] - begin;
  for (int j = 0; j < width; ++j) {
    const long long k = base + static_cast<long long>(j) * slice_height;
    if (with_columns) sell_col[k] = j < len ? col_idx[begin + j] : 0;
    sell_val[k] = j < len ? values[begin + j] : Value(0);
  }
}

template <typename Value, bool beta_zero>
__global__ void __launch_bounds__(block_size) sell_spmv(size_type rows, const long long* __restrict__ slice_ptr,
                                                        const index_type* __restrict__ sell_col,
                                                        const Value* __restrict__ sell_val, Value alpha,
                                                        const Value* __restrict__ x, Value beta, Value* __restrict__ y)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const size_type s = r / slice_height;
  const long long start = slice_ptr[s];
  const int width = static_cast<int>((slice_ptr[s + 1] - start) / slice_height);
  const index_type* col = sell_col + start + (r % slice_height);
  const Value* val = sell_val + start + (r % slice_height);
  Value sum = 0;
#pragma unroll 4
  for (int j = 0; j < width; ++j) {
    sum += val[static_cast<long long>(j) * slice_height] * __ldg(x + col[static_cast<long long>(j) * slice_height]);
  }
  y[r] = beta_zero ? alpha * sum : alpha * sum + beta * y[r];
}

unsigned grid_for(size_type n) { return static_cast<unsigned>((n + block_size - 1) / block_size); }

template <typename Value>
class sell final : public format_impl<Value> {
 public:
  sell(const device_csr<Value>& a, cudaStream_t stream) : rows_(a.rows)
  {
    const size_type slices = (a.rows + slice_height - 1) / slice_height;
    slice_ptr_.resize(slices + 1);
    AIJP_CUDA_CHECK(cudaMemsetAsync(slice_ptr_.data(), 0, (slices + 1) * sizeof(long long), stream));
    if (a.rows > 0) {
      sell_slice_sizes<<<grid_for(a.rows), block_size, 0, stream>>>(a.rows, a.row_ptr.data(), slice_ptr_.data());
      AIJP_CHECK_LAUNCH();
    }
    // In-place exclusive scan over slices + 1 entries (the last, zero, becomes the total).
    std::size_t temp_bytes = 0;
    AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, slice_ptr_.data(), slice_ptr_.data(),
                                                  static_cast<int>(slices + 1), stream));
    device_buffer<unsigned char> temp(temp_bytes);
    AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), temp_bytes, slice_ptr_.data(), slice_ptr_.data(),
                                                  static_cast<int>(slices + 1), stream));
    long long padded = 0;
    AIJP_CUDA_CHECK(cudaMemcpyAsync(&padded, slice_ptr_.data() + slices, sizeof(padded), cudaMemcpyDeviceToHost, stream));
    AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
    col_.resize(static_cast<std::size_t>(padded));
    val_.resize(static_cast<std::size_t>(padded));
    fill(a, true, stream);
  }
  format_id id() const override { return format_id::sell_c_sigma; }
  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override { fill(a, false, stream); }
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (rows_ == 0) return;
    if (beta == Value(0)) {
      sell_spmv<Value, true><<<grid_for(rows_), block_size, 0, stream>>>(rows_, slice_ptr_.data(), col_.data(), val_.data(),
                                                                        alpha, x, beta, y);
    } else {
      sell_spmv<Value, false><<<grid_for(rows_), block_size, 0, stream>>>(rows_, slice_ptr_.data(), col_.data(),
                                                                         val_.data(), alpha, x, beta, y);
    }
    AIJP_CHECK_LAUNCH();
  }
  size_type device_bytes() const override
  {
    return static_cast<size_type>(slice_ptr_.bytes() + col_.bytes() + val_.bytes());
  }

 private:
  void fill(const device_csr<Value>& a, bool with_columns, cudaStream_t stream)
  {
    if (rows_ == 0) return;
    if (with_columns) {
      sell_fill<Value, true><<<grid_for(rows_), block_size, 0, stream>>>(rows_, a.row_ptr.data(), a.col_idx.data(),
                                                                         a.values.data(), slice_ptr_.data(), col_.data(),
                                                                         val_.data());
    } else {
      sell_fill<Value, false><<<grid_for(rows_), block_size, 0, stream>>>(rows_, a.row_ptr.data(), a.col_idx.data(),
                                                                          a.values.data(), slice_ptr_.data(), col_.data(),
                                                                          val_.data());
    }
    AIJP_CHECK_LAUNCH();
  }

  size_type rows_;
  device_buffer<long long> slice_ptr_;
  device_buffer<index_type> col_;
  device_buffer<Value> val_;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_sell(const device_csr<Value>& a, cudaStream_t stream)
{
  return std::make_unique<sell<Value>>(a, stream);
}

template std::unique_ptr<format_impl<double>> make_sell<double>(const device_csr<double>&, cudaStream_t);
template std::unique_ptr<format_impl<float>> make_sell<float>(const device_csr<float>&, cudaStream_t);

}  // namespace aijp::detail
