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

// The block's distinct x sectors among entries [begin, end), counted in its shared hash set (cleared here).
// Called by every thread of the block, with barriers: `distinct` holds the count for all of them on return.
__device__ void count_entry_sectors(int* table, unsigned int* distinct, const index_type* __restrict__ col_idx,
                                    index_type begin, index_type end, int shift)
{
  for (int i = threadIdx.x; i < table_size; i += blockDim.x) table[i] = -1;
  if (threadIdx.x == 0) *distinct = 0;
  __syncthreads();
  for (index_type k = begin + threadIdx.x; k < end; k += blockDim.x) insert_sector(table, col_idx[k] >> shift, distinct);
  __syncthreads();
}

// The same among the first `cap` entries of rows [r0, r1); returns the entries looked at.
__device__ index_type count_group_sectors(int* table, unsigned int* distinct, const index_type* __restrict__ row_ptr,
                                          const index_type* __restrict__ col_idx, size_type r0, size_type r1, int shift,
                                          index_type cap)
{
  const index_type begin = row_ptr[r0];
  const index_type end = min(row_ptr[r1], begin + cap);
  count_entry_sectors(table, distinct, col_idx, begin, end, shift);
  return end - begin;
}

struct locality_sums {
  unsigned long long distinct;
  unsigned long long entries;
  // The gather mixture (aijp::gather_mixture): windows per bin and the sum of their ratios.
  unsigned int mix_windows[gather_mixture::bins];
  double mix_ratio_sum[gather_mixture::bins];
  // The longest row holding a window's nonzero (gather_mixture::longest_row_len/ratio), packed so that one
  // atomicMax keeps it: length << 26 | (sector changes + 1) << 13 | entries looked at (both at most 4096).
  unsigned long long longest_row;
};

constexpr int longest_count_bits = 13;  // 4096 = max_entries fits in 13 bits
static_assert(max_entries < (1 << longest_count_bits), "the packed longest row holds counts up to max_entries");

// Decodes locality_sums::longest_row into the row's length and its sector changes per entry.
void decode_longest_row(unsigned long long packed, double& len, double& ratio)
{
  constexpr unsigned long long mask = (1ull << longest_count_bits) - 1;
  const unsigned long long entries = packed & mask, changes = (packed >> longest_count_bits) & mask;
  len = static_cast<double>(packed >> (2 * longest_count_bits));
  ratio = entries > 0 ? static_cast<double>(changes) / static_cast<double>(entries) : 0.0;
}

// detail::row_of_entry by the whole block (every thread calls it; it synchronises): each step splits [lo, hi)
// into one piece per thread, and the thread whose piece holds k (row_ptr[a] <= k < row_ptr[b]; exactly one, as
// row_ptr is non-decreasing) narrows the range to it. log_256 steps of one load per thread instead of log_2
// dependent loads by every thread: on the H100 the row-order and sorted samplers together took 0-9 us less with it
// (lap7 128^3 86.9 -> 83.7 us, the 2M-row circuit 87.4 -> 78.5, the 2M-row power law 135.2 -> 126.8;
// bench/results/2026-12-07_h100_session43_call2_analysis_cost.txt).
__device__ size_type block_row_of_entry(const index_type* __restrict__ row_ptr, size_type rows, size_type k)
{
  __shared__ size_type range[2];
  if (threadIdx.x == 0) {
    range[0] = 0;
    range[1] = rows;
  }
  __syncthreads();
  while (true) {
    const size_type lo = range[0], hi = range[1];
    __syncthreads();  // every thread has read the range
    if (hi - lo <= 1) return lo;
    const size_type span = hi - lo;
    const size_type a = lo + span * threadIdx.x / blockDim.x, b = lo + span * (threadIdx.x + 1) / blockDim.x;
    if (a < b && row_ptr[a] <= static_cast<index_type>(k) && static_cast<index_type>(k) < row_ptr[b]) {
      range[0] = a;
      range[1] = b;
    }
    __syncthreads();
  }
}

// At most max_entries entries of [lo, hi) centred on entry k (clamped to the range): [begin, begin + len).
__device__ void centred_window(index_type k, index_type lo, index_type hi, index_type& begin, index_type& len)
{
  len = min(hi - lo, static_cast<index_type>(max_entries));
  begin = min(max(k - len / 2, lo), hi - len);
}

