// cuSPARSE CSR: the aijcusparse baseline, always feasible, and the transpose product.
#include "format_impl.hpp"

#include <type_traits>

namespace aijp::detail {

namespace {

template <typename Value>
class cusparse_csr final : public format_impl<Value> {
 public:
  // With cusparseSpMV_preprocess, as PETSc's aijcusparse calls it (CUDA >= 12.4): this is the baseline the
  // formats are compared with and the path short solves run on, so it must be the same work aijcusparse
  // does. Without it, lap7 10^3 under 20000 Richardson iterations took 35-47 us per iteration forced to
  // this format against 30-31 us with aijcusparse; with it 22-34 us against 30-35 us (H100, 2026-11-23,
  // bench/results/2026-11-23_h100_overhead.txt).
  cusparse_csr(const device_csr<Value>& a, cusparseHandle_t handle) : runner_(handle, CUSPARSE_SPMV_CSR_ALG1, true)
  {
    runner_.set_matrix(make_csr_descriptor(a.rows, a.cols, a.nnz, a.row_ptr.data(), a.col_idx.data(), a.values.data()),
                       a.rows, a.cols);
  }
  format_id id() const override { return format_id::cusparse_csr; }
  void refresh_values(const device_csr<Value>&, cudaStream_t) override {}  // runs on the CSR copy itself
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    runner_.apply(alpha, x, beta, y, stream);
  }
  size_type device_bytes() const override { return static_cast<size_type>(runner_.workspace_bytes()); }

 private:
  spmv_runner<Value> runner_;
};

}  // namespace

cusparseHandle_t cusparse_handle::get() const
{
  if (!handle_) AIJP_CUSPARSE_CHECK(cusparseCreate(&handle_));
  return handle_;
}
cusparse_handle::~cusparse_handle()
{
  if (handle_) cusparseDestroy(handle_);
}

template <typename Value>
std::unique_ptr<format_impl<Value>> make_cusparse_csr(const device_csr<Value>& a, cusparseHandle_t handle)
{
  return std::make_unique<cusparse_csr<Value>>(a, handle);
}

template <typename Value>
cusparse_transpose<Value>::cusparse_transpose(const device_csr<Value>& a, cusparseHandle_t handle)
    : runner_(handle, CUSPARSE_SPMV_ALG_DEFAULT, false, CUSPARSE_OPERATION_TRANSPOSE)
{
  runner_.set_matrix(make_csr_descriptor(a.rows, a.cols, a.nnz, a.row_ptr.data(), a.col_idx.data(), a.values.data()), a.rows,
                     a.cols);
}

template <typename Value>
void cusparse_transpose<Value>::apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream)
{
  runner_.apply(alpha, x, beta, y, stream);
}

#define AIJP_INSTANTIATE(Value)                                                                                  \
  template std::unique_ptr<format_impl<Value>> make_cusparse_csr<Value>(const device_csr<Value>&, cusparseHandle_t); \
  template class cusparse_transpose<Value>;
AIJP_INSTANTIATE(double)
AIJP_INSTANTIATE(float)
#undef AIJP_INSTANTIATE

}  // namespace aijp::detail
