// Locality of the x gathers, sampled on the device (a feature of our performance model; the published
// models ignore it). One block per sampled group of 32 consecutive rows inserts the 32-byte sector index of
// every entry's x into a shared-memory hash set and counts the distinct ones.
#include <aijpredict/gpu_matrix.hpp>

#include "csr_device.cuh"
#include "cuda_check.hpp"
#include "analysis_jobs.hpp"
#include "async_ops.hpp"
#include "device_buffer.hpp"
#include "module_preload.hpp"

#include <algorithm>

namespace aijp {

namespace {

constexpr int group_rows = 32;       // a warp of a thread-per-row kernel / a SELL slice
constexpr int table_size = 8192;     // shared hash slots (32 KiB); groups with more entries are capped below
constexpr int max_entries = 4096;    // entries per group looked at (keeps the table at most half full)

// Inserts `sector` into the block's shared open-addressing set (linear probing; the callers keep it at most
// half full) and counts it in `distinct` if it was not there yet.
__device__ __forceinline__ void insert_sector(int* table, int sector, unsigned int* distinct)
{
  unsigned h = (static_cast<unsigned>(sector) * 2654435761u) & (table_size - 1);
  while (true) {
    const int prev = atomicCAS(&table[h], -1, sector);
    if (prev == -1) {
      atomicAdd(distinct, 1u);
      return;
    }
    if (prev == sector) return;
    h = (h + 1) & (table_size - 1);
  }
}

// The block's distinct x sectors among the first `cap` entries of rows [r0, r1), counted in its shared hash
// set (cleared here); returns the entries looked at. Called by every thread of the block, with barriers:
// `distinct` holds the count for all of them on return.
__device__ index_type count_group_sectors(int* table, unsigned int* distinct, const index_type* __restrict__ row_ptr,
                                          const index_type* __restrict__ col_idx, size_type r0, size_type r1, int shift,
                                          index_type cap)
{
  for (int i = threadIdx.x; i < table_size; i += blockDim.x) table[i] = -1;
  if (threadIdx.x == 0) *distinct = 0;
  __syncthreads();
  const index_type begin = row_ptr[r0];
  const index_type end = min(row_ptr[r1], begin + cap);
  for (index_type k = begin + threadIdx.x; k < end; k += blockDim.x) insert_sector(table, col_idx[k] >> shift, distinct);
  __syncthreads();
  return end - begin;
}

struct locality_sums {
  unsigned long long distinct;
  unsigned long long entries;
};

__global__ void __launch_bounds__(256) sector_counts(size_type rows, int groups, const index_type* __restrict__ row_ptr,
                                                     const index_type* __restrict__ col_idx, int shift,
                                                     locality_sums* out)
{
  __shared__ int table[table_size];
  __shared__ unsigned int distinct;
  // Evenly spaced groups over the whole matrix.
  const size_type total_groups = (rows + group_rows - 1) / group_rows;
  const size_type g = static_cast<size_type>(blockIdx.x) * total_groups / groups;
  const size_type r0 = g * group_rows, r1 = min(r0 + group_rows, rows);
  const index_type entries = count_group_sectors(table, &distinct, row_ptr, col_idx, r0, r1, shift, max_entries);
  if (threadIdx.x == 0) {
    atomicAdd(&out->distinct, static_cast<unsigned long long>(distinct));
    atomicAdd(&out->entries, static_cast<unsigned long long>(entries));
  }
}

// Sorted-order locality: the layouts that sort rows by length (jad, pellr, sell_sigma; stable sorts) give a
// warp 32 rows of one length, which in natural order lie up to 1 / (share of rows of that length) apart.
// One block per sampled group: warp 0 collects the first 32 rows of the length of a row drawn in the group,
// at or after it (at most scan_rows looked at), as the stable sort's warp would hold them; then every thread
// inserts the x sectors of their entries (at most per_row_entries each) into the hash set, and thread 0
// counts the distinct 32-byte sectors of y the 32 rows write.
constexpr int scan_rows = 8192;
constexpr int per_row_entries = max_entries / group_rows;

struct sorted_sums {
  unsigned long long x_distinct;
  unsigned long long entries;
  unsigned long long y_sectors;
  unsigned long long rows;
};

__global__ void __launch_bounds__(256) sorted_sector_counts(size_type rows, int groups, const index_type* __restrict__ row_ptr,
                                                            const index_type* __restrict__ col_idx, int shift,
                                                            sorted_sums* out)
{
  __shared__ int table[table_size];
  __shared__ unsigned int distinct, entries;
  __shared__ index_type picked[group_rows];
  __shared__ int count;
  for (int i = threadIdx.x; i < table_size; i += blockDim.x) table[i] = -1;
  if (threadIdx.x == 0) {
    distinct = 0;
    entries = 0;
    count = 0;
  }
  __syncthreads();
  // A row drawn at a pseudo-random offset inside the sampled group, so that a length is drawn with the share
  // of rows it has, which is the share of the sorted order's warps made of it (a fixed offset would follow
  // the period of a stencil's grid lines and draw its boundary rows far more often than they occur).
  const size_type total_groups = (rows + group_rows - 1) / group_rows;
  const size_type g = static_cast<size_type>(blockIdx.x) * total_groups / groups;
  const unsigned offset = (static_cast<unsigned>(g) * 2654435761u >> 16) % group_rows;
  const size_type r0 = min(g * group_rows + offset, rows - 1);
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    const index_type want = row_ptr[r0 + 1] - row_ptr[r0];
    int found = 0;
    for (size_type base = r0; base < rows && base < r0 + scan_rows && found < group_rows; base += 32) {
      const size_type r = base + lane;
      const bool match = r < rows && row_ptr[r + 1] - row_ptr[r] == want;
      const unsigned mask = __ballot_sync(0xffffffffu, match);
      const int pos = found + __popc(mask & ((1u << lane) - 1u));
      if (match && pos < group_rows) picked[pos] = static_cast<index_type>(r);
      found += __popc(mask);
    }
    if (lane == 0) count = min(found, group_rows);
  }
  __syncthreads();
  for (int p = 0; p < count; ++p) {
    const index_type begin = row_ptr[picked[p]];
    const index_type end = min(row_ptr[picked[p] + 1], begin + per_row_entries);
    for (index_type k = begin + threadIdx.x; k < end; k += blockDim.x) {
      insert_sector(table, col_idx[k] >> shift, &distinct);
    }
    if (threadIdx.x == 0) entries += end - begin;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long y = 0;
    for (int p = 0; p < count; ++p) y += p == 0 || (picked[p] >> shift) != (picked[p - 1] >> shift);  // rows increase
    atomicAdd(&out->x_distinct, static_cast<unsigned long long>(distinct));
    atomicAdd(&out->entries, static_cast<unsigned long long>(entries));
    atomicAdd(&out->y_sectors, y);
    atomicAdd(&out->rows, static_cast<unsigned long long>(count));
  }
}

// One block per sampled group of a strip (block b: strip b / per_strip, group b % per_strip), the groups of
// add_strip_locality_host (planner.hpp); each block writes its group's counts (zeros past the strip's groups).
__global__ void __launch_bounds__(256) strip_sector_counts(const size_type* __restrict__ strip_begin, const size_type* __restrict__ strip_rows,
                                                           int per_strip, const index_type* __restrict__ row_ptr,
                                                           const index_type* __restrict__ col_idx, int shift, strip_locality_group* out)
{
  __shared__ int table[table_size];
  __shared__ unsigned int distinct;
  const int s = blockIdx.x / per_strip;
  const size_type q = blockIdx.x % per_strip;
  const size_type groups = (strip_rows[s] + group_rows - 1) / group_rows;
  const size_type n = min(groups, static_cast<size_type>(per_strip));
  if (q >= n) return;  // uniform per block: no thread reaches a barrier the others skip (out is zeroed)
  const size_type r0 = strip_begin[s] + group_rows * (q * groups / n);
  const size_type r1 = min(r0 + group_rows, strip_begin[s] + strip_rows[s]);
  const index_type entries = count_group_sectors(table, &distinct, row_ptr, col_idx, r0, r1, shift, strip_locality_max_entries);
  if (threadIdx.x == 0) {
    out[blockIdx.x].distinct = distinct;
    out[blockIdx.x].entries = static_cast<std::uint64_t>(entries);
    out[blockIdx.x].nnz = static_cast<std::uint64_t>(row_ptr[r1] - row_ptr[r0]);
  }
}

// Column facts of the strips, a thread per run of entries_per_run consecutive nonzeros (a warp per row would
// leave a power-law matrix's longest row, 10^5-10^6 entries, to one warp: 8 ms on an H100 for a 4M-row stack).
// The thread finds its first entry's row (row_of_entry), walks its entries, and adds the steps
// that are not a row's first entry to its strip's facts: per warp when the warp's entries lie in one strip,
// per thread otherwise (at strip boundaries).
constexpr int entries_per_run = 8;

__device__ void add_column_facts(int strip, int step, unsigned long long bad, int* max_step, unsigned long long* unsorted)
{
  if (step > 0) atomicMax(max_step + strip, step);
  if (bad > 0) atomicAdd(unsorted + strip, bad);
}

__global__ void __launch_bounds__(256) strip_column_facts(size_type rows, size_type nnz, size_type strip_rows,
                                                          const index_type* __restrict__ row_ptr,
                                                          const index_type* __restrict__ col_idx, int* max_step,
                                                          unsigned long long* unsorted)
{
  const size_type first = (static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x) * entries_per_run;
  int strip = -1, step = 0;
  unsigned long long bad = 0;
  if (first < nnz) {
    size_type r = detail::row_of_entry(row_ptr, rows, first);
    strip = static_cast<int>(r / strip_rows);
    const size_type last = min(first + entries_per_run, nnz);
    for (size_type k = first; k < last; ++k) {
      while (row_ptr[r + 1] <= k) ++r;  // past empty rows too
      const int s = static_cast<int>(r / strip_rows);
      if (s != strip) {
        add_column_facts(strip, step, bad, max_step, unsorted);
        strip = s;
        step = 0;
        bad = 0;
      }
      if (k > static_cast<size_type>(row_ptr[r])) {
        const index_type d = col_idx[k] - col_idx[k - 1];
        step = max(step, d);
        bad += d <= 0;
      }
    }
  }
  // Lane 0 holds the warp's first entries: when it has none, no lane has.
  const int lead = __shfl_sync(0xffffffffu, strip, 0);
  if (__all_sync(0xffffffffu, strip == lead || strip < 0)) {
    for (int o = 16; o > 0; o /= 2) {
      step = max(step, __shfl_xor_sync(0xffffffffu, step, o));
      bad += __shfl_xor_sync(0xffffffffu, bad, o);
    }
    if (threadIdx.x % 32 == 0 && lead >= 0) add_column_facts(lead, step, bad, max_step, unsorted);
  } else if (strip >= 0) {
    add_column_facts(strip, step, bad, max_step, unsorted);
  }
}

}  // namespace

