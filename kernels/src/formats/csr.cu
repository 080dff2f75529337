// CSR kernels on the device CSR copy itself (no conversion, no extra memory; `a` outlives the format):
//  - csr_scalar: one thread per row.
//  - csr_vector: L lanes per row, L = the smallest power of two >= the mean row length in [2, 32]
//    (layout_ref::csr_vector_lanes, the rule predict.cpp models); 1 or 4 rows per lane group (4 once the
//    matrix needs more than a wave: layout_ref::csr_vector_slots, also the models' rule), per-lane partial
//    sums, then a sub-warp __shfl_down_sync tree of width L.
// Both accumulate with explicit fma and finish with y = alpha s or fma(alpha, s, beta y), so the host
// references in aijpredict/layout_ref_csr.hpp reproduce them bit for bit.
#include "../format_impl.hpp"

#include <aijpredict/layout_ref_csr.hpp>

#include <atomic>

namespace aijp::detail {

namespace {

constexpr int block_size = layout_ref::csr_block_size;
constexpr unsigned full_mask = 0xffffffffu;
// Rows per lane group of csr_vector once one row per group needs more than a wave (the measurements that
// chose 4 are in layout_ref_csr.hpp).
constexpr int stacked_slots = layout_ref::csr_vector_stacked_slots;
// csr_vector's one-row loop walks a lane's steps in chunks of `chunk`: first the chunk's column indices and
// values (predicated past the row's end), then its x gathers, then the fused multiply-adds in order, as the
// sliced-ELL kernels do (sell_common::chunk), so a row of n steps takes ceil(n / chunk) dependent rounds. Under
// `#pragma unroll 4` a peeled first step and the n % 4 remainder iterations were a dependent col_idx -> x -> fma
// round each. H200, double, gated held-out set, 2026-11-28 (docs/models.md, Session 39): 8-9 % faster in
// geometric mean over 29 matrices, 10-24 % on the small real matrices with rows of 2-400 steps (bcsstk13 3.56 ->
// 2.71 us, adder_dcop_05 22.0 -> 18.3 us), the stacked rows unchanged. csr_scalar keeps `#pragma unroll 4`: the
// same chunks there won on short rows and stencils but lost 7-20 % on long rows (same section).
constexpr int chunk = layout_ref::csr_chunk;

template <typename Value, bool beta_zero>
__device__ __forceinline__ void write_result(Value* y, size_type row, Value alpha, Value sum, Value beta)
{
  if (beta_zero) {
    y[row] = alpha * sum;  // y is not read: NaN planted in y must not propagate
  } else {
    y[row] = fma(alpha, sum, beta * y[row]);
  }
}

template <typename Value, bool beta_zero>
__global__ void __launch_bounds__(block_size) csr_scalar_spmv(size_type rows, const index_type* __restrict__ row_ptr,
                                                              const index_type* __restrict__ col_idx,
                                                              const Value* __restrict__ values, Value alpha,
                                                              const Value* __restrict__ x, Value beta, Value* __restrict__ y)
{
  const size_type row = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const index_type end = row_ptr[row + 1];
  Value sum = 0;
#pragma unroll 4
  for (index_type k = row_ptr[row]; k < end; ++k) sum = fma(values[k], __ldg(x + col_idx[k]), sum);
  write_result<Value, beta_zero>(y, row, alpha, sum, beta);
}

// `lanes` consecutive threads own a row; each group owns `slots` rows of the block, slot i of group g being
// row block_first + i * groups + g (so every slot of a warp reads consecutive rows). With one slot a lane walks
// its entries in chunks of `chunk` steps (the loop shape above), so a row of n steps takes ceil(n / chunk)
// dependent rounds. With several slots all rows of the thread advance together (unrolled by 2), the loads of
// every slot in flight at once, where one row per group left short-row matrices with a single dependent
// load chain per warp. No thread returns early: every lane of the warp takes part in the full-mask
// shuffles; rows past the end contribute nothing (a finished row re-reads entry 0 and discards it).
template <typename Value, int lanes, int slots, bool beta_zero>
__global__ void __launch_bounds__(block_size) csr_vector_spmv(size_type rows, const index_type* __restrict__ row_ptr,
                                                              const index_type* __restrict__ col_idx,
                                                              const Value* __restrict__ values, Value alpha,
                                                              const Value* __restrict__ x, Value beta, Value* __restrict__ y)
{
  static_assert(lanes >= 2 && lanes <= 32 && (lanes & (lanes - 1)) == 0, "lanes must be a power of two in [2, 32]");
  constexpr int aligned = layout_ref::csr_vector_aligned_lanes;
  constexpr int groups = block_size / lanes;
  const int lane = static_cast<int>(threadIdx.x % lanes);
  const size_type first_row = static_cast<size_type>(blockIdx.x) * groups * slots + threadIdx.x / lanes;
  // 32-bit unsigned positions: k < end <= 2^31 - 1, so k + lanes cannot wrap.
  unsigned k[slots], steps[slots];
  Value sum[slots];
  unsigned max_steps = 0;
  unsigned begin0 = 0, end0 = 0;  // the row of the only slot (slots == 1)
#pragma unroll
  for (int i = 0; i < slots; ++i) {
    const size_type row = first_row + static_cast<size_type>(i) * groups;
    unsigned begin = 0, end = 0;
    if (row < rows) {
      begin = static_cast<unsigned>(row_ptr[row]);
      end = static_cast<unsigned>(row_ptr[row + 1]);
    }
    k[i] = begin + lane;
    if (lanes == aligned && end - begin > aligned) {
      // Long rows under a full warp start at the aligned index below `begin` (CUSP's csr_vector): each step
      // then reads whole 32-entry segments of col_idx / values instead of straddling two.
      k[i] = (begin & ~static_cast<unsigned>(aligned - 1)) + lane;
    }
    sum[i] = 0;
    if (slots == 1) {
      begin0 = begin;
      end0 = end;
      continue;  // the chunk loop below takes the first step too
    }
    if (k[i] >= begin && k[i] < end) sum[i] = fma(values[k[i]], __ldg(x + col_idx[k[i]]), sum[i]);
    k[i] += lanes;  // now >= begin on every lane
    steps[i] = k[i] < end ? (end - k[i] + lanes - 1) / lanes : 0;
    max_steps = max(max_steps, steps[i]);
  }
  if (slots == 1) {
    // Entry positions k, k + lanes, ...; only the first can lie below `begin` (the aligned start). At most
    // end + chunk * lanes < 2^32: no wrap.
    for (unsigned at = k[0]; at < end0; at += chunk * lanes) {
      bool in[chunk];
      index_type c[chunk];
      Value v[chunk], xv[chunk];
#pragma unroll
      for (int u = 0; u < chunk; ++u) {
        const unsigned e = at + static_cast<unsigned>(u * lanes);
        in[u] = e >= begin0 && e < end0;
        c[u] = in[u] ? col_idx[e] : 0;
        v[u] = in[u] ? values[e] : Value(0);
      }
#pragma unroll
      for (int u = 0; u < chunk; ++u) xv[u] = in[u] ? __ldg(x + c[u]) : Value(0);
#pragma unroll
      for (int u = 0; u < chunk; ++u) {
        if (in[u]) sum[0] = fma(v[u], xv[u], sum[0]);
      }
    }
  } else {
    // Every row of the thread advances one step per iteration, with the loads of all rows issued before any
    // fma: a row past its end re-reads entry 0 (an L1 hit, the same address on every lane) and keeps its
    // sum, so no load sits behind a branch and a step costs two dependent load rounds for all rows together
    // (col_idx and values, then x). With the loads inside `if (s < steps[i])`, the compiled code (sm_90,
    // CUDA 13.0) made each row's step wait for its own loads in turn. H100, double, 2026-11-23: 4096 rows of
    // 2000 entries over a 7-point Laplacian 128^3 took 235.9 us instead of 290.9, a 4M-row circuit matrix
    // 31.1 ms instead of 45.1; lap7, lap27, fem3, banded, normal and uniform stayed within 1.1 %
    // (docs/models.md).
#pragma unroll 2
    for (unsigned s = 0; s < max_steps; ++s) {
      index_type c[slots];
      Value v[slots];
#pragma unroll
      for (int i = 0; i < slots; ++i) {
        const unsigned at = s < steps[i] ? k[i] : 0u;
        c[i] = col_idx[at];
        v[i] = values[at];
      }
      Value xv[slots];
#pragma unroll
      for (int i = 0; i < slots; ++i) xv[i] = __ldg(x + c[i]);
#pragma unroll
      for (int i = 0; i < slots; ++i) {
        if (s < steps[i]) sum[i] = fma(v[i], xv[i], sum[i]);
        k[i] += lanes;
      }
    }
  }
  // Width `lanes`: each group reduces independently; lane 0 of the group ends with the row sum.
#pragma unroll
  for (int i = 0; i < slots; ++i) {
    for (int off = lanes / 2; off > 0; off /= 2) sum[i] += __shfl_down_sync(full_mask, sum[i], off, lanes);
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < slots; ++i) {
      const size_type row = first_row + static_cast<size_type>(i) * groups;
      if (row < rows) write_result<Value, beta_zero>(y, row, alpha, sum[i], beta);
    }
  }
}

unsigned blocks_for(size_type threads) { return static_cast<unsigned>((threads + block_size - 1) / block_size); }

template <typename Value>
class csr_scalar final : public format_impl<Value> {
 public:
  explicit csr_scalar(const device_csr<Value>& a) : a_(a) {}
  format_id id() const override { return format_id::csr_scalar; }
  void refresh_values(const device_csr<Value>&, cudaStream_t) override {}  // runs on the CSR copy itself
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (a_.rows == 0) return;
    const unsigned grid = blocks_for(a_.rows);
    if (beta == Value(0)) {
      csr_scalar_spmv<Value, true><<<grid, block_size, 0, stream>>>(a_.rows, a_.row_ptr.data(), a_.col_idx.data(),
                                                                    a_.values.data(), alpha, x, beta, y);
    } else {
      csr_scalar_spmv<Value, false><<<grid, block_size, 0, stream>>>(a_.rows, a_.row_ptr.data(), a_.col_idx.data(),
                                                                     a_.values.data(), alpha, x, beta, y);
    }
    AIJP_CHECK_LAUNCH();
  }
  size_type device_bytes() const override { return 0; }

