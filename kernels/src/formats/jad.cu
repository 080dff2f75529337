// JAD, jagged diagonals (Wang & Gu 2020, section 2.3.5): the rows sorted by decreasing length (stable, as
// PELLR), then diagonal k holds the k-th entry of every sorted row longer than k, i.e. of sorted rows
// 0 .. c(k+1) - 1 with c(L) = number of rows of length >= L. jd_ptr[k] is where diagonal k starts
// (jd_ptr[K] = nnz), so entry k of sorted row i sits at jd_ptr[k] + i: lane i of a warp reads consecutive
// addresses, with no padding at all.
// SpMV: thread per sorted row i; its length is the number of diagonals longer than i (a binary search over
// jd_ptr, whose diagonal sizes are non-increasing, in cache), so the layout needs no row-length array;
// it writes y[perm[i]].
// Conversion on the device: sort (ell.cu), one scan whose input counts c(k+1) by a binary search in the
// sorted lengths (no histogram pass), one fill; sizes come from row_stats (nnz, max_len), no host round trip.
#include "ell_common.cuh"

#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

namespace aijp::detail {

namespace {

using namespace ell_family;

// Size of diagonal k = number of sorted rows longer than k (0 for k = K, the slot the scan turns into nnz).
struct diagonal_size_op {
  const index_type* sorted_len;  // non-increasing
  size_type rows;
  index_type width;
  __device__ index_type operator()(size_type k) const
  {
    if (k >= width) return 0;
    size_type lo = 0, hi = rows;  // first position whose length is <= k
    while (lo < hi) {
      const size_type mid = lo + (hi - lo) / 2;
      if (sorted_len[mid] > k) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return static_cast<index_type>(lo);
  }
};

// Length of sorted row i = number of diagonals with more than i entries.
__device__ __forceinline__ index_type jad_row_length(const index_type* __restrict__ jd_ptr, index_type width, size_type i)
{
  index_type lo = 0, hi = width;
  while (lo < hi) {
    const index_type mid = lo + (hi - lo) / 2;
    if (jd_ptr[mid + 1] - jd_ptr[mid] > i) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Thread per sorted row i: scatters its entries to jd_ptr[k] + i (consecutive threads, consecutive addresses).
template <typename Value, bool with_columns>
__global__ void __launch_bounds__(block_size)
    jad_fill(size_type rows, index_type width, const index_type* __restrict__ row_ptr,
             const index_type* __restrict__ col_idx, const Value* __restrict__ values,
             const index_type* __restrict__ perm, const index_type* __restrict__ jd_ptr,
             index_type* __restrict__ jad_col, Value* __restrict__ jad_val)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const index_type r = perm[i];
  const index_type begin = row_ptr[r];
  const index_type len = min(row_ptr[r + 1] - begin, width);
  for (index_type k = 0; k < len; ++k) {
    const size_type dst = static_cast<size_type>(jd_ptr[k]) + i;
    if (with_columns) jad_col[dst] = col_idx[begin + k];
    jad_val[dst] = values[begin + k];
  }
}

template <typename Value, bool beta_zero>
__global__ void __launch_bounds__(block_size)
    jad_spmv(size_type rows, index_type width, const index_type* __restrict__ jd_ptr,
             const index_type* __restrict__ perm, const index_type* __restrict__ jad_col,
             const Value* __restrict__ jad_val, Value alpha, const Value* __restrict__ x, Value beta,
             Value* __restrict__ y)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const index_type r = perm[i];
  const index_type len = jad_row_length(jd_ptr, width, i);
  const index_type* col = jad_col + i;
  const Value* val = jad_val + i;
  Value sum = 0;
#pragma unroll 4
  for (index_type k = 0; k < len; ++k) {
    const index_type start = jd_ptr[k];
    sum += val[start] * __ldg(x + col[start]);
  }
  y[r] = beta_zero ? alpha * sum : alpha * sum + beta * y[r];
}

template <typename Value>
class jad final : public format_impl<Value> {
 public:
  explicit jad(const build_args<Value>& args) : rows_(args.a.rows), width_(args.stats.max_len)
  {
    const device_csr<Value>& a = args.a;
    AIJP_ENSURE(args.stats.rows == a.rows && args.stats.nnz == a.nnz, error, "jad: statistics do not describe this matrix");
    col_.resize(static_cast<std::size_t>(a.nnz), a.layout_memory());
    val_.resize(static_cast<std::size_t>(a.nnz), a.layout_memory());
    perm_.resize(static_cast<std::size_t>(rows_), a.layout_memory());
    jd_ptr_.resize(static_cast<std::size_t>(width_) + 1, a.layout_memory());
    if (rows_ == 0) {
      AIJP_CUDA_CHECK(cudaMemsetAsync(jd_ptr_.data(), 0, sizeof(index_type), args.stream));
      return;
    }

    // jd_ptr = exclusive scan of the diagonal sizes over K + 1 slots (the last, 0, becomes nnz).
    const size_type diagonals = width_;
    const auto sizes = thrust::make_transform_iterator(thrust::counting_iterator<size_type>(0),
                                                       diagonal_size_op{nullptr, rows_, width_});
    std::size_t cub_bytes = 0;
    AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, cub_bytes, sizes, jd_ptr_.data(), diagonals + 1, args.stream));
    scratch temp;
    const std::size_t len_at = temp.reserve<index_type>(rows_);
    const std::size_t cub_at = temp.reserve<unsigned char>(static_cast<size_type>(cub_bytes));
    temp.allocate();
    index_type* sorted_len = temp.at<index_type>(len_at);