void add_strip_columns(std::vector<strip_summary>& strips, const index_type* d_row_ptr, const index_type* d_col_idx,
                       cudaStream_t stream)
{
  const int n = static_cast<int>(strips.size());
  if (n == 0) return;
  const size_type strip_rows = strips[0].rows;
  size_type nnz = 0;
  for (int i = 0; i < n; ++i) {
    AIJP_ENSURE(strips[i].row_begin == i * strip_rows && (strips[i].rows == strip_rows || i == n - 1), bad_input,
                "add_strip_columns: the strips must be equal consecutive row ranges from row 0");
    nnz += strips[i].nnz;
  }
  const size_type rows = strips[n - 1].row_begin + strips[n - 1].rows;
  detail::device_buffer<int> d_step(n);
  detail::device_buffer<unsigned long long> d_unsorted(n);
  AIJP_CUDA_CHECK(cudaMemsetAsync(d_step.data(), 0, n * sizeof(int), stream));
  AIJP_CUDA_CHECK(cudaMemsetAsync(d_unsorted.data(), 0, n * sizeof(unsigned long long), stream));
  if (nnz > 0) {
    const size_type per_block = 256 * entries_per_run;
    strip_column_facts<<<static_cast<unsigned>((nnz + per_block - 1) / per_block), 256, 0, stream>>>(
        rows, nnz, strip_rows, d_row_ptr, d_col_idx, d_step.data(), d_unsorted.data());
    AIJP_CHECK_LAUNCH();
  }
  std::vector<int> step(n);
  std::vector<unsigned long long> unsorted(n);
  AIJP_CUDA_CHECK(cudaMemcpyAsync(step.data(), d_step.data(), n * sizeof(int), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaMemcpyAsync(unsorted.data(), d_unsorted.data(), n * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) {
    strips[i].max_column_step = step[i];
    strips[i].unsorted_steps = static_cast<size_type>(unsorted[i]);
  }
}

void add_strip_locality(std::vector<strip_summary>& strips, const index_type* d_row_ptr, const index_type* d_col_idx,
                        int value_bytes, cudaStream_t stream)
{
  static_assert(strip_locality_max_entries <= max_entries, "the shared hash set holds max_entries at half load");
  const int n = static_cast<int>(strips.size());
  if (n == 0) return;
  std::vector<size_type> begin(n), rows(n);
  for (int i = 0; i < n; ++i) {
    begin[i] = strips[i].row_begin;
    rows[i] = strips[i].rows;
  }
  const std::size_t blocks = static_cast<std::size_t>(n) * strip_locality_groups;
  detail::device_buffer<size_type> d_begin(n), d_rows(n);
  detail::device_buffer<strip_locality_group> d_groups(blocks);
  AIJP_CUDA_CHECK(cudaMemcpyAsync(d_begin.data(), begin.data(), n * sizeof(size_type), cudaMemcpyHostToDevice, stream));
  AIJP_CUDA_CHECK(cudaMemcpyAsync(d_rows.data(), rows.data(), n * sizeof(size_type), cudaMemcpyHostToDevice, stream));
  AIJP_CUDA_CHECK(cudaMemsetAsync(d_groups.data(), 0, blocks * sizeof(strip_locality_group), stream));
  const int shift = value_bytes == 8 ? 2 : 3;
  strip_sector_counts<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(d_begin.data(), d_rows.data(), strip_locality_groups,
                                                                          d_row_ptr, d_col_idx, shift, d_groups.data());
  AIJP_CHECK_LAUNCH();
  std::vector<strip_locality_group> h(blocks);
  AIJP_CUDA_CHECK(cudaMemcpyAsync(h.data(), d_groups.data(), blocks * sizeof(strip_locality_group), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) {
    const size_type groups = (strips[i].rows + group_rows - 1) / group_rows;
    const int used = static_cast<int>(std::min<size_type>(groups, strip_locality_groups));
    strips[i].x_sectors_per_nnz = strip_locality_of(h.data() + static_cast<std::size_t>(i) * strip_locality_groups, used);
  }
}

namespace {
// Both samplers' sums in one buffer: one copy back and one event for the two.
struct locality_both {
  locality_sums natural;
  sorted_sums sorted;
};
}  // namespace

namespace detail {

struct locality_job::state {
  int phase = 0;  // 0: not started, 1: in flight, 2: done
  scratch_buffer<locality_both> d;
  pinned_buffer<locality_both> h{1};
  poll_event event;
  locality_sample result;
  ~state() { event.settle(); }  // the pooled blocks go back to the pool: nothing issued may still use them
};

locality_job::locality_job() : s_(std::make_unique<state>()) {}
locality_job::~locality_job() = default;
const locality_sample& locality_job::result() const { return s_->result; }

void locality_job::start(size_type rows, size_type cols, const index_type* d_row_ptr, const index_type* d_col_idx,
                         int value_bytes, cudaStream_t stream, int max_groups)
{
  state& s = *s_;
  s.result = {};
  if (rows == 0 || cols == 0) {
    s.phase = 2;
    return;
  }
  const size_type total_groups = (rows + group_rows - 1) / group_rows;
  const int groups = static_cast<int>(std::min<size_type>(total_groups, std::max(1, max_groups)));
  const int shift = value_bytes == 8 ? 2 : 3;  // 32-byte sector = 4 doubles or 8 floats
  s.d.resize(1);
  AIJP_CUDA_CHECK(cudaMemsetAsync(s.d.data(), 0, sizeof(locality_both), stream));
  sector_counts<<<groups, 256, 0, stream>>>(rows, groups, d_row_ptr, d_col_idx, shift, &s.d.data()->natural);
  AIJP_CHECK_LAUNCH();
  sorted_sector_counts<<<groups, 256, 0, stream>>>(rows, groups, d_row_ptr, d_col_idx, shift, &s.d.data()->sorted);
  AIJP_CHECK_LAUNCH();
  AIJP_CUDA_CHECK(cudaMemcpyAsync(s.h.data(), s.d.data(), sizeof(locality_both), cudaMemcpyDeviceToHost, stream));
  s.event.record(stream);
  s.phase = 1;
}

bool locality_job::poll()
{
  state& s = *s_;
  AIJP_ENSURE(s.phase > 0, error, "locality_job::poll before start");
  if (s.phase == 2) return true;
  if (!s.event.done()) return false;
  const auto ratio = [](unsigned long long num, unsigned long long den) {
    return den ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
  };
  const locality_both& h = s.h[0];
  s.result.x_sectors_per_nnz = ratio(h.natural.distinct, h.natural.entries);
  s.result.sorted.x_sectors_per_nnz = ratio(h.sorted.x_distinct, h.sorted.entries);
  s.result.sorted.y_sectors_per_row = ratio(h.sorted.y_sectors, h.sorted.rows);
  s.phase = 2;
  return true;
}

const locality_sample& locality_job::wait()
{
  while (!poll()) s_->event.wait();
  return s_->result;
}

}  // namespace detail

locality_sample sample_locality(size_type rows, size_type cols, const index_type* d_row_ptr, const index_type* d_col_idx,
                                int value_bytes, cudaStream_t stream, int max_groups)
{
  detail::locality_job job;
  job.start(rows, cols, d_row_ptr, d_col_idx, value_bytes, stream, max_groups);
  return job.wait();
}

}  // namespace aijp

// The module of this unit is loaded at context creation (module_preload.hpp).
AIJP_MODULE_ANCHOR("features.cu", 0)
