// cuSPARSE variants beside the ALG1 baseline (cusparse_csr.cu): CSR with the merge-based ALG2 after
// cusparseSpMV_preprocess, and cuSPARSE's sliced ELL (SELL, slice 32) built on the device.
//
// How cuSPARSE (12.6, CUDA 13.0) is used here, and what was checked on an H200 (2026-11-22) with the GPU
// format test (every shared matrix and edge case, double and float) plus compute-sanitizer memcheck:
// - The workspace of cusparseSpMV_bufferSize is sized once; the same buffer goes to cusparseSpMV_preprocess
//   and to every later cusparseSpMV, and lives as long as the format.
// - cusparseSpMV_preprocess runs once, on the first product, with that call's alpha, beta and vectors. Its
//   result is attached to the matrix descriptor, which is created once and never re-pointed. Later products
//   with other alpha/beta and other x/y pointers (the test: beta = 0, then beta = 0.5 into another y) and
//   after new values were written into the same CSR arrays (refresh) gave correct results: preprocessing
//   depends on the pattern only, and a new pattern means a new format object (the plan re-converts).
// - beta == 0: y is not read (the NaN the test plants in y does not propagate), for ALG2 and SELL alike,
//   so no memset is needed.
// - SELL: slice offsets and columns as 32-bit indices (the padded size must fit in int32, else
//   not_supported), padding column -1 with value 0, every slice 32 rows tall (the last one too; its missing
//   rows are all padding); CUSPARSE_SPMV_SELL_ALG1 is the algorithm for CUSPARSE_FORMAT_SLICED_ELL.
#include "sell_common.cuh"
#include "../cusparse_spmv.hpp"
#include "../vector_ops.hpp"

#include <limits>
#include <string>
#include <type_traits>

namespace aijp::detail {

namespace {

using namespace sell_common;

template <typename Value>
class cusparse_csr_alg2 final : public format_impl<Value> {
 public:
  explicit cusparse_csr_alg2(const build_args<Value>& args) : runner_(args.handle(), CUSPARSE_SPMV_CSR_ALG2, true)
  {
    const auto& a = args.a;
    runner_.set_matrix(make_csr_descriptor(a.rows, a.cols, a.nnz, a.row_ptr.data(), a.col_idx.data(), a.values.data()),
                       a.rows, a.cols);
  }
  format_id id() const override { return format_id::cusparse_csr_alg2; }
  // The descriptor points at the CSR copy, whose values the caller rewrote in place; the pattern, all that
  // preprocessing looked at, is unchanged.
  void refresh_values(const device_csr<Value>&, cudaStream_t) override {}
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    runner_.apply(alpha, x, beta, y, stream);
  }
  size_type device_bytes() const override { return static_cast<size_type>(runner_.workspace_bytes()); }

 private:
  spmv_runner<Value> runner_;
};

// int32 copy of the 64-bit slice offsets (checked to fit before).
__global__ void narrow_offsets(size_type n, const long long* __restrict__ in, index_type* __restrict__ out)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<index_type>(in[i]);
}

template <typename Value>
class cusparse_sell final : public format_impl<Value> {
 public:
  explicit cusparse_sell(const build_args<Value>& args)
      : rows_(args.a.rows), runner_(args.handle(), CUSPARSE_SPMV_SELL_ALG1, false)
  {
    const auto& a = args.a;
    const cudaStream_t stream = args.stream;
    // Without a product to compute, no descriptor: apply() scales y (the caller short-cuts these anyway).
    if (a.rows == 0 || a.cols == 0 || a.nnz == 0) return;
    const size_type slices = slice_count(rows_);
    device_buffer<long long> slice_ptr64;
    device_buffer<unsigned char> scan_temp;
    slice_offsets(a.row_ptr.data(), rows_, nullptr, slice_ptr64, scan_temp, stream);
    const long long padded = read_back(slice_ptr64.data() + slices, stream);
    if (padded > std::numeric_limits<index_type>::max()) {
      AIJP_THROW(not_supported, "cusparse_sell: " + std::to_string(padded) +
                                    " stored entries exceed cuSPARSE's 32-bit slice offsets");
    }
    slice_ptr_.resize(static_cast<std::size_t>(slices + 1), a.layout_memory());
    narrow_offsets<<<grid_for(slices + 1), block_size, 0, stream>>>(slices + 1, slice_ptr64.data(), slice_ptr_.data());
    AIJP_CHECK_LAUNCH();
    col_.resize(static_cast<std::size_t>(padded), a.layout_memory());
    val_.resize(static_cast<std::size_t>(padded), a.layout_memory());
    fill(a, true, stream);
    // slice_ptr64 is read by narrow_offsets: wait before it is released (and before anything can throw).
    detail::wait_stream(stream);
    cusparseSpMatDescr_t mat = nullptr;
    AIJP_CUSPARSE_CHECK(cusparseCreateSlicedEll(&mat, a.rows, a.cols, a.nnz, padded, slice_height, slice_ptr_.data(),
                                                col_.data(), val_.data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                                CUSPARSE_INDEX_BASE_ZERO, value_type_v<Value>));
    runner_.set_matrix(mat, a.rows, a.cols);
  }
  format_id id() const override { return format_id::cusparse_sell; }
  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override
  {
    if (runner_.has_matrix()) fill(a, false, stream);
  }
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (runner_.has_matrix()) {
      runner_.apply(alpha, x, beta, y, stream);
    } else {
      scale_or_zero(rows_, beta, y, stream);  // no descriptor: no rows, columns or nonzeros
    }
  }
  size_type device_bytes() const override
  {
    return static_cast<size_type>(slice_ptr_.bytes() + col_.bytes() + val_.bytes() + runner_.workspace_bytes());
  }

 private:
  void fill(const device_csr<Value>& a, bool with_columns, cudaStream_t stream)
  {
    if (with_columns) {
      fill_slices<Value, index_type, false, true><<<fill_grid(rows_), block_size, 0, stream>>>(
          rows_, 0, padded_rows(rows_), a.row_ptr.data(), a.col_idx.data(), a.values.data(), nullptr, slice_ptr_.data(), col_.data(), val_.data());
    } else {
      fill_slices<Value, index_type, false, false><<<fill_grid(rows_), block_size, 0, stream>>>(
          rows_, 0, padded_rows(rows_), a.row_ptr.data(), a.col_idx.data(), a.values.data(), nullptr, slice_ptr_.data(), col_.data(), val_.data());
    }
    AIJP_CHECK_LAUNCH();
  }

  size_type rows_;
  spmv_runner<Value> runner_;
  device_buffer<index_type> slice_ptr_;  // 32-bit, as cuSPARSE takes them
  device_buffer<index_type> col_;
  device_buffer<Value> val_;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_cusparse_csr_alg2(const build_args<Value>& args)
{
  return std::make_unique<cusparse_csr_alg2<Value>>(args);
}
#if AIJP_FORMAT_PART_ENABLED(1)
AIJP_INSTANTIATE_FORMAT_FACTORY(make_cusparse_csr_alg2)
#endif

template <typename Value>
std::unique_ptr<format_impl<Value>> make_cusparse_sell(const build_args<Value>& args)
{
  return std::make_unique<cusparse_sell<Value>>(args);
}
#if AIJP_FORMAT_PART_ENABLED(2)
AIJP_INSTANTIATE_FORMAT_FACTORY(make_cusparse_sell)
#endif

}  // namespace aijp::detail
