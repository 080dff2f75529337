// cuSPARSE generic SpMV plumbing shared by the cuSPARSE-backed formats and the transpose product.
#pragma once

#include "device_buffer.hpp"

#include <aijpredict/csr.hpp>

#include <cusparse.h>

#include <type_traits>

namespace aijp::detail {

template <typename Value>
constexpr cudaDataType value_type_v = std::is_same_v<Value, double> ? CUDA_R_64F : CUDA_R_32F;

// Binds a dense-vector descriptor to `ptr`, creating it on first use (host object; rebinding is free).
template <typename Value>
void bind_vector(cusparseDnVecDescr_t& vec, size_type n, const Value* ptr)
{
  if (vec == nullptr) {
    AIJP_CUSPARSE_CHECK(cusparseCreateDnVec(&vec, n, const_cast<Value*>(ptr), value_type_v<Value>));
  } else {
    AIJP_CUSPARSE_CHECK(cusparseDnVecSetValues(vec, const_cast<Value*>(ptr)));
  }
}

// Owns a matrix descriptor and the x/y descriptors and workspace of cusparseSpMV with one algorithm.
template <typename Value>
class spmv_runner {
 public:
  spmv_runner(cusparseHandle_t handle, cusparseSpMVAlg_t alg, bool preprocess,
              cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE)
      : handle_(handle), alg_(alg), preprocess_(preprocess), op_(op)
  {
  }
  ~spmv_runner()
  {
    if (x_) cusparseDestroyDnVec(x_);
    if (y_) cusparseDestroyDnVec(y_);
    if (mat_) cusparseDestroySpMat(mat_);
  }
  spmv_runner(const spmv_runner&) = delete;
  spmv_runner& operator=(const spmv_runner&) = delete;

  /// Takes ownership of the matrix descriptor.
  void set_matrix(cusparseSpMatDescr_t mat, size_type rows, size_type cols)
  {
    mat_ = mat;
    rows_ = rows;
    cols_ = cols;
  }
  bool has_matrix() const { return mat_ != nullptr; }

  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream)
  {
    const bool t = op_ != CUSPARSE_OPERATION_NON_TRANSPOSE;
    bind_vector(x_, t ? rows_ : cols_, x);
    bind_vector(y_, t ? cols_ : rows_, static_cast<const Value*>(y));
    const auto op = op_;
    AIJP_CUSPARSE_CHECK(cusparseSetStream(handle_, stream));
    if (!ready_) {
      std::size_t bytes = 0;
      AIJP_CUSPARSE_CHECK(cusparseSpMV_bufferSize(handle_, op, &alpha, mat_, x_, &beta, y_, value_type_v<Value>, alg_, &bytes));
      buffer_.resize(bytes);
      if (preprocess_) {
        AIJP_CUSPARSE_CHECK(cusparseSpMV_preprocess(handle_, op, &alpha, mat_, x_, &beta, y_, value_type_v<Value>, alg_,
                                                    buffer_.data()));
      }
      ready_ = true;
    }
    AIJP_CUSPARSE_CHECK(cusparseSpMV(handle_, op, &alpha, mat_, x_, &beta, y_, value_type_v<Value>, alg_, buffer_.data()));
  }
  std::size_t workspace_bytes() const { return buffer_.bytes(); }

 private:
  cusparseHandle_t handle_;
  cusparseSpMVAlg_t alg_;
  bool preprocess_;
  cusparseOperation_t op_;
  bool ready_ = false;
  size_type rows_ = 0;
  size_type cols_ = 0;
  cusparseSpMatDescr_t mat_ = nullptr;
  cusparseDnVecDescr_t x_ = nullptr;
  cusparseDnVecDescr_t y_ = nullptr;
  device_buffer<unsigned char> buffer_;
};


/// Descriptor of the device CSR arrays (32-bit indices, zero based); the caller owns it.
template <typename Value>
cusparseSpMatDescr_t make_csr_descriptor(size_type rows, size_type cols, size_type nnz, const index_type* row_ptr,
                                         const index_type* col_idx, const Value* values)
{
  cusparseSpMatDescr_t mat = nullptr;
  AIJP_CUSPARSE_CHECK(cusparseCreateCsr(&mat, rows, cols, nnz, const_cast<index_type*>(row_ptr),
                                        const_cast<index_type*>(col_idx), const_cast<Value*>(values), CUSPARSE_INDEX_32I,
                                        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, value_type_v<Value>));
  return mat;
}

}  // namespace aijp::detail