 private:
  const device_csr<Value>& a_;
};

template <typename Value>
class csr_vector final : public format_impl<Value> {
 public:
  csr_vector(const device_csr<Value>& a, const row_stats& stats) : a_(a), lanes_(layout_ref::csr_vector_lanes(stats.mean))
  {
    // Stack rows only when one row per group would need more than one wave of resident blocks. Every
    // variant compiles to 32 registers and no shared memory (ptxas -v, CUDA 13.0), so one query serves all;
    // at 32 registers the resident threads per SM are the limit, which is what the models assume
    // (predict.cpp: max_threads_per_sm / block_size blocks per SM).
    slots_ = layout_ref::csr_vector_slots(a_.rows, lanes_, resident_blocks());
  }
  format_id id() const override { return format_id::csr_vector; }
  void refresh_values(const device_csr<Value>&, cudaStream_t) override {}  // runs on the CSR copy itself
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (a_.rows == 0) return;
    // The compiled set is layout_ref::csr_vector_lane_set; csr_vector_lanes only returns members of it.
    switch (lanes_) {
      case 2: launch<2>(alpha, x, beta, y, stream); break;
      case 4: launch<4>(alpha, x, beta, y, stream); break;
      case 8: launch<8>(alpha, x, beta, y, stream); break;
      case 16: launch<16>(alpha, x, beta, y, stream); break;
      default: launch<32>(alpha, x, beta, y, stream); break;
    }
  }
  size_type device_bytes() const override { return 0; }

 private:
  using kernel_type = void (*)(size_type, const index_type*, const index_type*, const Value*, Value, const Value*, Value,
                               Value*);
  template <int lanes, int slots, bool beta_zero>
  static kernel_type kernel_for()
  {
    return csr_vector_spmv<Value, lanes, slots, beta_zero>;
  }
  // Resident blocks of the current device (SMs x blocks per SM), queried once per device and value type: the
  // occupancy query made most of the 17-23 us of host time a staged conversion to csr_vector took in one
  // part of a short solve on the H100 machine (session 21).
  static size_type resident_blocks()
  {
    constexpr int cached_devices = 64;
    static std::atomic<long long> cache[cached_devices] = {};
    int device = 0;
    AIJP_CUDA_CHECK(cudaGetDevice(&device));
    if (device >= 0 && device < cached_devices) {
      const long long known = cache[device].load(std::memory_order_relaxed);
      if (known > 0) return static_cast<size_type>(known);
    }
    int sm_count = 0, blocks_per_sm = 0;
    AIJP_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    AIJP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel_for<32, 1, true>(), block_size, 0));
    const long long blocks = static_cast<long long>(sm_count) * blocks_per_sm;
    if (device >= 0 && device < cached_devices && blocks > 0) cache[device].store(blocks, std::memory_order_relaxed);
    return static_cast<size_type>(blocks);
  }
  template <int lanes>
  void launch(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream)
  {
    const bool beta_zero = beta == Value(0);
    kernel_type kernel = beta_zero ? kernel_for<lanes, 1, true>() : kernel_for<lanes, 1, false>();
    if (slots_ > 1) kernel = beta_zero ? kernel_for<lanes, stacked_slots, true>() : kernel_for<lanes, stacked_slots, false>();
    const unsigned grid = static_cast<unsigned>(layout_ref::csr_vector_blocks(a_.rows, lanes, slots_));
    kernel<<<grid, block_size, 0, stream>>>(a_.rows, a_.row_ptr.data(), a_.col_idx.data(), a_.values.data(), alpha, x,
                                            beta, y);
    AIJP_CHECK_LAUNCH();
  }

  const device_csr<Value>& a_;
  int lanes_;
  int slots_ = 1;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_csr_scalar(const build_args<Value>& args)
{
  return std::make_unique<csr_scalar<Value>>(args.a);
}
#if AIJP_FORMAT_PART_ENABLED(1)
AIJP_INSTANTIATE_FORMAT_FACTORY(make_csr_scalar)
#endif

template <typename Value>
std::unique_ptr<format_impl<Value>> make_csr_vector(const build_args<Value>& args)
{
  return std::make_unique<csr_vector<Value>>(args.a, args.stats);
}
#if AIJP_FORMAT_PART_ENABLED(2)
AIJP_INSTANTIATE_FORMAT_FACTORY(make_csr_vector)
#endif

}  // namespace aijp::detail
