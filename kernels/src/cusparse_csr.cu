// cuSPARSE CSR: the aijcusparse baseline, always feasible, and the transpose product.
#include "format_impl.hpp"

#include <type_traits>

namespace aijp::detail {

namespace {

template <typename Value>
constexpr cudaDataType value_type_v = std::is_same_v<Value, double> ? CUDA_R_64F : CUDA_R_32F;

template <typename Value>
cusparseSpMatDescr_t make_descriptor(const device_csr<Value>& a)
{
  cusparseSpMatDescr_t mat = nullptr;
  AIJP_CUSPARSE_CHECK(cusparseCreateCsr(&mat, a.rows, a.cols, a.nnz, const_cast<index_type*>(a.row_ptr.data()),
                                        const_cast<index_type*>(a.col_idx.data()), const_cast<Value*>(a.values.data()),
                                        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                        value_type_v<Value>));
  return mat;
}

// Binds a dense-vector descriptor to `ptr`, creating it on first use (cuSPARSE descriptors are host objects;
// rebinding the pointer costs nothing, as PETSc's aijcusparse does with cusparseDnVecSetValues).
template <typename Value>
void bind_vector(cusparseDnVecDescr_t& vec, size_type n, const Value* ptr)
{
  if (vec == nullptr) {
    AIJP_CUSPARSE_CHECK(cusparseCreateDnVec(&vec, n, const_cast<Value*>(ptr), value_type_v<Value>));
  } else {
    AIJP_CUSPARSE_CHECK(cusparseDnVecSetValues(vec, const_cast<Value*>(ptr)));
  }
}

// One SpMV through cuSPARSE, sizing the work buffer on first use.
template <typename Value>
void run_spmv(cusparseHandle_t handle, cusparseOperation_t op, cusparseSpMVAlg_t alg, cusparseSpMatDescr_t mat,
              cusparseDnVecDescr_t x, cusparseDnVecDescr_t y, Value alpha, Value beta, device_buffer<unsigned char>& buffer,
              bool& sized, cudaStream_t stream)
{
  AIJP_CUSPARSE_CHECK(cusparseSetStream(handle, stream));
  if (!sized) {
    std::size_t bytes = 0;
    AIJP_CUSPARSE_CHECK(cusparseSpMV_bufferSize(handle, op, &alpha, mat, x, &beta, y, value_type_v<Value>, alg, &bytes));
    buffer.resize(bytes);
    sized = true;
  }
  AIJP_CUSPARSE_CHECK(cusparseSpMV(handle, op, &alpha, mat, x, &beta, y, value_type_v<Value>, alg, buffer.data()));
}

template <typename Value>
class cusparse_csr final : public format_impl<Value> {
 public:
  cusparse_csr(const device_csr<Value>& a, cusparseHandle_t handle) : a_(a), handle_(handle), mat_(make_descriptor(a)) {}
  ~cusparse_csr() override
  {
    if (x_) cusparseDestroyDnVec(x_);
    if (y_) cusparseDestroyDnVec(y_);
    if (mat_) cusparseDestroySpMat(mat_);
  }
  format_id id() const override { return format_id::cusparse_csr; }
  void refresh_values(const device_csr<Value>&, cudaStream_t) override {}  // runs on the CSR copy itself
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    bind_vector(x_, a_.cols, x);
    bind_vector(y_, a_.rows, static_cast<const Value*>(y));
    run_spmv(handle_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_SPMV_CSR_ALG1, mat_, x_, y_, alpha, beta, buffer_,
             sized_, stream);
  }
  size_type device_bytes() const override { return static_cast<size_type>(buffer_.bytes()); }

 private:
  const device_csr<Value>& a_;
  cusparseHandle_t handle_;
  cusparseSpMatDescr_t mat_ = nullptr;
  cusparseDnVecDescr_t x_ = nullptr;
  cusparseDnVecDescr_t y_ = nullptr;
  device_buffer<unsigned char> buffer_;
  bool sized_ = false;
};

}  // namespace

cusparse_handle::cusparse_handle() { AIJP_CUSPARSE_CHECK(cusparseCreate(&handle_)); }
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
    : a_(a), handle_(handle), mat_(make_descriptor(a))
{
}

template <typename Value>
cusparse_transpose<Value>::~cusparse_transpose()
{
  if (x_) cusparseDestroyDnVec(x_);
  if (y_) cusparseDestroyDnVec(y_);
  if (mat_) cusparseDestroySpMat(mat_);
}

template <typename Value>
void cusparse_transpose<Value>::apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream)
{
  bind_vector(x_, a_.rows, x);
  bind_vector(y_, a_.cols, static_cast<const Value*>(y));
  bool sized = buffer_.size() > 0;
  run_spmv(handle_, CUSPARSE_OPERATION_TRANSPOSE, CUSPARSE_SPMV_ALG_DEFAULT, mat_, x_, y_, alpha, beta, buffer_, sized,
           stream);
}

#define AIJP_INSTANTIATE(Value)                                                                                  \
  template std::unique_ptr<format_impl<Value>> make_cusparse_csr<Value>(const device_csr<Value>&, cusparseHandle_t); \
  template class cusparse_transpose<Value>;
AIJP_INSTANTIATE(double)
AIJP_INSTANTIATE(float)
#undef AIJP_INSTANTIATE

}  // namespace aijp::detail
