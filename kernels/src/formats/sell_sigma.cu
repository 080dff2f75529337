// SELL-C-sigma with C = 32 and sigma = 4096: inside each window of sigma consecutive rows, rows are sorted by
// decreasing length (stable, so equal lengths keep their order), giving perm; slices of 32 sorted rows are
// padded to their longest row and stored column-major (sell_common.cuh). Thread i computes sorted row i and
// writes y[perm[i]]. When every row has the same length nothing is sorted: perm is the identity and the
// kernel takes the path without it (no perm array, coalesced y writes).
// Conversion on the device: window keys, CUB radix sort (pairs), slice widths, CUB scan, fill.
#include "sell_common.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace aijp::detail {

namespace {

using namespace sell_common;

// Sorting window. sigma = rows (a global sort, PELLR) gives the least padding, 32 x N_iter sorted, but puts
// rows from anywhere in the matrix into one warp, and for the banded and mesh matrices PETSc assembles,
// neighbouring rows touch neighbouring columns: a global sort turns the warp's x gathers into scattered
// cache lines and y's writes into scatter. A window of 4096 rows (128 slices, a multiple of 32 so slices
// never straddle windows) keeps a warp's rows, and so its x entries and y writes, within a 4096-row band
// (32 KiB of y in double) while leaving enough rows to pair rows of similar length. A starting value from
// that reasoning, not tuned by a sweep yet; layout_ref_sell.hpp (sell_sigma_window) must use the same.
constexpr index_type sigma = 4096;
static_assert(sigma % slice_height == 0, "slices must not straddle sorting windows");

// key = (window << len_bits) | (max_len - len): an ascending sort groups windows and puts long rows first;
// only len_bits + window_bits key bits are sorted (a 7-point stencil of 8M rows: 3 + 11 bits, 2 passes).
__global__ void window_keys(size_type rows, const index_type* __restrict__ row_ptr, index_type max_len, int len_bits,
                            unsigned long long* __restrict__ keys, index_type* __restrict__ row_ids)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const index_type len = row_ptr[r + 1] - row_ptr[r];
  keys[r] = (static_cast<unsigned long long>(r / sigma) << len_bits) | static_cast<unsigned long long>(max_len - len);
  row_ids[r] = static_cast<index_type>(r);
}

// Padding entries (column -1, only where rows of a slice differ in length, and slots past the slice width
// inside the last chunk) add nothing; see sell_common::chunk for the loop shape.
template <typename Value, bool beta_zero, bool permuted>
__global__ void __launch_bounds__(block_size)
    sell_sigma_spmv(size_type rows, const long long* __restrict__ slice_ptr, const index_type* __restrict__ perm,
                    const index_type* __restrict__ sell_col, const Value* __restrict__ sell_val, Value alpha,
                    const Value* __restrict__ x, Value beta, Value* __restrict__ y)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const size_type r = permuted ? perm[i] : i;
  const size_type s = i / slice_height;
  const long long start = slice_ptr[s];
  const int width = static_cast<int>((slice_ptr[s + 1] - start) / slice_height);
  const index_type* col = sell_col + start + (i % slice_height);
  const Value* val = sell_val + start + (i % slice_height);
  Value sum = 0;
  for (int j = 0; j < width; j += chunk) {
    index_type c[chunk];
    Value v[chunk], xv[chunk];
#pragma unroll
    for (int u = 0; u < chunk; ++u) {
      const bool in = j + u < width;
      const long long k = static_cast<long long>(j + u) * slice_height;
      c[u] = in ? col[k] : padding_column;
      v[u] = in ? val[k] : Value(0);
    }
#pragma unroll
    for (int u = 0; u < chunk; ++u) xv[u] = c[u] >= 0 ? __ldg(x + c[u]) : Value(0);
#pragma unroll
    for (int u = 0; u < chunk; ++u) sum += v[u] * xv[u];
  }
  y[r] = beta_zero ? alpha * sum : alpha * sum + beta * y[r];
}

