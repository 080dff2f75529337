// SELL-C-sigma with C = 32 and sigma = 4096: inside each window of sigma consecutive rows, rows are sorted by
// decreasing length (stable, so equal lengths keep their order), giving perm; slices of 32 sorted rows are
// padded to their longest row and stored column-major (sell_common.cuh). Thread i computes sorted row i and
// writes y[perm[i]]. When every row has the same length nothing is sorted: perm is the identity and the
// kernel takes the path without it (no perm array, coalesced y writes).
// Conversion on the device (sell_builder, in parts for staged steps): window keys, CUB radix sort (pairs),
// slice widths, CUB scan, read-back of the padded size, one allocation, fill.
#include "sell_common.cuh"

#include "../async_ops.hpp"

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
class sell_builder;

template <typename Value>
class sell_sigma final : public format_impl<Value> {
 public:
  /// permuted == false: slices of consecutive rows (format `sell`, or sell_sigma when every row has the
  /// same length). Built by sell_builder.
  sell_sigma(format_id id, size_type rows, bool permuted) : id_(id), rows_(rows), permuted_(permuted) {}

  format_id id() const override { return id_; }
  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override
  {
    fill(a, false, 0, padded_rows(rows_), stream);
  }

  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (rows_ == 0) return;
    if (beta == Value(0)) {
      permuted_ ? spmv<true, true>(alpha, x, beta, y, stream) : spmv<true, false>(alpha, x, beta, y, stream);
    } else {
      permuted_ ? spmv<false, true>(alpha, x, beta, y, stream) : spmv<false, false>(alpha, x, beta, y, stream);
    }
  }

  size_type device_bytes() const override { return static_cast<size_type>(slice_ptr_.bytes() + perm_.bytes() + arrays_.bytes()); }

 private:
  friend class sell_builder<Value>;
  template <bool beta_zero, bool permuted>
  void spmv(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream)
  {
    sell_sigma_spmv<Value, beta_zero, permuted><<<grid_for(rows_), block_size, 0, stream>>>(
        rows_, slice_ptr_.data(), perm_.data(), col_, val_, alpha, x, beta, y);
    AIJP_CHECK_LAUNCH();
  }

  template <bool permuted, bool with_columns>
  void fill_as(const device_csr<Value>& a, size_type first, size_type last, cudaStream_t stream)
  {
    fill_slices<Value, long long, permuted, with_columns><<<grid_for(last - first), block_size, 0, stream>>>(
        rows_, first, last, a.row_ptr.data(), a.col_idx.data(), a.values.data(), perm_.data(), slice_ptr_.data(), col_, val_);
    AIJP_CHECK_LAUNCH();
  }

  // Layout rows [first, last), multiples of 32 (last may be padded_rows(rows_)).
  void fill(const device_csr<Value>& a, bool with_columns, size_type first, size_type last, cudaStream_t stream)
  {
    if (rows_ == 0 || last <= first) return;
    if (permuted_) {
      with_columns ? fill_as<true, true>(a, first, last, stream) : fill_as<true, false>(a, first, last, stream);
    } else {
      with_columns ? fill_as<false, true>(a, first, last, stream) : fill_as<false, false>(a, first, last, stream);
    }
  }

  // Columns and values in one allocation (a cudaMalloc costs ~0.1 ms whatever its size).
  void allocate(std::size_t padded, layout_reserve* reserve)
  {
    const std::size_t col_bytes = layout_reserve::round_up(padded * sizeof(index_type));
    arrays_.resize(col_bytes + padded * sizeof(Value), reserve);
    col_ = reinterpret_cast<index_type*>(arrays_.data());
    val_ = reinterpret_cast<Value*>(arrays_.data() + col_bytes);
  }

  format_id id_;
  size_type rows_;
  bool permuted_;
  device_buffer<index_type> perm_;  // sorted row i is CSR row perm_[i]; empty when every row has the same length
  device_buffer<long long> slice_ptr_;
  device_buffer<unsigned char> arrays_;
  index_type* col_ = nullptr;
  Value* val_ = nullptr;
};

// Phases: 0 the window sort (sell_sigma with rows of different lengths); 1 the slice offsets and the
// read-back of the padded size; 2 waits for it and allocates, then fills like 3; 3 fills the next part of
// at most rows_per_part rows (whole slices). The sort's and the scan's temporaries are pooled blocks
// (async_ops.hpp): no cudaMalloc once the pool holds them, and no cudaFree, which waits for the device.
// Done after the last fill (nothing to check).
template <typename Value>
class sell_builder final : public format_builder<Value> {
 public:
  sell_builder(const device_csr<Value>& a, const row_stats& stats, bool sort, size_type rows_per_part)
      : a_(a),
        m_(std::make_unique<sell_sigma<Value>>(sort ? format_id::sell_sigma : format_id::sell_c_sigma, a.rows,
                                               sort && stats.min_len != stats.max_len)),
        max_len_(stats.max_len),
        part_(std::max<size_type>(slice_height, (rows_per_part + slice_height - 1) / slice_height * slice_height)),
        whole_(part_ >= padded_rows(a.rows))
  {
  }
  ~sell_builder() override { event_.settle(); }  // the pooled blocks go back: nothing issued may use them
  sell_builder(const sell_builder&) = delete;
  sell_builder& operator=(const sell_builder&) = delete;