// The mixture's window for sample b of n (aijp::gather_mixture; the host walk of the GPU test
// LocalitySamplesMatchAHostWalkOfTheSameGroups is its reference): the nonzero k = (2b + 1) nnz / (2n), the 32-row
// group holding it, and at most max_entries entries of that group around k (centred_window).
// `k` is that nonzero and `row` the row holding it (-1 for an empty matrix). Called by every thread of the block.
__device__ void mixture_window(size_type rows, const index_type* __restrict__ row_ptr, int b, int n, index_type& k,
                               index_type& begin, index_type& end, size_type& row)
{
  const size_type nnz = row_ptr[rows];
  k = begin = end = 0;
  row = -1;
  if (nnz <= 0) return;
  k = static_cast<index_type>((2 * static_cast<size_type>(b) + 1) * nnz / (2 * static_cast<size_type>(n)));
  row = block_row_of_entry(row_ptr, rows, k);
  const size_type g = row / group_rows;
  index_type len;
  centred_window(k, row_ptr[g * group_rows], row_ptr[min((g + 1) * group_rows, rows)], begin, len);
  end = begin + len;
}

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
  // Then the block's mixture window, at evenly spaced nonzeros (the same table, cleared again).
  __syncthreads();  // thread 0 has read `distinct`
  index_type k, begin, end;
  size_type row;
  mixture_window(rows, row_ptr, static_cast<int>(blockIdx.x), groups, k, begin, end, row);
  count_entry_sectors(table, &distinct, col_idx, begin, end, shift);
  if (threadIdx.x == 0 && end > begin) {
    const double ratio = static_cast<double>(distinct) / static_cast<double>(end - begin);
    const int bin = min(gather_mixture::bins - 1, static_cast<int>(ratio * gather_mixture::bins));
    atomicAdd(&out->mix_windows[bin], 1u);
    atomicAdd(&out->mix_ratio_sum[bin], ratio);
  }
  // Then the row holding the window's nonzero, alone: its sector changes between consecutive entries over at
  // most max_entries of them centred on the nonzero (no hash set: a count over neighbours).
  if (row < 0) return;
  __syncthreads();  // thread 0 has read `distinct`
  const index_type rb = row_ptr[row], re = row_ptr[row + 1];
  index_type wb, len;
  centred_window(k, rb, re, wb, len);
  if (threadIdx.x == 0) distinct = 0;
  __syncthreads();
  unsigned int changes = 0;
  for (index_type e = wb + 1 + static_cast<index_type>(threadIdx.x); e < wb + len; e += blockDim.x)
    changes += (col_idx[e] >> shift) != (col_idx[e - 1] >> shift);
  if (changes > 0) atomicAdd(&distinct, changes);
  __syncthreads();
  if (threadIdx.x == 0 && len > 0) {
    const unsigned long long packed = static_cast<unsigned long long>(re - rb) << (2 * longest_count_bits) |
                                      static_cast<unsigned long long>(distinct + 1) << longest_count_bits |
                                      static_cast<unsigned long long>(len);
    atomicMax(&out->longest_row, packed);
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

constexpr int sampler_block = 256;
constexpr int sampler_warps = sampler_block / 32;
constexpr int sampler_chunks = 4;  // rows per thread per step of the sorted sampler's scan

__global__ void __launch_bounds__(sampler_block) sorted_sector_counts(size_type rows, int groups, const index_type* __restrict__ row_ptr,
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
  // The scan for the 32 rows, by every warp of the block at once, sampler_chunks rows per thread per step
  // (their loads in flight together): 1024 rows per step, each match placed after those of the steps, the
  // chunks and the warps before it, so the picked rows are the first 32 matches in row order, as one warp
  // walking 32 rows at a time finds them. (That one warp's walk of up to scan_rows rows, a dependent load
  // per 32 rows, took 52-180 us of device time on the H100 where lengths vary, up to twice a product:
  // bench/results/2026-11-24_h100_session20_analysis_cost.txt.)
  __shared__ unsigned masks[sampler_chunks][sampler_warps];
  const int warp = static_cast<int>(threadIdx.x / 32);
  const unsigned lane = threadIdx.x % 32;
  const index_type want = row_ptr[r0 + 1] - row_ptr[r0];
  const size_type scan_end = min(rows, r0 + scan_rows);
  for (size_type base = r0; base < scan_end; base += sampler_chunks * sampler_block) {
    bool match[sampler_chunks];
#pragma unroll
    for (int c = 0; c < sampler_chunks; ++c) {
      const size_type r = base + c * sampler_block + threadIdx.x;
      match[c] = r < scan_end && row_ptr[r + 1] - row_ptr[r] == want;
    }
    unsigned mine[sampler_chunks];
#pragma unroll
    for (int c = 0; c < sampler_chunks; ++c) {
      mine[c] = __ballot_sync(0xffffffffu, match[c]);
      if (lane == 0) masks[c][warp] = mine[c];
    }
    __syncthreads();
    int before = count;  // the matches of the steps before (count: the running total here)
#pragma unroll
    for (int c = 0; c < sampler_chunks; ++c) {
      for (int w = 0; w < warp; ++w) before += __popc(masks[c][w]);
      const int pos = before + __popc(mine[c] & ((1u << lane) - 1u));
      if (match[c] && pos < group_rows) picked[pos] = static_cast<index_type>(base + c * sampler_block + threadIdx.x);
      for (int w = warp; w < sampler_warps; ++w) before += __popc(masks[c][w]);
    }
    __syncthreads();  // every thread has read count and the masks
    if (threadIdx.x == 0) count = before;  // thread 0's running total covers every chunk and warp
    __syncthreads();
    if (count >= group_rows) break;  // the same value in every thread: the block leaves together
  }
  if (threadIdx.x == 0) count = min(count, group_rows);
  __syncthreads();
  // A warp per picked row (eight rows at a time): a row's loads depend on its row_ptr, so one row after the
  // other by the whole block made 32 dependent load pairs per block.
  for (int p = warp; p < count; p += sampler_warps) {
    const index_type begin = row_ptr[picked[p]];
    const index_type end = min(row_ptr[picked[p] + 1], begin + per_row_entries);
    for (index_type k = begin + static_cast<index_type>(lane); k < end; k += 32) insert_sector(table, col_idx[k] >> shift, &distinct);
    if (lane == 0) atomicAdd(&entries, static_cast<unsigned int>(end - begin));
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

namespace {

// The strip passes in halves (issue, then decode once the read-back is done), shared by the synchronous
// functions below and by detail::strip_job.

// add_strip_columns' strips must be equal consecutive ranges from row 0; returns their row count and
// sets the matrix's rows and nonzeros.
size_type equal_strip_rows(const std::vector<strip_summary>& strips, size_type* rows, size_type* nnz)
{
  const int n = static_cast<int>(strips.size());
  const size_type strip_rows = strips[0].rows;
  *nnz = 0;
  for (int i = 0; i < n; ++i) {
    AIJP_ENSURE(strips[i].row_begin == i * strip_rows && (strips[i].rows == strip_rows || i == n - 1), bad_input,
                "add_strip_columns: the strips must be equal consecutive row ranges from row 0");
    *nnz += strips[i].nnz;
  }
  *rows = strips[n - 1].row_begin + strips[n - 1].rows;
  return strip_rows;
}

void issue_strip_columns(const std::vector<strip_summary>& strips, const index_type* d_row_ptr, const index_type* d_col_idx,
                         int* d_step, unsigned long long* d_unsorted, int* h_step, unsigned long long* h_unsorted, cudaStream_t stream)
{
  const int n = static_cast<int>(strips.size());
  size_type rows = 0, nnz = 0;
  const size_type strip_rows = equal_strip_rows(strips, &rows, &nnz);
  AIJP_CUDA_CHECK(cudaMemsetAsync(d_step, 0, n * sizeof(int), stream));
  AIJP_CUDA_CHECK(cudaMemsetAsync(d_unsorted, 0, n * sizeof(unsigned long long), stream));
  if (nnz > 0) {
    const size_type per_block = 256 * entries_per_run;
    strip_column_facts<<<static_cast<unsigned>((nnz + per_block - 1) / per_block), 256, 0, stream>>>(
        rows, nnz, strip_rows, d_row_ptr, d_col_idx, d_step, d_unsorted);
    AIJP_CHECK_LAUNCH();
  }
  AIJP_CUDA_CHECK(cudaMemcpyAsync(h_step, d_step, n * sizeof(int), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaMemcpyAsync(h_unsorted, d_unsorted, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
}

void decode_strip_columns(std::vector<strip_summary>& strips, const int* h_step, const unsigned long long* h_unsorted)
{
  for (std::size_t i = 0; i < strips.size(); ++i) {
    strips[i].max_column_step = h_step[i];
    strips[i].unsorted_steps = static_cast<size_type>(h_unsorted[i]);
  }
}

// `h_ranges` (2 n entries: the strips' first rows, then their row counts) is filled here and copied to
// `d_ranges`; it must stay untouched until the copy is done (pinned memory: the copy does not wait).
void issue_strip_locality(const std::vector<strip_summary>& strips, const index_type* d_row_ptr, const index_type* d_col_idx,
                          int value_bytes, size_type* h_ranges, size_type* d_ranges, strip_locality_group* d_groups,
                          strip_locality_group* h_groups, cudaStream_t stream)
{
  static_assert(strip_locality_max_entries <= max_entries, "the shared hash set holds max_entries at half load");
  const int n = static_cast<int>(strips.size());
  for (int i = 0; i < n; ++i) {
    h_ranges[i] = strips[i].row_begin;
    h_ranges[n + i] = strips[i].rows;
  }
  const std::size_t blocks = static_cast<std::size_t>(n) * strip_locality_groups;
  AIJP_CUDA_CHECK(cudaMemcpyAsync(d_ranges, h_ranges, 2 * n * sizeof(size_type), cudaMemcpyHostToDevice, stream));
  AIJP_CUDA_CHECK(cudaMemsetAsync(d_groups, 0, blocks * sizeof(strip_locality_group), stream));
  const int shift = value_bytes == 8 ? 2 : 3;
  strip_sector_counts<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(d_ranges, d_ranges + n, strip_locality_groups, d_row_ptr,
                                                                          d_col_idx, shift, d_groups);
  AIJP_CHECK_LAUNCH();
  AIJP_CUDA_CHECK(cudaMemcpyAsync(h_groups, d_groups, blocks * sizeof(strip_locality_group), cudaMemcpyDeviceToHost, stream));
}

void decode_strip_locality(std::vector<strip_summary>& strips, const strip_locality_group* h_groups)
{
  for (std::size_t i = 0; i < strips.size(); ++i) {
    const size_type groups = (strips[i].rows + group_rows - 1) / group_rows;
    const int used = static_cast<int>(std::min<size_type>(groups, strip_locality_groups));
    strips[i].x_sectors_per_nnz = strip_locality_of(h_groups + i * strip_locality_groups, used);
  }
}

}  // namespace

void add_strip_columns(std::vector<strip_summary>& strips, const index_type* d_row_ptr, const index_type* d_col_idx,
                       cudaStream_t stream)
{
  const int n = static_cast<int>(strips.size());
  if (n == 0) return;
  detail::device_buffer<int> d_step(n);
  detail::device_buffer<unsigned long long> d_unsorted(n);
  std::vector<int> step(n);
  std::vector<unsigned long long> unsorted(n);
  issue_strip_columns(strips, d_row_ptr, d_col_idx, d_step.data(), d_unsorted.data(), step.data(), unsorted.data(), stream);
  detail::wait_stream(stream);
  decode_strip_columns(strips, step.data(), unsorted.data());
}

void add_strip_locality(std::vector<strip_summary>& strips, const index_type* d_row_ptr, const index_type* d_col_idx,
                        int value_bytes, cudaStream_t stream)
{
  const int n = static_cast<int>(strips.size());
  if (n == 0) return;
  const std::size_t blocks = static_cast<std::size_t>(n) * strip_locality_groups;
  std::vector<size_type> ranges(2 * static_cast<std::size_t>(n));
  detail::device_buffer<size_type> d_ranges(2 * static_cast<std::size_t>(n));
  detail::device_buffer<strip_locality_group> d_groups(blocks);
  std::vector<strip_locality_group> h(blocks);
  issue_strip_locality(strips, d_row_ptr, d_col_idx, value_bytes, ranges.data(), d_ranges.data(), d_groups.data(), h.data(), stream);
  detail::wait_stream(stream);
  decode_strip_locality(strips, h.data());
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
  size_type rows = 0;
  int groups = 0, shift = 0;
  const index_type* row_ptr = nullptr;
  const index_type* col_idx = nullptr;
  cudaStream_t stream = nullptr;
  scratch_buffer<locality_both> d;
  pinned_buffer<locality_both> h;  // one, taken from the pool at start (a job may be made long before)
  piece_queue q;  // start(..., pieces): the calls not issued yet, one per issue_pending() or poll()
  poll_event event;
  locality_sample result;
  ~state() { q.settle(event, stream); }  // the pooled blocks go back to the pool: nothing issued may still use them
};

locality_job::locality_job() : s_(std::make_unique<state>()) {}
locality_job::~locality_job() = default;
const locality_sample& locality_job::result() const { return s_->result; }
piece_kind locality_job::last_piece() const { return s_->q.last(); }

void locality_job::start(size_type rows, size_type cols, const index_type* d_row_ptr, const index_type* d_col_idx,
                         int value_bytes, cudaStream_t stream, int max_groups, bool pieces)
{
  state& s = *s_;
  s.result = {};
  if (rows == 0 || cols == 0) {
    s.phase = 2;
    return;
  }
  const size_type total_groups = (rows + group_rows - 1) / group_rows;
  s.groups = static_cast<int>(std::min<size_type>(total_groups, std::max(1, max_groups)));
  s.shift = value_bytes == 8 ? 2 : 3;  // 32-byte sector = 4 doubles or 8 floats
  s.d.resize(1);
  s.h.resize(1);
  s.rows = rows;
  s.row_ptr = d_row_ptr;
  s.col_idx = d_col_idx;
  s.stream = stream;
  state* sp = &s;
  s.q.push(piece_kind::memset, [sp] { AIJP_CUDA_CHECK(cudaMemsetAsync(sp->d.data(), 0, sizeof(locality_both), sp->stream)); });
  s.q.push(piece_kind::launch, [sp] {
    sector_counts<<<sp->groups, 256, 0, sp->stream>>>(sp->rows, sp->groups, sp->row_ptr, sp->col_idx, sp->shift, &sp->d.data()->natural);
    AIJP_CHECK_LAUNCH();
  });
  s.q.push(piece_kind::launch, [sp] {
    sorted_sector_counts<<<sp->groups, sampler_block, 0, sp->stream>>>(sp->rows, sp->groups, sp->row_ptr, sp->col_idx, sp->shift,
                                                                      &sp->d.data()->sorted);
    AIJP_CHECK_LAUNCH();
  });
  s.q.push(piece_kind::copy, [sp] {
    AIJP_CUDA_CHECK(cudaMemcpyAsync(sp->h.data(), sp->d.data(), sizeof(locality_both), cudaMemcpyDeviceToHost, sp->stream));
  });
  s.q.push(piece_kind::event, [sp] { sp->event.record(sp->stream); });
  s.phase = 1;
  s.q.issue(pieces);
}

int locality_job::pending_pieces() const { return static_cast<int>(s_->q.pending()); }

bool locality_job::issue_pending() { return s_->q.issue_one(); }

bool locality_job::poll()
{
  state& s = *s_;
  AIJP_ENSURE(s.phase > 0, error, "locality_job::poll before start");
  if (s.phase == 2) return true;
  if (s.q.issue_one()) return false;
  if (!s.event.done()) return false;
  const auto ratio = [](unsigned long long num, unsigned long long den) {
    return den ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
  };
  const locality_both& h = s.h[0];
  s.result.x_sectors_per_nnz = ratio(h.natural.distinct, h.natural.entries);
  unsigned long long windows = 0;
  for (int b = 0; b < gather_mixture::bins; ++b) windows += h.natural.mix_windows[b];
  for (int b = 0; b < gather_mixture::bins && windows > 0; ++b) {
    s.result.x_mixture.share[b] = ratio(h.natural.mix_windows[b], windows);
    s.result.x_mixture.ratio[b] = h.natural.mix_windows[b] ? h.natural.mix_ratio_sum[b] / h.natural.mix_windows[b] : 0.0;
  }
  if (windows > 0) decode_longest_row(h.natural.longest_row, s.result.x_mixture.longest_row_len, s.result.x_mixture.longest_row_ratio);
  s.result.sorted.x_sectors_per_nnz = ratio(h.sorted.x_distinct, h.sorted.entries);
  s.result.sorted.y_sectors_per_row = ratio(h.sorted.y_sectors, h.sorted.rows);
  s.phase = 2;
  return true;
}

const locality_sample& locality_job::wait()
{
  s_->q.issue_all();
  while (!poll()) s_->event.wait();
  return s_->result;
}

struct strip_job::state {
  size_type rows = 0, rows_per_strip = 0;
  const index_type* row_ptr = nullptr;
  const index_type* col_idx = nullptr;
  int value_bytes = 8;
  bool columns = false;
  int phase = 0;  // 0: not started, 1: summaries in flight, 2: locality in flight, 3: columns in flight, 4: done
  scratch_buffer<unsigned char> d_summaries;
  pinned_buffer<unsigned char> h_summaries;
  scratch_buffer<size_type> d_ranges;
  pinned_buffer<size_type> h_ranges;
  scratch_buffer<strip_locality_group> d_groups;
  pinned_buffer<strip_locality_group> h_groups;
  scratch_buffer<int> d_step;
  pinned_buffer<int> h_step;
  scratch_buffer<unsigned long long> d_unsorted;
  pinned_buffer<unsigned long long> h_unsorted;
  poll_event event;
  std::vector<strip_summary> strips;
  ~state() { event.settle(); }  // the pooled blocks go back to the pool: nothing issued may still use them

  // Issues the pass after `phase` (or finishes); called once the previous read-back is done.
  void next(cudaStream_t stream)
  {
    const std::size_t n = strips.size();
    if (phase == 1 && n >= 2) {
      const std::size_t blocks = n * strip_locality_groups;
      h_ranges.resize(2 * n);
      d_ranges.resize(2 * n);
      d_groups.resize(blocks);
      h_groups.resize(blocks);
      issue_strip_locality(strips, row_ptr, col_idx, value_bytes, h_ranges.data(), d_ranges.data(), d_groups.data(), h_groups.data(),
                           stream);
      event.record(stream);
      phase = 2;
    } else if (phase == 2 && columns) {
      d_step.resize(n);
      h_step.resize(n);
      d_unsorted.resize(n);
      h_unsorted.resize(n);
      issue_strip_columns(strips, row_ptr, col_idx, d_step.data(), d_unsorted.data(), h_step.data(), h_unsorted.data(), stream);
      event.record(stream);
      phase = 3;
    } else {
      phase = 4;
    }
  }
  void decode()
  {
    switch (phase) {
      case 1: strips = decode_strip_summaries(rows, rows_per_strip, h_summaries.data()); break;
      case 2: decode_strip_locality(strips, h_groups.data()); break;
      case 3: decode_strip_columns(strips, h_step.data(), h_unsorted.data()); break;
      default: break;
    }
  }
};

strip_job::strip_job() : s_(std::make_unique<state>()) {}
strip_job::~strip_job() = default;
std::vector<strip_summary>& strip_job::result() { return s_->strips; }

void strip_job::start(size_type rows, const index_type* d_row_ptr, const index_type* d_col_idx, size_type rows_per_strip,
                      int value_bytes, bool columns, cudaStream_t stream)
{
  state& s = *s_;
  s.rows = rows;
  s.rows_per_strip = rows_per_strip;
  s.row_ptr = d_row_ptr;
  s.col_idx = d_col_idx;
  s.value_bytes = value_bytes;
  s.columns = columns;
  s.strips.clear();
  const size_type n = strip_count(rows, rows_per_strip);
  if (n == 0) {
    s.phase = 4;
    return;
  }
  s.d_summaries.resize(strip_summary_buffer_bytes(n));
  s.h_summaries.resize(strip_summary_buffer_bytes(n));
  issue_strip_summaries(rows, d_row_ptr, rows_per_strip, s.d_summaries.data(), s.h_summaries.data(), stream);
  s.event.record(stream);
  s.phase = 1;
}

bool strip_job::poll(cudaStream_t stream)
{
  state& s = *s_;
  if (s.phase == 4) return true;
  AIJP_ENSURE(s.phase > 0, error, "strip_job::poll before start");
  if (!s.event.done()) return false;
  s.decode();
  s.next(stream);
  return s.phase == 4;
}

std::vector<strip_summary>& strip_job::wait(cudaStream_t stream)
{
  while (!poll(stream)) s_->event.wait();
  return s_->strips;
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
