// SELL-32 in natural row order (as sell_sigma.cu without sorting, format `sell`) with 16-bit column deltas: each row keeps its first column as
// int32 (first_col, -1 for an empty row) and slot j of the row the unsigned delta col[j] - col[j-1] (slot 0
// and the padding hold 0, so padding repeats the row's last column and adds an exact zero). A stored entry
// costs 2 + 8 bytes in double instead of 4 + 8: the format aims at large 3D stencils, whose SpMV streams
// the matrix (7-point Laplacian on 200^3: interior steps 1, 199 and 39800, boundary rows up to 40000). The
// kernel rebuilds the columns with a running sum per thread. On an H200 (2026-11-22, double, aijp_bench):
// 7-point 200^3 176 us against 194 us for SELL-32, 27-point 100^3 73 against 83, FEM 3 dof 60^3 43 against 46.
// Rows must be sorted with deltas below 2^16: the conversion checks every row on the device and throws
// aijp::not_supported otherwise (the runtime then falls back to cuSPARSE CSR).
#include "sell_common.cuh"

#include <cstdint>
#include <string>

namespace aijp::detail {

namespace {

using namespace sell_common;
using delta_type = std::uint16_t;
constexpr int max_delta = 65535;

// Slice widths (as sell_common::slice_widths) plus the check of the row's deltas: `bad` counts the rows
// with a decreasing column or a jump above 65535.
__global__ void delta16_widths_and_check(size_type rows, const index_type* __restrict__ row_ptr,
                                         const index_type* __restrict__ col_idx, long long* __restrict__ slice_len,
                                         unsigned long long* __restrict__ bad)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  int len = 0;
  bool ok = true;
  if (r < rows) {
    const index_type begin = row_ptr[r];
    len = row_ptr[r + 1] - begin;
    for (index_type k = begin + 1; ok && k < begin + len; ++k) {
      const index_type d = col_idx[k] - col_idx[k - 1];  // both in [0, cols): no overflow
      ok = d >= 0 && d <= max_delta;
    }
  }
  if (!ok) atomicAdd(bad, 1ull);
  for (int off = 16; off > 0; off /= 2) len = max(len, __shfl_xor_sync(0xffffffffu, len, off));
  if ((threadIdx.x & 31) == 0 && r < rows) slice_len[r / slice_height] = static_cast<long long>(len) * slice_height;
}

// Thread per row of every slice (rows past the end are all padding, as in sell_common::fill_slices).
template <typename Value, bool with_columns>
__global__ void delta16_fill(size_type rows, const index_type* __restrict__ row_ptr, const index_type* __restrict__ col_idx,
                             const Value* __restrict__ values, const long long* __restrict__ slice_ptr,
                             index_type* __restrict__ first_col, delta_type* __restrict__ delta, Value* __restrict__ val)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_type s = r / slice_height;
  if (s >= slice_count(rows)) return;
  const long long base = slice_ptr[s] + (r % slice_height);
  const int width = static_cast<int>((slice_ptr[s + 1] - slice_ptr[s]) / slice_height);
  index_type begin = 0;
  int len = 0;
  if (r < rows) {
    begin = row_ptr[r];
    len = row_ptr[r + 1] - begin;
    if (with_columns) first_col[r] = len > 0 ? col_idx[begin] : -1;
  }
  for (int j = 0; j < width; ++j) {
    const long long k = base + static_cast<long long>(j) * slice_height;
    if (with_columns) {
      delta[k] = j > 0 && j < len ? static_cast<delta_type>(col_idx[begin + j] - col_idx[begin + j - 1]) : delta_type(0);
    }
    val[k] = j < len ? values[begin + j] : Value(0);
  }
}

// Slot loads and slice offsets are issued before the branch on an empty row (a branch-free trip count);
// see sell_common::chunk for the loop shape. Slots past the slice width add nothing and move no column.
template <typename Value, bool beta_zero>
__global__ void __launch_bounds__(block_size)
    sell_delta16_spmv(size_type rows, const long long* __restrict__ slice_ptr, const index_type* __restrict__ first_col,
                      const delta_type* __restrict__ delta, const Value* __restrict__ sell_val, Value alpha,
                      const Value* __restrict__ x, Value beta, Value* __restrict__ y)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  index_type c = first_col[r];
  const size_type s = r / slice_height;
  const long long start = slice_ptr[s];
  const int width = c >= 0 ? static_cast<int>((slice_ptr[s + 1] - start) / slice_height) : 0;  // empty row: none
  const delta_type* d = delta + start + (r % slice_height);
  const Value* val = sell_val + start + (r % slice_height);
  Value sum = 0;
  for (int j = 0; j < width; j += chunk) {
    unsigned step[chunk];
    Value v[chunk], xv[chunk];
#pragma unroll
    for (int u = 0; u < chunk; ++u) {
      const bool in = j + u < width;
      const long long k = static_cast<long long>(j + u) * slice_height;
      step[u] = in ? d[k] : 0u;
      v[u] = in ? val[k] : Value(0);
    }
#pragma unroll
    for (int u = 0; u < chunk; ++u) {
      c += static_cast<index_type>(step[u]);
      xv[u] = j + u < width ? __ldg(x + c) : Value(0);
    }
#pragma unroll
    for (int u = 0; u < chunk; ++u) sum += v[u] * xv[u];
  }
  y[r] = beta_zero ? alpha * sum : alpha * sum + beta * y[r];
}

