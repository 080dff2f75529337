// Internal interface of the storage formats: each format converts from the device CSR copy on the GPU,
// refreshes values for an unchanged pattern, and applies y = alpha A x + beta y.
#pragma once

#include <aijpredict/csr.hpp>
#include <aijpredict/error.hpp>
#include <aijpredict/formats.hpp>
#include <aijpredict/stats.hpp>

#include "async_ops.hpp"
#include "cusparse_spmv.hpp"
#include "device_buffer.hpp"

#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace aijp::detail {

/// The device copy of the CSR matrix every format converts from (and cuSPARSE CSR runs on). gpu_matrix
/// uploads it into one allocation (`storage`; the three arrays borrow from it) followed by the layout
/// reserve: formats built from it take their layout arrays from `reserve` while it has room
/// (layout_reserve.hpp; null: none). A row block's copy (partitioned.cu) shares its parent's reserve.
template <typename Value>
struct device_csr {
  size_type rows = 0;
  size_type cols = 0;
  size_type nnz = 0;
  device_buffer<index_type> row_ptr;
  device_buffer<index_type> col_idx;
  device_buffer<Value> values;
  storage_block storage;                   ///< the arrays' and the reserve's one allocation, when they share one
  std::shared_ptr<layout_reserve> reserve;
  layout_reserve* layout_memory() const { return reserve.get(); }
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

/// A conversion split into parts (staged steps, gpu_matrix.hpp): advance() issues the next part on the
/// stream it is given without waiting for the device, or issues nothing while a read-back it needs is in
/// flight, and returns true once the last part is issued; take() then returns the format, complete in that
/// stream's order. wait() blocks until such a read-back is done. Throws as the factories do (not_supported,
/// device_out_of_memory); the format under construction is then discarded.
template <typename Value>
class format_builder {
 public:
  virtual ~format_builder() = default;
  virtual bool advance(cudaStream_t stream) = 0;
  virtual void wait() = 0;
  virtual std::unique_ptr<format_impl<Value>> take() = 0;
  /// Parts of the conversion issued so far (each advance that issued device work counts one).
  virtual int parts_issued() const = 0;
  /// What the last advance did, for a report of a slow part (empty: nothing to add to the stage's name).
  virtual std::string last_part() const { return {}; }
  /// All parts at once, waiting at each read-back: the synchronous factories of the formats with a builder.
  std::unique_ptr<format_impl<Value>> build_whole(cudaStream_t stream)
  {
    while (!advance(stream)) wait();
    return take();
  }
};

/// RAII cuSPARSE handle, created at its first use: a plan built on a background thread
/// (gpu_matrix::start_background) creates its own handle there, not on the thread that starts it. Not
/// synchronised: one thread uses a handle at a time.
class cusparse_handle {
 public:
  cusparse_handle() = default;
  ~cusparse_handle();
  cusparse_handle(const cusparse_handle&) = delete;
  cusparse_handle& operator=(const cusparse_handle&) = delete;
  cusparseHandle_t get() const;
  /// Whether get() has created the handle.
  bool created() const { return handle_ != nullptr; }
  void swap(cusparse_handle& other) noexcept { std::swap(handle_, other.handle_); }

