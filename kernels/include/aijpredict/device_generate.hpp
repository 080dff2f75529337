// Benchmark matrices generated directly on the GPU (the warm-up's instrumenting matrices): millions of
// rows in milliseconds, no host round trip. Deterministic for a given spec (counter-based hashing).
#pragma once

#include <aijpredict/csr.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

namespace aijp {

struct device_generator_spec {
  /// block: `param` consecutive rows (at least one) are `window` long (capped at cols), the others `mean`: a
  /// block of long rows walked together by one 32-row group (row_stats::chain_warp_nnz), placed as
  /// block_layout says.
  enum class lengths { constant, normal, uniform, pareto, block };
  lengths dist = lengths::constant;
  size_type rows = 0;
  size_type cols = 0;
  double mean = 1.0;   ///< mean row length (constant: every row)
  double param = 0.0;  ///< normal: standard deviation; uniform: half width; pareto: tail exponent (> 1); block: long rows
  /// Row r's columns lie in a window of this many columns centred on r * cols / rows, spread evenly over it
  /// (one random column per equal segment, so sorted and distinct). window >= cols spreads them over the
  /// whole row (random x gathers); window = mean gives contiguous runs (banded, cache-friendly).
  size_type window = 0;
  std::uint64_t seed = 1;
  std::string to_string() const;
};

/// Where the long rows of a `block` spec lie, drawn from its seed (all zero for the other laws). The long rows
/// are first_row .. first_row + param - 1, inside one 32-row group (a warp of the thread-per-row formats, a
/// slice of SELL-32) other than the first when param <= 32 and rows >= 64 (else anywhere from row 1). Row
/// first_row - 1 is `pad` entries longer than `mean`, pad odd, so the long rows' entries start off a 32-byte
/// sector of the values (4 or 8 per sector) and of the column indices (8). The long rows share the same
/// contiguous columns first_col .. first_col + window - 1, first_col odd (off a sector of x): the window centred
/// on first_row, as every row's window is centred on the row, shifted by less than 8 columns. The block's
/// former layout (rows 0 .. param - 1, entry 0, column 0, names without "placed=hashed") confounded the
/// chain's speed with that position (docs/models.md, session 27).
struct device_block_layout {
  size_type first_row = 0;
  index_type pad = 0;
  size_type first_col = 0;
};
device_block_layout block_layout(const device_generator_spec& spec);

/// An owning CSR matrix in device memory.
template <typename Value>
class device_csr_matrix {
 public:
  device_csr_matrix(size_type rows, size_type cols, size_type nnz);
  ~device_csr_matrix();
  device_csr_matrix(device_csr_matrix&&) noexcept;
  device_csr_matrix& operator=(device_csr_matrix&&) noexcept;
  device_csr_matrix(const device_csr_matrix&) = delete;
  device_csr_matrix& operator=(const device_csr_matrix&) = delete;

  csr_view<Value> view() const;
  index_type* row_ptr();
  index_type* col_idx();
  Value* values();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Generates the matrix on the device. Throws aijp::bad_input for an invalid spec and aijp::not_supported
/// when the nonzeros exceed 32-bit indices.
template <typename Value>
device_csr_matrix<Value> generate_on_device(const device_generator_spec& spec, cudaStream_t stream);

extern template class device_csr_matrix<double>;
extern template class device_csr_matrix<float>;

}  // namespace aijp
