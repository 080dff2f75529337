// SELL-32 in natural row order (as sell_sigma.cu without sorting, format `sell`) with 16-bit column deltas: each row keeps its first column as
// int32 (first_col, -1 for an empty row) and slot j of the row the unsigned delta col[j] - col[j-1] (slot 0
// and the padding hold 0, so padding repeats the row's last column and adds an exact zero). A stored entry
// costs 2 + 8 bytes in double instead of 4 + 8: the format aims at large 3D stencils, whose SpMV streams
// the matrix (7-point Laplacian on 200^3: interior steps 1, 199 and 39800, boundary rows up to 40000). The
// kernel rebuilds the columns with a running sum per thread. On an H200 (2026-11-22, double, aijp_bench):
// 7-point 200^3 176 us against 194 us for SELL-32, 27-point 100^3 73 against 83, FEM 3 dof 60^3 43 against 46.
// Rows must be sorted with deltas below 2^16: the conversion checks every row on the device and throws
// aijp::not_supported otherwise (the runtime then falls back to cuSPARSE CSR).
#include "sell_common.cuh"

#include "../async_ops.hpp"

#include <algorithm>

#include <cstdint>
#include <string>

namespace aijp::detail {

namespace {

using namespace sell_common;
using delta_type = std::uint16_t;
constexpr int max_delta = sell_delta16_max_step;

// Threads for layout rows [first, last) (whole slices; rows past `rows` in the last slice are all padding,
// as in sell_common::fill_slices). With columns, every row's deltas are checked: `bad` counts the rows with
// a decreasing column or a jump above 65535 (the builder refuses the layout then).
template <typename Value, bool with_columns>
__global__ void delta16_fill(size_type rows, size_type first, size_type last, const index_type* __restrict__ row_ptr,
                             const index_type* __restrict__ col_idx, const Value* __restrict__ values,
                             const long long* __restrict__ slice_ptr, index_type* __restrict__ first_col,
                             delta_type* __restrict__ delta, Value* __restrict__ val, unsigned long long* __restrict__ bad)
{
  const size_type r = first + static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= last) return;
  const size_type s = r / slice_height;
  const long long base = slice_ptr[s] + (r % slice_height);
  const int width = static_cast<int>((slice_ptr[s + 1] - slice_ptr[s]) / slice_height);
  index_type begin = 0;
  int len = 0;
  if (r < rows) {
    begin = row_ptr[r];
    len = row_ptr[r + 1] - begin;
    if (with_columns) first_col[r] = len > 0 ? col_idx[begin] : -1;
  }
  bool ok = true;
  for (int j = 0; j < width; ++j) {
    const long long k = base + static_cast<long long>(j) * slice_height;
    if (with_columns) {
      index_type d = 0;
      if (j > 0 && j < len) {
        d = col_idx[begin + j] - col_idx[begin + j - 1];  // both in [0, cols): no overflow
        ok = ok && d >= 0 && d <= max_delta;
      }
      delta[k] = static_cast<delta_type>(d);
    }
    val[k] = j < len ? values[begin + j] : Value(0);
  }
  if (with_columns && !ok) atomicAdd(bad, 1ull);
}

// Slot loads and slice offsets are issued before the branch on an empty row (a branch-free trip count);
// see sell_common::chunk for the loop shape. Slots past the slice width add nothing and move no column.
template <typename Value, bool beta_zero>
__global__ void __launch_bounds__(block_size)
    sell_delta16_spmv(size_type rows, const long long* __restrict__ slice_ptr, const index_type* __restrict__ first_col,
                      const delta_type* __restrict__ delta, const Value* __restrict__ sell_val, Value alpha,
                      const Value* __restrict__ x, Value beta, Value* __restrict__ y)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  index_type c = first_col[r];
  const size_type s = r / slice_height;
  const long long start = slice_ptr[s];
  const int width = c >= 0 ? static_cast<int>((slice_ptr[s + 1] - start) / slice_height) : 0;  // empty row: none
  const delta_type* d = delta + start + (r % slice_height);
  const Value* val = sell_val + start + (r % slice_height);
  Value sum = 0;
  for (int j = 0; j < width; j += chunk) {
    unsigned step[chunk];
    Value v[chunk], xv[chunk];
#pragma unroll
    for (int u = 0; u < chunk; ++u) {
      const bool in = j + u < width;
      const long long k = static_cast<long long>(j + u) * slice_height;
      step[u] = in ? d[k] : 0u;
      v[u] = in ? val[k] : Value(0);
    }
#pragma unroll
    for (int u = 0; u < chunk; ++u) {
      c += static_cast<index_type>(step[u]);
      xv[u] = j + u < width ? __ldg(x + c) : Value(0);
    }
#pragma unroll
    for (int u = 0; u < chunk; ++u) sum += v[u] * xv[u];
  }
  y[r] = beta_zero ? alpha * sum : alpha * sum + beta * y[r];
}

