// HYB (Bell & Garland): an ELL part of width K = row_stats::hyb_ell_width (may be 0) holding the first
// min(len, K) entries of each row (padded layout of ell_common.cuh, padding column 0 / value 0), and a COO
// part, sorted by row, with the remaining len - K entries of the longer rows.
// SpMV, two launches: the ELL kernel writes every row of y with the beta semantics (y not read for
// beta == 0), then the COO kernel adds alpha * its products: each warp takes 256 consecutive entries as
// 8 chunks of 32, reduces each chunk by row with a segmented shuffle scan, and carries the chunk's last row
// into the next chunk, so a row costs one atomicAdd per warp it spans (at most 2 + len / 256), not one per
// nonzero. No COO launch when the COO part is empty.
// Conversion on the device: one scan of the per-row COO counts (read straight from row_ptr through a
// transform iterator), the ELL fill (thread per row) and the COO fill (thread per COO entry, its row found by
// a binary search in the COO offsets, so long rows are spread over many threads); sizes come from
// row_stats (hyb_ell_width, hyb_coo_nnz), no host round trip.
#include "ell_common.cuh"

#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

namespace aijp::detail {

namespace {

using namespace ell_family;

// Chunks of 32 entries per warp in the COO kernel: 8 amortises the carry between chunks (a row spanning
// many chunks costs one atomic per 256 entries) and lets each lane keep 8 independent loads in flight,
// while a COO part of 1M entries still gives 4096 warps (31 per SM on 132 SMs).
constexpr int coo_chunks = 8;
constexpr int coo_entries_per_warp = 32 * coo_chunks;

// COO entries of row r: max(0, len - K); 0 for r = rows (the slot the exclusive scan turns into the total).
struct coo_count_op {
  const index_type* row_ptr;
  size_type rows;
  index_type width;
  __device__ index_type operator()(size_type r) const
  {
    return r < rows ? max(row_ptr[r + 1] - row_ptr[r] - width, 0) : 0;
  }
};

// Thread per COO entry e: its row r is the last one with coo_offset[r] <= e (found by binary search when the
// pattern is built, read back from coo_row on a refresh); it is entry K + e - coo_offset[r] of row r.
template <typename Value, bool with_pattern>
__global__ void __launch_bounds__(block_size)
    hyb_coo_fill(size_type coo_nnz, size_type rows, index_type width, const index_type* __restrict__ row_ptr,
                 const index_type* __restrict__ col_idx, const Value* __restrict__ values,
                 const index_type* __restrict__ coo_offset, index_type* __restrict__ coo_row,
                 index_type* __restrict__ coo_col, Value* __restrict__ coo_val)
{
  const size_type e = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= coo_nnz) return;
  index_type r;
  if (with_pattern) {
    size_type lo = 0, hi = rows - 1;
    while (lo < hi) {
      const size_type mid = hi - (hi - lo) / 2;
      if (coo_offset[mid] <= e) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    r = static_cast<index_type>(lo);
    coo_row[e] = r;
  } else {
    r = coo_row[e];
  }
  const size_type src = static_cast<size_type>(row_ptr[r]) + width + (e - coo_offset[r]);
  if (with_pattern) coo_col[e] = col_idx[src];
  coo_val[e] = values[src];
}

// y[row] += alpha * (sum of the row's COO products); entries sorted by row. See the file comment.
template <typename Value>
__global__ void __launch_bounds__(block_size)
    hyb_coo_spmv(size_type coo_nnz, const index_type* __restrict__ coo_row, const index_type* __restrict__ coo_col,
                 const Value* __restrict__ coo_val, Value alpha, const Value* __restrict__ x, Value* __restrict__ y)
{
  constexpr unsigned full = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const size_type warp = (static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const size_type base = warp * coo_entries_per_warp;
  if (base >= coo_nnz) return;  // uniform across the warp
  const size_type left = coo_nnz - base;

  // All loads first: 8 independent gathers per lane in flight. Row -1 marks lanes past the end.
  index_type row[coo_chunks];
  Value prod[coo_chunks];
#pragma unroll
  for (int c = 0; c < coo_chunks; ++c) {
    const size_type e = base + c * 32 + lane;
    row[c] = -1;
    prod[c] = Value(0);
    if (e < coo_nnz) {
      row[c] = coo_row[e];
      prod[c] = coo_val[e] * __ldg(x + coo_col[e]);
    }
  }

  index_type carry_row = -1;  // the last row of the previous chunk and its partial sum (uniform in the warp)
  Value carry = 0;
#pragma unroll
  for (int c = 0; c < coo_chunks; ++c) {
    if (static_cast<size_type>(c) * 32 >= left) break;
    const size_type valid_after_first = left - 1 - static_cast<size_type>(c) * 32;
    const int last = valid_after_first < 31 ? static_cast<int>(valid_after_first) : 31;  // last valid lane
    const index_type r = row[c];
    Value v = prod[c];
    if (lane == 0 && carry_row >= 0) {
      if (r == carry_row) {
        v += carry;
      } else {
        atomicAdd(y + carry_row, alpha * carry);
      }
    }
    // Segmented inclusive scan: rows are sorted, so a lane off positions back in the same row means every
    // lane between is in that row too.
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const Value up = __shfl_up_sync(full, v, off);
      const index_type up_row = __shfl_up_sync(full, r, off);
      if (lane >= off && up_row == r) v += up;
    }
    const index_type next_row = __shfl_down_sync(full, r, 1);
    if (lane < last && next_row != r) atomicAdd(y + r, alpha * v);
    carry_row = __shfl_sync(full, r, last);
    carry = __shfl_sync(full, v, last);
  }
  if (lane == 0) atomicAdd(y + carry_row, alpha * carry);
}

template <typename Value>
class hyb final : public format_impl<Value> {
 public:
  explicit hyb(const build_args<Value>& args)
      : rows_(args.a.rows), width_(args.stats.hyb_ell_width), coo_nnz_(args.stats.hyb_coo_nnz)
  {
    const device_csr<Value>& a = args.a;
    AIJP_ENSURE(args.stats.rows == a.rows && args.stats.nnz == a.nnz, error, "hyb: statistics do not describe this matrix");
    AIJP_ENSURE(width_ >= 0 && coo_nnz_ >= 0 && coo_nnz_ <= a.nnz, error, "hyb: inconsistent ELL width or COO size");
    const size_type slots = padded_slots(rows_, width_, "hyb");
    ell_col_.resize(static_cast<std::size_t>(slots), a.layout_memory());
    ell_val_.resize(static_cast<std::size_t>(slots), a.layout_memory());
    if (width_ > 0) {
      launch_ell_fill<Value, true, true>(rows_, width_, a, nullptr, nullptr, ell_col_.data(), ell_val_.data(), args.stream);
    }
    if (coo_nnz_ == 0) return;  // regular matrices: pure ELL, no COO arrays, no scan

    coo_offset_.resize(static_cast<std::size_t>(rows_) + 1, a.layout_memory());
    coo_row_.resize(static_cast<std::size_t>(coo_nnz_), a.layout_memory());
    coo_col_.resize(static_cast<std::size_t>(coo_nnz_), a.layout_memory());
    coo_val_.resize(static_cast<std::size_t>(coo_nnz_), a.layout_memory());
    const auto counts = thrust::make_transform_iterator(thrust::counting_iterator<size_type>(0),
                                                        coo_count_op{a.row_ptr.data(), rows_, width_});
    std::size_t cub_bytes = 0;
    AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, cub_bytes, counts, coo_offset_.data(), rows_ + 1, args.stream));
    scratch temp;
    const std::size_t cub_at = temp.reserve<unsigned char>(static_cast<size_type>(cub_bytes));
    temp.allocate();
    AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.at<unsigned char>(cub_at), cub_bytes, counts, coo_offset_.data(),
                                                  rows_ + 1, args.stream));
    fill_coo<true>(a, args.stream);
  }

  format_id id() const override { return format_id::hyb; }

  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override
  {
    if (width_ > 0) launch_ell_fill<Value, false, false>(rows_, width_, a, nullptr, nullptr, nullptr, ell_val_.data(), stream);
    fill_coo<false>(a, stream);
  }

  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (rows_ == 0) return;
    launch_ell_spmv<Value, false>(rows_, width_, nullptr, nullptr, ell_col_.data(), ell_val_.data(), alpha, x, beta, y,
                                  stream);
    if (coo_nnz_ == 0) return;
    const size_type warps = (coo_nnz_ + coo_entries_per_warp - 1) / coo_entries_per_warp;
    hyb_coo_spmv<Value><<<grid_for(warps * 32), block_size, 0, stream>>>(coo_nnz_, coo_row_.data(), coo_col_.data(),
                                                                        coo_val_.data(), alpha, x, y);
    AIJP_CHECK_LAUNCH();
  }

  size_type device_bytes() const override
  {
    return static_cast<size_type>(ell_col_.bytes() + ell_val_.bytes() + coo_offset_.bytes() + coo_row_.bytes() +
                                  coo_col_.bytes() + coo_val_.bytes());
  }

 private:
  template <bool with_pattern>
  void fill_coo(const device_csr<Value>& a, cudaStream_t stream)
  {
    if (coo_nnz_ == 0) return;
    hyb_coo_fill<Value, with_pattern><<<grid_for(coo_nnz_), block_size, 0, stream>>>(
        coo_nnz_, rows_, width_, a.row_ptr.data(), a.col_idx.data(), a.values.data(), coo_offset_.data(),
        coo_row_.data(), coo_col_.data(), coo_val_.data());
    AIJP_CHECK_LAUNCH();
  }

  size_type rows_;
  index_type width_;   // K of the ELL part
  size_type coo_nnz_;  // entries of the COO part
  device_buffer<index_type> ell_col_;
  device_buffer<Value> ell_val_;
  device_buffer<index_type> coo_offset_;  // rows + 1 (when the COO part is not empty): first COO entry of each row
  device_buffer<index_type> coo_row_;
  device_buffer<index_type> coo_col_;
  device_buffer<Value> coo_val_;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_hyb(const build_args<Value>& args)
{
  return std::make_unique<hyb<Value>>(args);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_hyb)

}  // namespace aijp::detail