 private:
  mutable cusparseHandle_t handle_ = nullptr;
};

/// cuSPARSE generic SpMV on the CSR copy (ALG1; aijcusparse's kernel). Keeps a pointer to `a`.
template <typename Value>
std::unique_ptr<format_impl<Value>> make_cusparse_csr(const device_csr<Value>& a, cusparseHandle_t handle);


/// What every format factory receives. `a` outlives the format (formats may keep pointers into it, as
/// cuSPARSE CSR does); `stats` are the device-computed row statistics of `a`. A factory throws
/// aijp::not_supported when the matrix does not fit the layout (the caller falls back to cuSPARSE CSR) and
/// aijp::device_out_of_memory when an allocation fails.
template <typename Value>
struct build_args {
  const device_csr<Value>& a;
  const row_stats& stats;
  const cusparse_handle& handles;  ///< the plan's handle, created by the first format that needs one
  cudaStream_t stream;
  cusparseHandle_t handle() const { return handles.get(); }
};

#define AIJP_DECLARE_FORMAT_FACTORY(name) \
  template <typename Value>               \
  std::unique_ptr<format_impl<Value>> name(const build_args<Value>& args);

// kernels/src/formats/csr.cu, coo.cu
AIJP_DECLARE_FORMAT_FACTORY(make_csr_scalar)
AIJP_DECLARE_FORMAT_FACTORY(make_csr_vector)
AIJP_DECLARE_FORMAT_FACTORY(make_coo)
// kernels/src/formats/ell.cu, jad.cu, hyb.cu
AIJP_DECLARE_FORMAT_FACTORY(make_ell)
AIJP_DECLARE_FORMAT_FACTORY(make_ellr)
AIJP_DECLARE_FORMAT_FACTORY(make_pellr)
AIJP_DECLARE_FORMAT_FACTORY(make_jad)
AIJP_DECLARE_FORMAT_FACTORY(make_hyb)
// kernels/src/formats/sell_sigma.cu (make_sell: sigma = 1), sell_delta16.cu, cusparse_variants.cu
AIJP_DECLARE_FORMAT_FACTORY(make_sell)
AIJP_DECLARE_FORMAT_FACTORY(make_sell_sigma)
AIJP_DECLARE_FORMAT_FACTORY(make_sell_delta16)
AIJP_DECLARE_FORMAT_FACTORY(make_cusparse_csr_alg2)
AIJP_DECLARE_FORMAT_FACTORY(make_cusparse_sell)

/// sell_delta16 converted in parts: the slice offsets and one read-back first, then fills of at most
/// `rows_per_part` rows (whole slices) per advance, then the read-back of the column check.
/// make_sell_delta16 runs the same builder with one fill, waiting at each read-back.
template <typename Value>
std::unique_ptr<format_builder<Value>> make_sell_delta16_builder(const device_csr<Value>& a, size_type rows_per_part);

/// sell_sigma (sort) or sell converted in parts: the window sort, the slice offsets and one read-back, the
/// one allocation, then fills of at most `rows_per_part` rows (whole slices) per advance. make_sell and
/// make_sell_sigma run the same builder with one fill, waiting at the read-back.
template <typename Value>
std::unique_ptr<format_builder<Value>> make_sell_builder(const device_csr<Value>& a, const row_stats& stats, bool sort,
                                                         size_type rows_per_part);

/// Whether make_format_builder has a builder for `f` (the formats converted in parts).
inline bool has_format_builder(format_id f)
{
  return f == format_id::sell_delta16 || f == format_id::sell_sigma || f == format_id::sell_c_sigma;
}

/// The builder of a format converted in parts (staged steps), or null for one converted whole
/// (has_format_builder false).
template <typename Value>
std::unique_ptr<format_builder<Value>> make_format_builder(format_id f, const device_csr<Value>& a, const row_stats& stats,
                                                           size_type rows_per_part)
{
  switch (f) {
    case format_id::sell_delta16: return make_sell_delta16_builder<Value>(a, rows_per_part);
    case format_id::sell_sigma: return make_sell_builder<Value>(a, stats, true, rows_per_part);
    case format_id::sell_c_sigma: return make_sell_builder<Value>(a, stats, false, rows_per_part);
    default: return nullptr;
  }
}

// Which value types and which part of a format source one translation unit instantiates. kernels/CMakeLists.txt
// compiles each format source once per value type and part (AIJP_FORMAT_DOUBLE / AIJP_FORMAT_FLOAT 0 or 1,
// AIJP_FORMAT_PART n), so that each CUDA module holds only the kernels of one format family and value type.
// Under lazy loading (CUDA's default) a module is loaded at the first use of any of its kernels, on the
// issuing thread, after the work queued on the GPU has drained, and it costs ~85 us plus ~25 us per kernel in
// it (H100: 41 kernels 1.0-1.1 ms, 201 kernels 4.8-5.8 ms; loading it on another thread stalls the issuing
// thread as long: bench/results/2026-11-24_h100_session14_module_load.txt). A staged step's conversion part
// held such a load (csr.cu's 44 kernels: 0.7 ms). Without these definitions a source instantiates all.
#ifndef AIJP_FORMAT_DOUBLE
#define AIJP_FORMAT_DOUBLE 1
#endif
#ifndef AIJP_FORMAT_FLOAT
#define AIJP_FORMAT_FLOAT 1
#endif
#ifndef AIJP_FORMAT_PART
#define AIJP_FORMAT_PART 0
#endif
/// Whether this translation unit instantiates part `n` of a format source with several factories (0: all).
#define AIJP_FORMAT_PART_ENABLED(n) (AIJP_FORMAT_PART == 0 || AIJP_FORMAT_PART == (n))
#if AIJP_FORMAT_DOUBLE
#define AIJP_IF_DOUBLE(...) __VA_ARGS__
#else
#define AIJP_IF_DOUBLE(...)
#endif
#if AIJP_FORMAT_FLOAT
#define AIJP_IF_FLOAT(...) __VA_ARGS__
#else
#define AIJP_IF_FLOAT(...)
#endif

/// Explicit instantiation of a factory for the value types of this translation unit (one line at the end of
/// each format file).
#define AIJP_INSTANTIATE_FORMAT_FACTORY(name)                                                              \
  AIJP_IF_DOUBLE(template std::unique_ptr<format_impl<double>> name<double>(const build_args<double>&);)  \
  AIJP_IF_FLOAT(template std::unique_ptr<format_impl<float>> name<float>(const build_args<float>&);)

/// Builds one format on a matrix (gpu_matrix's dispatch over the factories above, feasibility included):
/// the partitioned format builds its blocks through it.
template <typename Value>
using format_factory = std::function<std::unique_ptr<format_impl<Value>>(format_id, const build_args<Value>&)>;

/// One block of a row-partitioned plan as built: rows [row_begin, row_end) in `format` (after fallbacks).
struct built_block {
  size_type row_begin = 0;
  size_type row_end = 0;
  format_id format = format_id::cusparse_csr;
  std::string note;  ///< why the block fell back to cuSPARSE CSR (empty otherwise)
};

/// Row-partitioned plan (kernels/src/formats/partitioned.cu): every block [row_begin, row_end) of `blocks`
/// (contiguous, covering all rows of `a`) gets its own sub-CSR (its own row_ptr rebased to 0; its col_idx /
/// values are slices of `a`'s, borrowed: `a` must outlive the format; columns stay global) and a child built by `factory` with the block's exact
/// device statistics; apply() runs the children one after another on the caller's stream, each on
/// y + row_begin. A child whose factory throws not_supported or device_out_of_memory becomes cuSPARSE CSR
/// (recorded in `built`). id() is the format of the block holding the most nonzeros.
template <typename Value>
std::unique_ptr<format_impl<Value>> make_partitioned(const device_csr<Value>& a, const std::vector<built_block>& blocks,
                                                     const format_factory<Value>& factory, const cusparse_handle& handle,
                                                     cudaStream_t stream, std::vector<built_block>* built);

/// Throws not_supported when a format cannot hold a block (the feasibility check of a format_factory, for
/// the formats a builder converts in parts).
template <typename Value>
using format_check = std::function<void(format_id, const build_args<Value>&)>;

/// make_partitioned in parts that never wait (staged steps): each advance() issues or polls one piece (the
/// block bounds' read-back, a block's sub-CSR and statistics, its child; a child with a builder
/// (make_format_builder) in parts of `rows_per_part` rows, after `check`). Same blocks, children and
/// fallbacks as make_partitioned; `*built` points at the blocks as built (complete once advance() returned
/// true), valid while the builder lives.
template <typename Value>
std::unique_ptr<format_builder<Value>> make_partition_builder(const device_csr<Value>& a, const std::vector<built_block>& blocks,
                                                              const format_factory<Value>& factory, const format_check<Value>& check,
                                                              const cusparse_handle& handle, size_type rows_per_part,
                                                              const std::vector<built_block>** built);

/// Transpose product through cuSPARSE on the CSR copy: y = alpha A^T x + beta y.
template <typename Value>
class cusparse_transpose {
 public:
  cusparse_transpose(const device_csr<Value>& a, cusparseHandle_t handle);
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream);

 private:
  spmv_runner<Value> runner_;
};

}  // namespace aijp::detail
