// COO: a row index per nonzero, built on the device from row_ptr; columns and values are those of the CSR
// copy (`a` outlives the format), so the format holds 4 bytes per nonzero and a value refresh copies nothing.
//
// SpMV in two launches: y = beta y (a memset when beta == 0, so NaN in y does not propagate), then the
// products. Each warp owns a contiguous chunk of nonzeros and walks it in tiles of 128, 4 consecutive
// entries per lane (16-byte loads). Rows are sorted (they come from CSR), so the entries of one row are
// consecutive: each lane sums its entries by row, a segmented scan over the lanes joins the runs that cross
// lanes, and the run still open at lane 31 is carried into the next tile. A closed run costs one atomicAdd;
// the first closed run and the open run at the end of the chunk are handed to the block, which merges runs
// shared by neighbouring warps before adding them. A row of n entries therefore costs about
// n / (entries per block) atomics instead of n, which matters on long rows where every atomic hits the
// same address. Four entries per lane instead of one (H200, double, CUDA 13.0): one 2M-entry row 18.7 us
// -> 11.8 us, 3D 7-point Laplacian with 56M nonzeros 399 us -> 365 us.
#include "../csr_device.cuh"
#include "../format_impl.hpp"
#include "../vector_ops.hpp"

#include <algorithm>
#include <cstdint>