    sort_rows_by_length(rows_, a.row_ptr.data(), width_, sorted_len, perm_.data(), args.stream);
    const auto sizes_of_sorted = thrust::make_transform_iterator(thrust::counting_iterator<size_type>(0),
                                                                 diagonal_size_op{sorted_len, rows_, width_});
    AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.at<unsigned char>(cub_at), cub_bytes, sizes_of_sorted,
                                                  jd_ptr_.data(), diagonals + 1, args.stream));
    fill<true>(a, args.stream);
  }

  format_id id() const override { return format_id::jad; }

  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override { fill<false>(a, stream); }

  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (rows_ == 0) return;
    if (beta == Value(0)) {
      jad_spmv<Value, true><<<grid_for(rows_), block_size, 0, stream>>>(rows_, width_, jd_ptr_.data(), perm_.data(),
                                                                       col_.data(), val_.data(), alpha, x, beta, y);
    } else {
      jad_spmv<Value, false><<<grid_for(rows_), block_size, 0, stream>>>(rows_, width_, jd_ptr_.data(), perm_.data(),
                                                                        col_.data(), val_.data(), alpha, x, beta, y);
    }
    AIJP_CHECK_LAUNCH();
  }

  size_type device_bytes() const override
  {
    return static_cast<size_type>(col_.bytes() + val_.bytes() + perm_.bytes() + jd_ptr_.bytes());
  }

 private:
  template <bool with_columns>
  void fill(const device_csr<Value>& a, cudaStream_t stream)
  {
    if (rows_ == 0) return;
    jad_fill<Value, with_columns><<<grid_for(rows_), block_size, 0, stream>>>(
        rows_, width_, a.row_ptr.data(), a.col_idx.data(), a.values.data(), perm_.data(), jd_ptr_.data(), col_.data(),
        val_.data());
    AIJP_CHECK_LAUNCH();
  }

  size_type rows_;
  index_type width_;  // K = the longest row = the number of jagged diagonals
  device_buffer<index_type> col_;
  device_buffer<Value> val_;
  device_buffer<index_type> perm_;    // perm_[i] = matrix row of sorted row i
  device_buffer<index_type> jd_ptr_;  // K + 1 entries
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_jad(const build_args<Value>& args)
{
  return std::make_unique<jad<Value>>(args);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_jad)

}  // namespace aijp::detail