template <typename Value>
class sell_delta16_builder;

template <typename Value>
class sell_delta16 final : public format_impl<Value> {
 public:
  explicit sell_delta16(size_type rows) : rows_(rows) {}

  format_id id() const override { return format_id::sell_delta16; }
  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override
  {
    fill(a, false, 0, padded_rows(), nullptr, stream);
  }

  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (rows_ == 0) return;
    if (beta == Value(0)) {
      sell_delta16_spmv<Value, true><<<grid_for(rows_), block_size, 0, stream>>>(
          rows_, slice_ptr_.data(), first_col_, delta_, val_, alpha, x, beta, y);
    } else {
      sell_delta16_spmv<Value, false><<<grid_for(rows_), block_size, 0, stream>>>(
          rows_, slice_ptr_.data(), first_col_, delta_, val_, alpha, x, beta, y);
    }
    AIJP_CHECK_LAUNCH();
  }

  size_type device_bytes() const override
  {
    return static_cast<size_type>(slice_ptr_.bytes() + arrays_.bytes());
  }

 private:
  friend class sell_delta16_builder<Value>;
  size_type padded_rows() const { return slice_count(rows_) * slice_height; }

  // Layout rows [first, last), both multiples of 32 (last may be padded_rows()).
  void fill(const device_csr<Value>& a, bool with_columns, size_type first, size_type last, unsigned long long* bad,
            cudaStream_t stream)
  {
    if (last <= first) return;
    const unsigned grid = grid_for(last - first);
    if (with_columns) {
      delta16_fill<Value, true><<<grid, block_size, 0, stream>>>(rows_, first, last, a.row_ptr.data(), a.col_idx.data(),
                                                                  a.values.data(), slice_ptr_.data(), first_col_, delta_,
                                                                  val_, bad);
    } else {
      delta16_fill<Value, false><<<grid, block_size, 0, stream>>>(rows_, first, last, a.row_ptr.data(), a.col_idx.data(),
                                                                   a.values.data(), slice_ptr_.data(), first_col_, delta_,
                                                                   val_, nullptr);
    }
    AIJP_CHECK_LAUNCH();
  }

  size_type rows_;
  device_buffer<long long> slice_ptr_;
  // The three arrays in one allocation: a cudaMalloc costs ~0.1 ms whatever its size (1 to 512 MiB on the
  // H100, bench/results/2026-11-24_h100_session16_alloc_cost.txt), one staged part each before.
  void allocate(std::size_t padded, layout_reserve* reserve)
  {
    const std::size_t val_bytes = layout_reserve::round_up(padded * sizeof(Value));
    const std::size_t delta_bytes = layout_reserve::round_up(padded * sizeof(delta_type));
    arrays_.resize(val_bytes + delta_bytes + static_cast<std::size_t>(rows_) * sizeof(index_type), reserve);
    val_ = reinterpret_cast<Value*>(arrays_.data());
    delta_ = reinterpret_cast<delta_type*>(arrays_.data() + val_bytes);
    first_col_ = reinterpret_cast<index_type*>(arrays_.data() + val_bytes + delta_bytes);
  }
  device_buffer<unsigned char> arrays_;
  Value* val_ = nullptr;
  delta_type* delta_ = nullptr;
  index_type* first_col_ = nullptr;  // first column of each row, -1 for an empty row
};