namespace aijp::detail {

namespace {

constexpr int block_size = 256;
constexpr int warp_size = 32;
constexpr int warps_per_block = block_size / warp_size;
constexpr unsigned full_mask = 0xffffffffu;
constexpr int items = 4;                          // consecutive entries per lane (one 16-byte index load)
constexpr int tile_size = warp_size * items;      // entries per warp step

// row_idx[k] = the row containing entry k: the largest r with row_ptr[r] <= k. Binary search instead of a
// thread per row writing its range, so one very long row does not serialise the conversion.
__global__ void coo_row_indices(size_type rows, size_type nnz, const index_type* __restrict__ row_ptr,
                                index_type* __restrict__ row_idx)
{
  const size_type k = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= nnz) return;
  row_idx[k] = static_cast<index_type>(row_of_entry(row_ptr, rows, k));
}

// Four consecutive entries per thread, read with 16-byte loads (every tile starts at a multiple of 128
// entries and cudaMalloc aligns to 256 bytes) when the arrays start 16-byte aligned; a partition block's
// entries are a slice of the CSR copy's (make_block_part) and may not, and then use scalar loads. Only the
// entry range's last tile falls back to guarded scalar loads.
template <typename T>
__device__ __forceinline__ void load_scalar_items(const T* __restrict__ p, T (&v)[items])
{
#pragma unroll
  for (int j = 0; j < items; ++j) v[j] = __ldg(p + j);
}
__device__ __forceinline__ void load_items(const index_type* __restrict__ p, index_type (&v)[items])
{
  const int4 t = __ldg(reinterpret_cast<const int4*>(p));
  v[0] = t.x;
  v[1] = t.y;
  v[2] = t.z;
  v[3] = t.w;
}
__device__ __forceinline__ void load_items(const double* __restrict__ p, double (&v)[items])
{
  const double2 a = __ldg(reinterpret_cast<const double2*>(p));
  const double2 b = __ldg(reinterpret_cast<const double2*>(p) + 1);
  v[0] = a.x;
  v[1] = a.y;
  v[2] = b.x;
  v[3] = b.y;
}
__device__ __forceinline__ void load_items(const float* __restrict__ p, float (&v)[items])
{
  const float4 t = __ldg(reinterpret_cast<const float4*>(p));
  v[0] = t.x;
  v[1] = t.y;
  v[2] = t.z;
  v[3] = t.w;
}

// y += alpha A x over chunks of tiles_per_warp * 128 nonzeros, one chunk per warp, 128 entries (4 per lane)
// per step. Each lane first sums its own 4 entries by row: a run that starts and ends inside the lane is
// complete and added at once; the lane's first run (which may continue the previous lane's) and its last
// run (which may continue into the next lane) go through one segmented scan over the lanes. The run still
// open at lane 31 is carried into the next tile. The chunk's first closed run and its open run at the end
// are handed to the block, which merges runs shared by neighbouring warps before adding them. No thread
// returns early: the whole warp takes part in the shuffles and the whole block in the barrier.
template <typename Value, bool wide>
__global__ void __launch_bounds__(block_size) coo_spmv(size_type nnz, size_type tiles_per_warp,
                                                          const index_type* __restrict__ row_idx,
                                                          const index_type* __restrict__ col_idx,
                                                          const Value* __restrict__ values, Value alpha,
                                                          const Value* __restrict__ x, Value* __restrict__ y)
{
  // Per warp: its first closed run (head) and its run open at the end of the chunk (tail); row -1 = none.
  __shared__ index_type head_row[warps_per_block], tail_row[warps_per_block];
  __shared__ Value head_val[warps_per_block], tail_val[warps_per_block];

  const int lane = static_cast<int>(threadIdx.x % warp_size);
  const int warp = static_cast<int>(threadIdx.x / warp_size);
  const size_type chunk = tiles_per_warp * tile_size;
  const size_type begin = (static_cast<size_type>(blockIdx.x) * warps_per_block + warp) * chunk;
  const size_type end = min(begin + chunk, nnz);
  const unsigned lanes_to_me = full_mask >> (warp_size - 1 - lane);  // bits 0..lane

  // Warp-uniform state.
  index_type open_row = -1;  // run open at lane 31 of the previous tile
  Value open_val = 0;
  index_type first_row = -1;  // first closed run of the chunk, held back for the block merge
  Value first_val = 0;

  for (size_type base = begin; base < end; base += tile_size) {
    // Entries past the end get row -1 and a zero product: they trail the valid ones, form their own run,
    // and that run is never written.
    const size_type k0 = base + static_cast<size_type>(items) * lane;
    index_type r[items];
    Value p[items];
    if (k0 + items <= end) {
      index_type c[items];
      Value v[items];
      load_items(row_idx + k0, r);  // the format's own array: aligned
      if (wide) {
        load_items(col_idx + k0, c);
        load_items(values + k0, v);
      } else {
        load_scalar_items(col_idx + k0, c);
        load_scalar_items(values + k0, v);
      }
#pragma unroll
      for (int j = 0; j < items; ++j) p[j] = v[j] * __ldg(x + c[j]);
    } else {
#pragma unroll
      for (int j = 0; j < items; ++j) {
        r[j] = -1;
        p[j] = 0;
        if (k0 + j < end) {
          r[j] = row_idx[k0 + j];
          p[j] = values[k0 + j] * __ldg(x + col_idx[k0 + j]);
        }
      }
    }

    // Runs inside the lane: `first` is the lane's first run (if it ends inside the lane), `acc` its last.
    bool broke = false;
    Value first = 0;
    Value acc = p[0];
#pragma unroll
    for (int j = 1; j < items; ++j) {
      if (r[j] != r[j - 1]) {
        if (!broke) {
          first = acc;
          broke = true;
        } else if (r[j - 1] >= 0) {
          atomicAdd(y + r[j - 1], alpha * acc);  // starts and ends inside this lane: complete
        }
        acc = p[j];
      } else {
        acc += p[j];
      }
    }
    const index_type row0 = r[0], row_last = r[items - 1];

    // Does the lane's first entry continue the run before it (the previous lane's last, or for lane 0 the
    // run open since the previous tile)?
    index_type before = __shfl_up_sync(full_mask, row_last, 1);
    if (lane == 0) before = open_row;
    const bool continues = row0 == before;
    if (lane == 0 && continues) {
      if (broke) {
        first += open_val;
      } else {
        acc += open_val;
      }
    }
    const index_type lane0_row = __shfl_sync(full_mask, row0, 0);  // valid: base < end
    if (lane0_row != open_row && open_row >= 0) {
      // The open run ended at the previous tile.
      if (first_row < 0) {
        first_row = open_row;
        first_val = open_val;
      } else if (lane == 0) {
        atomicAdd(y + open_row, alpha * open_val);
      }
    }

    // Segmented inclusive scan of the lanes' last runs: a segment starts at a lane whose last run starts
    // inside it (broke) or whose first entry does not continue the previous lane.
    const unsigned starts = __ballot_sync(full_mask, lane == 0 || broke || !continues);
    const int seg_start = warp_size - 1 - __clz(starts & lanes_to_me);
    for (int off = 1; off < warp_size; off *= 2) {
      const Value up = __shfl_up_sync(full_mask, acc, off);
      if (lane - off >= seg_start) acc += up;
    }
    // The lane's first run, if it ends inside the lane, still needs what the lanes before it hold.
    const Value prefix = __shfl_up_sync(full_mask, acc, 1);
    if (broke && continues && lane > 0) first += prefix;

    // Closed runs: the first run of a lane that broke, and a last run that the next lane does not continue.
    const index_type after = __shfl_down_sync(full_mask, row0, 1);
    const bool last_closes = lane < warp_size - 1 && after != row_last && row_last >= 0;
    bool emit_first = broke;  // broke implies row0 >= 0 (invalid entries only trail)
    bool emit_last = last_closes;
    const unsigned closing = __ballot_sync(full_mask, emit_first || emit_last);
    if (closing != 0 && first_row < 0) {
      // The earliest closed run of the tile is held back: the lowest closing lane's first run if it broke,
      // else its last run.
      const int lead = __ffs(static_cast<int>(closing)) - 1;
      first_row = __shfl_sync(full_mask, broke ? row0 : row_last, lead);
      first_val = __shfl_sync(full_mask, broke ? first : acc, lead);
      if (lane == lead) {
        if (broke) {
          emit_first = false;
        } else {
          emit_last = false;
        }
      }
    }
    if (emit_first) atomicAdd(y + row0, alpha * first);
    if (emit_last) atomicAdd(y + row_last, alpha * acc);
    open_row = __shfl_sync(full_mask, row_last, warp_size - 1);
    open_val = __shfl_sync(full_mask, acc, warp_size - 1);
  }

  if (lane == 0) {
    head_row[warp] = first_row;
    head_val[warp] = first_val;
    tail_row[warp] = open_row;
    tail_val[warp] = open_val;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // The warps' chunks are consecutive, so the held-back runs in warp order (head, tail, head, tail, ...)
    // have ascending rows, and runs of the same row are neighbours: merge them, then one atomic each.
    index_type cur_row = -1;
    Value cur_val = 0;
    for (int i = 0; i < 2 * warps_per_block; ++i) {
      const int w = i / 2;
      const index_type rr = i % 2 == 0 ? head_row[w] : tail_row[w];
      if (rr < 0) continue;
      const Value v = i % 2 == 0 ? head_val[w] : tail_val[w];
      if (rr == cur_row) {
        cur_val += v;
      } else {
        if (cur_row >= 0) atomicAdd(y + cur_row, alpha * cur_val);
        cur_row = rr;
        cur_val = v;
      }
    }
    if (cur_row >= 0) atomicAdd(y + cur_row, alpha * cur_val);
  }
}

unsigned blocks_for(size_type threads) { return static_cast<unsigned>((threads + block_size - 1) / block_size); }

template <typename Value>
class coo final : public format_impl<Value> {
 public:
  coo(const device_csr<Value>& a, cudaStream_t stream) : a_(a)
  {
    row_idx_.resize(static_cast<std::size_t>(a.nnz), a.layout_memory());
    if (a.nnz > 0) {
      coo_row_indices<<<blocks_for(a.nnz), block_size, 0, stream>>>(a.rows, a.nnz, a.row_ptr.data(), row_idx_.data());
      AIJP_CHECK_LAUNCH();
    }
    // One wave of resident warps, each owning an equal chunk of whole tiles: fewer chunks than that would
    // leave SMs idle, more would only add chunk boundaries (atomics on shared rows) without more parallelism.
    int device = 0, sm_count = 0, blocks_per_sm = 0;
    AIJP_CUDA_CHECK(cudaGetDevice(&device));
    AIJP_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    AIJP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, coo_spmv<Value, true>, block_size, 0));
    const size_type max_warps = static_cast<size_type>(std::max(sm_count, 1)) * std::max(blocks_per_sm, 1) * warps_per_block;
    const size_type tiles = (a.nnz + tile_size - 1) / tile_size;
    tiles_per_warp_ = tiles > 0 ? (tiles + max_warps - 1) / max_warps : 0;
    const size_type warps = tiles > 0 ? (tiles + tiles_per_warp_ - 1) / tiles_per_warp_ : 0;
    blocks_ = static_cast<unsigned>((warps + warps_per_block - 1) / warps_per_block);
  }
  format_id id() const override { return format_id::coo; }
  // Values are read from the CSR copy, which the caller has already refreshed; the pattern is unchanged.
  void refresh_values(const device_csr<Value>&, cudaStream_t) override {}
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    if (a_.rows == 0) return;
    scale_or_zero(a_.rows, beta, y, stream);
    if (blocks_ == 0) return;
    const auto misaligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 != 0; };
    if (misaligned(a_.col_idx.data()) || misaligned(a_.values.data())) {
      coo_spmv<Value, false><<<blocks_, block_size, 0, stream>>>(a_.nnz, tiles_per_warp_, row_idx_.data(), a_.col_idx.data(),
                                                                 a_.values.data(), alpha, x, y);
    } else {
      coo_spmv<Value, true><<<blocks_, block_size, 0, stream>>>(a_.nnz, tiles_per_warp_, row_idx_.data(), a_.col_idx.data(),
                                                                a_.values.data(), alpha, x, y);
    }
    AIJP_CHECK_LAUNCH();
  }
  size_type device_bytes() const override { return static_cast<size_type>(row_idx_.bytes()); }

 private:
  const device_csr<Value>& a_;
  device_buffer<index_type> row_idx_;
  size_type tiles_per_warp_ = 0;
  unsigned blocks_ = 0;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_coo(const build_args<Value>& args)
{
  return std::make_unique<coo<Value>>(args.a, args.stream);
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_coo)

}  // namespace aijp::detail
