// Internal interface of the storage formats: each format converts from the device CSR copy on the GPU,
// refreshes values for an unchanged pattern, and applies y = alpha A x + beta y.
#pragma once

#include <aijpredict/csr.hpp>
#include <aijpredict/formats.hpp>

#include "device_buffer.hpp"

#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <memory>

namespace aijp::detail {

/// The device copy of the CSR matrix every format converts from (and cuSPARSE CSR runs on).
template <typename Value>
struct device_csr {
  size_type rows = 0;
  size_type cols = 0;
  size_type nnz = 0;
  device_buffer<index_type> row_ptr;
  device_buffer<index_type> col_idx;
  device_buffer<Value> values;
};

template <typename Value>
class format_impl {
 public:
  virtual ~format_impl() = default;
  virtual format_id id() const = 0;
  /// Rebuild the values from `a` (same pattern as at construction).
  virtual void refresh_values(const device_csr<Value>& a, cudaStream_t stream) = 0;
  /// y = alpha A x + beta y; beta == 0 must not read y.
  virtual void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) = 0;
  /// Device memory the format holds beyond the CSR copy.
  virtual size_type device_bytes() const = 0;
};

/// RAII cuSPARSE handle.
class cusparse_handle {
 public:
  cusparse_handle();
  ~cusparse_handle();
  cusparse_handle(const cusparse_handle&) = delete;
  cusparse_handle& operator=(const cusparse_handle&) = delete;
  cusparseHandle_t get() const { return handle_; }

 private:
  cusparseHandle_t handle_ = nullptr;
};

/// cuSPARSE generic SpMV on the CSR copy (ALG1; aijcusparse's kernel). Keeps a pointer to `a`.
template <typename Value>
std::unique_ptr<format_impl<Value>> make_cusparse_csr(const device_csr<Value>& a, cusparseHandle_t handle);

/// SELL-C-sigma with C = 32 and sigma = 1 (slices of 32 consecutive rows, column-major inside a slice).
template <typename Value>
std::unique_ptr<format_impl<Value>> make_sell(const device_csr<Value>& a, cudaStream_t stream);

/// Transpose product through cuSPARSE on the CSR copy: y = alpha A^T x + beta y.
template <typename Value>
class cusparse_transpose {
 public:
  cusparse_transpose(const device_csr<Value>& a, cusparseHandle_t handle);
  ~cusparse_transpose();
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream);

 private:
  const device_csr<Value>& a_;
  cusparseHandle_t handle_;
  cusparseSpMatDescr_t mat_ = nullptr;
  cusparseDnVecDescr_t x_ = nullptr;
  cusparseDnVecDescr_t y_ = nullptr;
  device_buffer<unsigned char> buffer_;
};

}  // namespace aijp::detail