// Phases: 0 slice offsets and the read-back of the padded size; 1 waits for it, allocates, then fills like
// 2; 2 fills the next part; 3 waits for the read-back of the check; 4 done.
template <typename Value>
class sell_delta16_builder final : public format_builder<Value> {
 public:
  sell_delta16_builder(const device_csr<Value>& a, size_type rows_per_part)
      : a_(a),
        m_(std::make_unique<sell_delta16<Value>>(a.rows)),
        part_(std::max<size_type>(slice_height, (rows_per_part + slice_height - 1) / slice_height * slice_height)),
        whole_(part_ >= slice_count(a.rows) * slice_height)
  {
  }

  ~sell_delta16_builder() override { event_.settle(); }  // the pooled blocks go back: nothing issued may use them
  sell_delta16_builder(const sell_delta16_builder&) = delete;
  sell_delta16_builder& operator=(const sell_delta16_builder&) = delete;

  bool advance(cudaStream_t stream) override
  {
    sell_delta16<Value>& m = *m_;
    switch (phase_) {
      case 0: {
        const size_type slices = slice_count(m.rows_);
        bad_.resize(1);
        AIJP_CUDA_CHECK(cudaMemsetAsync(bad_.data(), 0, sizeof(unsigned long long), stream));
        slice_offsets(a_.row_ptr.data(), m.rows_, nullptr, m.slice_ptr_, scan_temp_, stream, a_.layout_memory());
        AIJP_CUDA_CHECK(cudaMemcpyAsync(&host_[0], m.slice_ptr_.data() + slices, sizeof(long long), cudaMemcpyDeviceToHost,
                                        stream));
        event_.record(stream);
        phase_ = 1;
        ++issued_;
        return false;
      }
      case 1: {
        // The layout's one allocation, in a part of its own when split (then the fills).
        if (!event_.done()) return false;
        m.allocate(static_cast<std::size_t>(host_[0]), a_.layout_memory());
        phase_ = 2;
        if (!whole_) return false;
        [[fallthrough]];
      }
      case 2: {
        const size_type end = m.padded_rows();
        const size_type last = std::min(end, next_ + part_);
        m.fill(a_, true, next_, last, bad_.data(), stream);
        next_ = last;
        ++issued_;
        if (next_ < end) {
          event_.record(stream);  // the destructor waits for the fills using bad_ (pooled) if it comes first
          return false;
        }
        AIJP_CUDA_CHECK(cudaMemcpyAsync(&host_[1], bad_.data(), sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
        event_.record(stream);
        phase_ = 3;
        return false;
      }
      case 3: {
        if (!event_.done()) return false;
        if (host_[1] > 0) {
          AIJP_THROW(not_supported, "sell_delta16: " + std::to_string(host_[1]) +
                                        " rows have unsorted columns or a column jump above 65535");
        }
        phase_ = 4;
        return true;
      }
      default: return true;
    }
  }

  void wait() override { event_.wait(); }

  std::unique_ptr<format_impl<Value>> take() override
  {
    AIJP_ENSURE(phase_ == 4 && m_, error, "sell_delta16_builder::take before the last part");
    return std::move(m_);
  }

  int parts_issued() const override { return issued_; }

 private:
  const device_csr<Value>& a_;
  std::unique_ptr<sell_delta16<Value>> m_;
  size_type part_;
  size_type next_ = 0;
  int phase_ = 0;
  int issued_ = 0;
  bool whole_ = false;  // one fill: everything in as few calls as possible
  scratch_buffer<unsigned long long> bad_;
  scratch_buffer<unsigned char> scan_temp_;
  pinned_buffer<unsigned long long> host_{2};  // [0] padded size, [1] rows failing the check
  poll_event event_;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_builder<Value>> make_sell_delta16_builder(const device_csr<Value>& a, size_type rows_per_part)
{
  return std::make_unique<sell_delta16_builder<Value>>(a, rows_per_part);
}
AIJP_IF_DOUBLE(template std::unique_ptr<format_builder<double>> make_sell_delta16_builder<double>(const device_csr<double>&, size_type);)
AIJP_IF_FLOAT(template std::unique_ptr<format_builder<float>> make_sell_delta16_builder<float>(const device_csr<float>&, size_type);)

template <typename Value>
std::unique_ptr<format_impl<Value>> make_sell_delta16(const build_args<Value>& args)
{
  return sell_delta16_builder<Value>(args.a, args.a.rows + slice_height).build_whole(args.stream);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_sell_delta16)

}  // namespace aijp::detail