template <typename Value>
class sell_delta16 final : public format_impl<Value> {
 public:
  explicit sell_delta16(const build_args<Value>& args) : rows_(args.a.rows)
  {
    const auto& a = args.a;
    const cudaStream_t stream = args.stream;
    const size_type slices = slice_count(rows_);
    slice_ptr_.resize(static_cast<std::size_t>(slices + 1));
    device_buffer<unsigned long long> bad(1);
    device_buffer<unsigned char> scan_temp;
    AIJP_CUDA_CHECK(cudaMemsetAsync(slice_ptr_.data(), 0, (slices + 1) * sizeof(long long), stream));
    AIJP_CUDA_CHECK(cudaMemsetAsync(bad.data(), 0, sizeof(unsigned long long), stream));
    if (rows_ > 0) {
      delta16_widths_and_check<<<grid_for(rows_), block_size, 0, stream>>>(rows_, a.row_ptr.data(), a.col_idx.data(),
                                                                            slice_ptr_.data(), bad.data());
      AIJP_CHECK_LAUNCH();
    }
    exclusive_scan(slice_ptr_.data(), slices + 1, scan_temp, stream);
    unsigned long long bad_rows = 0;
    AIJP_CUDA_CHECK(cudaMemcpyAsync(&bad_rows, bad.data(), sizeof(bad_rows), cudaMemcpyDeviceToHost, stream));
    const long long padded = read_back(slice_ptr_.data() + slices, stream);
    if (bad_rows > 0) {
      AIJP_THROW(not_supported, "sell_delta16: " + std::to_string(bad_rows) +
                                    " rows have unsorted columns or a column jump above 65535");
    }
    first_col_.resize(static_cast<std::size_t>(rows_));
    delta_.resize(static_cast<std::size_t>(padded));
    val_.resize(static_cast<std::size_t>(padded));
    fill(a, true, stream);
  }

  format_id id() const override { return format_id::sell_delta16; }
  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override { fill(a, false, stream); }

  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (rows_ == 0) return;
    if (beta == Value(0)) {
      sell_delta16_spmv<Value, true><<<grid_for(rows_), block_size, 0, stream>>>(
          rows_, slice_ptr_.data(), first_col_.data(), delta_.data(), val_.data(), alpha, x, beta, y);
    } else {
      sell_delta16_spmv<Value, false><<<grid_for(rows_), block_size, 0, stream>>>(
          rows_, slice_ptr_.data(), first_col_.data(), delta_.data(), val_.data(), alpha, x, beta, y);
    }
    AIJP_CHECK_LAUNCH();
  }

  size_type device_bytes() const override
  {
    return static_cast<size_type>(slice_ptr_.bytes() + first_col_.bytes() + delta_.bytes() + val_.bytes());
  }

 private:
  void fill(const device_csr<Value>& a, bool with_columns, cudaStream_t stream)
  {
    if (rows_ == 0) return;
    if (with_columns) {
      delta16_fill<Value, true><<<fill_grid(rows_), block_size, 0, stream>>>(rows_, a.row_ptr.data(), a.col_idx.data(),
                                                                              a.values.data(), slice_ptr_.data(),
                                                                              first_col_.data(), delta_.data(), val_.data());
    } else {
      delta16_fill<Value, false><<<fill_grid(rows_), block_size, 0, stream>>>(rows_, a.row_ptr.data(), a.col_idx.data(),
                                                                               a.values.data(), slice_ptr_.data(),
                                                                               first_col_.data(), delta_.data(), val_.data());
    }
    AIJP_CHECK_LAUNCH();
  }

  size_type rows_;
  device_buffer<long long> slice_ptr_;
  device_buffer<index_type> first_col_;  // first column of each row, -1 for an empty row
  device_buffer<delta_type> delta_;
  device_buffer<Value> val_;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_sell_delta16(const build_args<Value>& args)
{
  return std::make_unique<sell_delta16<Value>>(args);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_sell_delta16)

}  // namespace aijp::detail