template <typename Value>
class sell_sigma final : public format_impl<Value> {
 public:
  /// sort == false gives SELL-32-1 (format `sell`): slices of consecutive rows, no permutation.
  sell_sigma(const build_args<Value>& args, bool sort)
      : id_(sort ? format_id::sell_sigma : format_id::sell_c_sigma), rows_(args.a.rows),
        permuted_(sort && args.stats.min_len != args.stats.max_len)
  {
    const auto& a = args.a;
    const cudaStream_t stream = args.stream;
    // Temporaries live until the synchronisation below, after the last kernel that reads them.
    device_buffer<unsigned long long> keys, sorted_keys;
    device_buffer<index_type> row_ids;
    device_buffer<unsigned char> sort_temp, scan_temp;
    if (permuted_ && rows_ > 0) {
      perm_.resize(static_cast<std::size_t>(rows_));
      keys.resize(static_cast<std::size_t>(rows_));
      sorted_keys.resize(static_cast<std::size_t>(rows_));
      row_ids.resize(static_cast<std::size_t>(rows_));
      const int len_bits = bits_for(static_cast<unsigned long long>(args.stats.max_len));
      const int window_bits = bits_for(static_cast<unsigned long long>((rows_ - 1) / sigma));
      window_keys<<<grid_for(rows_), block_size, 0, stream>>>(rows_, a.row_ptr.data(), args.stats.max_len, len_bits,
                                                               keys.data(), row_ids.data());
      AIJP_CHECK_LAUNCH();
      std::size_t temp_bytes = 0;
      const int n = static_cast<int>(rows_);
      AIJP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys.data(), sorted_keys.data(), row_ids.data(),
                                                      perm_.data(), n, 0, len_bits + window_bits, stream));
      sort_temp.resize(temp_bytes);
      AIJP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp.data(), temp_bytes, keys.data(), sorted_keys.data(),
                                                      row_ids.data(), perm_.data(), n, 0, len_bits + window_bits, stream));
    }
    slice_offsets(a.row_ptr.data(), rows_, permuted_ ? perm_.data() : nullptr, slice_ptr_, scan_temp, stream);
    const long long padded = read_back(slice_ptr_.data() + slice_count(rows_), stream);
    col_.resize(static_cast<std::size_t>(padded));
    val_.resize(static_cast<std::size_t>(padded));
    fill(a, true, stream);
  }

  format_id id() const override { return id_; }
  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override { fill(a, false, stream); }

  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (rows_ == 0) return;
    if (beta == Value(0)) {
      permuted_ ? spmv<true, true>(alpha, x, beta, y, stream) : spmv<true, false>(alpha, x, beta, y, stream);
    } else {
      permuted_ ? spmv<false, true>(alpha, x, beta, y, stream) : spmv<false, false>(alpha, x, beta, y, stream);
    }
  }

  size_type device_bytes() const override
  {
    return static_cast<size_type>(slice_ptr_.bytes() + perm_.bytes() + col_.bytes() + val_.bytes());
  }

 private:
  template <bool beta_zero, bool permuted>
  void spmv(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream)
  {
    sell_sigma_spmv<Value, beta_zero, permuted><<<grid_for(rows_), block_size, 0, stream>>>(
        rows_, slice_ptr_.data(), perm_.data(), col_.data(), val_.data(), alpha, x, beta, y);
    AIJP_CHECK_LAUNCH();
  }

  template <bool permuted, bool with_columns>
  void fill_as(const device_csr<Value>& a, cudaStream_t stream)
  {
    fill_slices<Value, long long, permuted, with_columns><<<fill_grid(rows_), block_size, 0, stream>>>(
        rows_, a.row_ptr.data(), a.col_idx.data(), a.values.data(), perm_.data(), slice_ptr_.data(), col_.data(),
        val_.data());
    AIJP_CHECK_LAUNCH();
  }

  void fill(const device_csr<Value>& a, bool with_columns, cudaStream_t stream)
  {
    if (rows_ == 0) return;
    if (permuted_) {
      with_columns ? fill_as<true, true>(a, stream) : fill_as<true, false>(a, stream);
    } else {
      with_columns ? fill_as<false, true>(a, stream) : fill_as<false, false>(a, stream);
    }
  }

  format_id id_;
  size_type rows_;
  bool permuted_;
  device_buffer<index_type> perm_;  // sorted row i is CSR row perm_[i]; empty when every row has the same length
  device_buffer<long long> slice_ptr_;
  device_buffer<index_type> col_;
  device_buffer<Value> val_;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_sell_sigma(const build_args<Value>& args)
{
  return std::make_unique<sell_sigma<Value>>(args, true);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_sell_sigma)

template <typename Value>
std::unique_ptr<format_impl<Value>> make_sell(const build_args<Value>& args)
{
  return std::make_unique<sell_sigma<Value>>(args, false);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_sell)

}  // namespace aijp::detail