  bool advance(cudaStream_t stream) override
  {
    sell_sigma<Value>& m = *m_;
    bool issued = false;  // this call issued device work (counted once)
    const auto count = [&] {
      if (!issued) ++issued_;
      issued = true;
    };
    switch (phase_) {
      case 0:
        phase_ = 1;
        if (m.permuted_ && m.rows_ > 0) {
          count();
          sort(stream);
          event_.record(stream);  // the destructor waits for the sort if it comes first
          if (!whole_) return false;
        }
        [[fallthrough]];
      case 1:
        count();
        slice_offsets(a_.row_ptr.data(), m.rows_, m.permuted_ ? m.perm_.data() : nullptr, m.slice_ptr_, scan_temp_, stream,
                      a_.layout_memory());
        AIJP_CUDA_CHECK(cudaMemcpyAsync(host_.data(), m.slice_ptr_.data() + slice_count(m.rows_), sizeof(long long),
                                        cudaMemcpyDeviceToHost, stream));
        event_.record(stream);
        phase_ = 2;
        return false;
      case 2:
        // The layout's one allocation, in a part of its own when split (then the fills).
        if (!event_.done()) return false;
        release_temporaries();  // the sort and the scan ran before the read-back
        m.allocate(static_cast<std::size_t>(host_[0]), a_.layout_memory());
        phase_ = 3;
        if (!whole_) return false;
        [[fallthrough]];
      case 3: {
        count();
        const size_type end = padded_rows(m.rows_);
        const size_type last = std::min(end, next_ + part_);
        m.fill(a_, true, next_, last, stream);
        next_ = last;
        if (next_ < end) return false;
        phase_ = 4;
        return true;
      }
      default: return true;
    }
  }

  void wait() override { event_.wait(); }

  std::unique_ptr<format_impl<Value>> take() override
  {
    AIJP_ENSURE(phase_ == 4 && m_, error, "sell_builder::take before the last part");
    return std::move(m_);
  }

  int parts_issued() const override { return issued_; }

 private:
  // Window keys, then a radix sort of (key, row) pairs: perm.
  void sort(cudaStream_t stream)
  {
    sell_sigma<Value>& m = *m_;
    const auto rows = static_cast<std::size_t>(m.rows_);
    m.perm_.resize(rows, a_.layout_memory());
    keys_.resize(rows);
    sorted_keys_.resize(rows);
    row_ids_.resize(rows);
    const int len_bits = bits_for(static_cast<unsigned long long>(max_len_));
    const int window_bits = bits_for(static_cast<unsigned long long>((m.rows_ - 1) / sigma));
    window_keys<<<grid_for(m.rows_), block_size, 0, stream>>>(m.rows_, a_.row_ptr.data(), max_len_, len_bits, keys_.data(),
                                                              row_ids_.data());
    AIJP_CHECK_LAUNCH();
    std::size_t temp_bytes = 0;
    const int n = static_cast<int>(m.rows_);
    AIJP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_.data(), sorted_keys_.data(), row_ids_.data(),
                                                    m.perm_.data(), n, 0, len_bits + window_bits, stream));
    sort_temp_.resize(temp_bytes);
    AIJP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp_.data(), temp_bytes, keys_.data(), sorted_keys_.data(),
                                                    row_ids_.data(), m.perm_.data(), n, 0, len_bits + window_bits, stream));
  }
  void release_temporaries()
  {
    keys_.reset();
    sorted_keys_.reset();
    row_ids_.reset();
    sort_temp_.reset();
    scan_temp_.reset();
  }

  const device_csr<Value>& a_;
  std::unique_ptr<sell_sigma<Value>> m_;
  index_type max_len_;
  size_type part_;
  bool whole_;
  size_type next_ = 0;
  int phase_ = 0;
  int issued_ = 0;
  scratch_buffer<unsigned long long> keys_, sorted_keys_;
  scratch_buffer<index_type> row_ids_;
  scratch_buffer<unsigned char> sort_temp_, scan_temp_;
  pinned_buffer<long long> host_{1};  // the padded size
  poll_event event_;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_builder<Value>> make_sell_builder(const device_csr<Value>& a, const row_stats& stats, bool sort,
                                                         size_type rows_per_part)
{
  return std::make_unique<sell_builder<Value>>(a, stats, sort, rows_per_part);
}
AIJP_IF_DOUBLE(template std::unique_ptr<format_builder<double>> make_sell_builder<double>(const device_csr<double>&, const row_stats&, bool, size_type);)
AIJP_IF_FLOAT(template std::unique_ptr<format_builder<float>> make_sell_builder<float>(const device_csr<float>&, const row_stats&, bool, size_type);)

namespace {
template <typename Value>
std::unique_ptr<format_impl<Value>> build_sell_whole(const build_args<Value>& args, bool sort)
{
  return sell_builder<Value>(args.a, args.stats, sort, args.a.rows + slice_height).build_whole(args.stream);
}
}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_sell_sigma(const build_args<Value>& args)
{
  return build_sell_whole(args, true);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_sell_sigma)

template <typename Value>
std::unique_ptr<format_impl<Value>> make_sell(const build_args<Value>& args)
{
  return build_sell_whole(args, false);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_sell)

}  // namespace aijp::detail
