// Row-length statistics on the device: one pass for the per-warp maxima (N_iter, Eq. 1), the maximum and
// the number of long rows, then a histogram of the row lengths below long_row_length and the list of
// the long rows' lengths (when they are few; otherwise the histogram covers every length). The occupied
// lengths are finished on the host by the same code as the host reference (aijp::stats_from_bins), so both
// agree exactly.
#include <aijpredict/gpu_matrix.hpp>

#include "cuda_check.hpp"
#include "analysis_jobs.hpp"
#include "async_ops.hpp"
#include "device_buffer.hpp"
#include "module_preload.hpp"

#include <aijpredict/planner.hpp>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace aijp {

namespace {

struct warp_summary {
  unsigned long long n_iter;
  unsigned long long chain;      // chain_key of the longest row's group
  unsigned long long long_rows;  // rows of long_row_length entries or more
  int max_len;
};

// Rows this long or longer are listed rather than binned, up to max_listed_rows of them. A histogram of
// one bin per length up to 50000 (the circuit stack's dense rows) needed CUB's global-memory privatised
// bins: megabytes of temporary storage and a host walk over 50001 bins, ~0.25 ms of a staged part on the
// H100 (bench/results/2026-11-24_h100_session16_short_solves_trace.txt); 256 bins stay in shared memory.
constexpr int long_row_length = 256;
constexpr unsigned long long max_listed_rows = 4096;

// A thread per row of each step; the warp's longest row is added to N_iter (rows grouped by 32 in natural
// order, as in Eq. 1: the warp of the kernel and the warp of the statistic coincide because blockDim % 32 == 0).
// The block's warps are combined in shared memory and the block adds once: one atomic per warp on three
// words serialised some 200000 atomics on a 2M-row matrix (about 0.2 ms of device time, H100 machine), which
// a staged analysis put into the products of the solve it ran in.
constexpr int warp_max_block = 256;
constexpr size_type warp_max_blocks = 2048;
__global__ void __launch_bounds__(warp_max_block) warp_max_kernel(size_type rows, const index_type* __restrict__ row_ptr, warp_summary* out)
{
  constexpr int warps = warp_max_block / 32;
  __shared__ unsigned long long s_iter[warps], s_chain[warps], s_long[warps];
  __shared__ int s_max[warps];
  // Grid-stride over the rows (at most warp_max_blocks blocks): the stride is a multiple of 32, so each
  // warp's rows of one step are a natural 32-row group; the warp sums its groups' maxima (N_iter) and keeps
  // the largest chain key, then one set of atomics per block. (A block per 256 rows serialised ~94000
  // atomics on three words for an 8M-row matrix: 92 us of device time on the H100, a quarter of a product:
  // bench/results/2026-11-24_h100_session20_analysis_cost.txt.)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
  unsigned long long it_sum = 0, ch_max = 0, long_sum = 0;
  int m_max = 0;
  for (size_type base = static_cast<size_type>(blockIdx.x) * blockDim.x; base < rows; base += stride) {
    const size_type r = base + threadIdx.x;
    const int len = r < rows ? row_ptr[r + 1] - row_ptr[r] : 0;
    long_sum += __popc(__ballot_sync(0xffffffffu, len >= long_row_length));
    int m = len;
    unsigned long long sum = static_cast<unsigned long long>(len);
    for (int off = 16; off > 0; off /= 2) {
      m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
    }
    it_sum += static_cast<unsigned long long>(m);
    m_max = max(m_max, m);
    if (m > 0) ch_max = max(ch_max, chain_key(m, sum));
  }
  if (lane == 0) {
    s_iter[warp] = it_sum;
    s_max[warp] = m_max;
    s_chain[warp] = ch_max;
    s_long[warp] = long_sum;
  }
  __syncthreads();
  if (warp == 0) {
    unsigned long long it = lane < warps ? s_iter[lane] : 0ull, ch = lane < warps ? s_chain[lane] : 0ull;
    unsigned long long lg = lane < warps ? s_long[lane] : 0ull;
    int mx = lane < warps ? s_max[lane] : 0;
    for (int off = 16; off > 0; off /= 2) {
      it += __shfl_xor_sync(0xffffffffu, it, off);
      lg += __shfl_xor_sync(0xffffffffu, lg, off);
      ch = max(ch, __shfl_xor_sync(0xffffffffu, ch, off));
      mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    }
    if (lane == 0 && mx > 0) {
      atomicAdd(&out->n_iter, it);
      atomicMax(&out->max_len, mx);
      atomicMax(&out->chain, ch);
      if (lg > 0) atomicAdd(&out->long_rows, lg);
    }
  }
}

// The lengths of the rows of long_row_length entries or more, in any order: list[0] counts them (one
// atomic per warp), list[1 + k] holds the k-th found.
__global__ void __launch_bounds__(warp_max_block) long_rows_kernel(size_type rows, const index_type* __restrict__ row_ptr, int* list)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int len = r < rows ? row_ptr[r + 1] - row_ptr[r] : 0;
  const bool is_long = len >= long_row_length;
  const unsigned mask = __ballot_sync(0xffffffffu, is_long);
  if (mask == 0) return;
  const int lane = threadIdx.x % 32;
  int base = 0;
  if (lane == 0) base = atomicAdd(list, __popc(mask));
  base = __shfl_sync(0xffffffffu, base, 0);
  if (is_long) list[1 + base + __popc(mask & ((1u << lane) - 1u))] = len;
}

// The histogram of the row lengths below `bins` (hist zeroed by the caller): one launch, no temporary storage
// and no occupancy queries (CUB's DeviceHistogram, called twice for its temporary size, made this part of a
// staged analysis ~50 us of host time on the H100: bench/results/2026-11-24_h100_session20_short_solves.txt).
// Lengths below histogram_shared_bins are counted in shared memory and only the occupied bins merged; the
// longer ones (more than max_listed_rows long rows and a longest row beyond that) go to global memory, where
// the lanes of a warp that share a length add it with one atomic (__match_any_sync). Counting every length
// in global memory took 337 us on a 2M-row power-law matrix whose short rows share a few lengths
// (bench/results/2026-11-24_h100_session20_analysis_cost.txt).
constexpr int histogram_block = 256;
constexpr int histogram_shared_bins = 12288;  // 48 KiB of ints: no opt-in needed
constexpr unsigned histogram_max_blocks = 1024;

__global__ void __launch_bounds__(histogram_block)
    length_histogram_kernel(size_type rows, const index_type* __restrict__ row_ptr, int bins, int* __restrict__ hist)
{
  extern __shared__ int s_hist[];
  const int shared_bins = min(bins, histogram_shared_bins);
  for (int b = threadIdx.x; b < shared_bins; b += blockDim.x) s_hist[b] = 0;
  __syncthreads();
  const size_type stride = static_cast<size_type>(gridDim.x) * blockDim.x;
  // Every lane of a warp runs the same number of iterations (the bound is rounded up to whole warps), so
  // the warp's collective sees all 32 lanes.
  const size_type first = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_type warp_rows = (rows + 31) / 32 * 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (size_type r = first; r < warp_rows; r += stride) {
    const int len = r < rows ? static_cast<int>(row_ptr[r + 1] - row_ptr[r]) : -1;
    if (len >= 0 && len < shared_bins) atomicAdd(&s_hist[len], 1);
    if (bins > shared_bins) {  // uniform: every lane takes part in the match
      const int key = len >= shared_bins && len < bins ? len : -1;
      const unsigned same = __match_any_sync(0xffffffffu, key);
      if (key >= 0 && (__ffs(same) - 1) == lane) atomicAdd(&hist[key], __popc(same));
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < shared_bins; b += blockDim.x) {
    if (s_hist[b] != 0) atomicAdd(&hist[b], s_hist[b]);
  }
}

// Strip summaries (planner.hpp): one block per strip; the block's threads stride over the strip's rows so
// every warp covers 32 consecutive rows of a 32-aligned group (the strip starts at a multiple of 32), which
// makes the per-warp maxima the N_iter groups of Eq. 1. Counters in shared memory, one global write each.
struct device_strip {
  unsigned long long nnz, sum_sq, empty_rows, n_iter, chain;
  int min_len, max_len;
  unsigned long long bin_rows[strip_bins];
  unsigned long long bin_nnz[strip_bins];
};

constexpr int strip_block = 512;  // one block per strip: few strips (64 by default), so wide blocks

__global__ void __launch_bounds__(strip_block)
    strip_summary_kernel(size_type rows, size_type rows_per_strip, const index_type* __restrict__ row_ptr, device_strip* out)
{
  __shared__ device_strip s;
  for (int b = threadIdx.x; b < strip_bins; b += blockDim.x) {
    s.bin_rows[b] = 0;
    s.bin_nnz[b] = 0;
  }
  if (threadIdx.x == 0) {
    s.nnz = s.sum_sq = s.empty_rows = s.n_iter = s.chain = 0;
    s.min_len = INT_MAX;
    s.max_len = 0;
  }
  __syncthreads();
  const size_type begin = static_cast<size_type>(blockIdx.x) * rows_per_strip;
  const size_type end = min(rows, begin + rows_per_strip);
  unsigned long long nnz = 0, sum_sq = 0, empty = 0, n_iter = 0, chain = 0;
  int lo = INT_MAX, hi = 0;
  // Every thread runs the same number of iterations so the whole warp reaches the shuffles.
  for (size_type base = begin; base < end; base += blockDim.x) {
    const size_type r = base + threadIdx.x;
    const bool live = r < end;
    const int len = live ? row_ptr[r + 1] - row_ptr[r] : 0;
    int m = len;
    unsigned long long warp_nnz = static_cast<unsigned long long>(len);
    for (int off = 16; off > 0; off /= 2) {
      m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
      warp_nnz += __shfl_xor_sync(0xffffffffu, warp_nnz, off);
    }
    if ((threadIdx.x & 31) == 0) {
      n_iter += m;
      if (m > 0) chain = max(chain, chain_key(m, warp_nnz));
    }
    // Rows of one length in a warp (a stencil: all 32) add to their bin once, through the lowest such lane,
    // instead of 32 conflicting shared-memory atomics; the long-row bins hold several lengths and add per lane.
    const int bin = strip_bin_of(len);
    const unsigned exact = __ballot_sync(0xffffffffu, live && bin < strip_exact_bins);
    if (live) {
      nnz += len;
      sum_sq += static_cast<unsigned long long>(len) * len;
      empty += len == 0;
      lo = min(lo, len);
      hi = max(hi, len);
      if (bin < strip_exact_bins) {
        const unsigned peers = __match_any_sync(exact, bin);
        if (static_cast<int>(threadIdx.x & 31) == __ffs(peers) - 1) {
          const unsigned n = __popc(peers);
          atomicAdd(&s.bin_rows[bin], static_cast<unsigned long long>(n));
          atomicAdd(&s.bin_nnz[bin], static_cast<unsigned long long>(n) * len);
        }
      } else {
        atomicAdd(&s.bin_rows[bin], 1ull);
        atomicAdd(&s.bin_nnz[bin], static_cast<unsigned long long>(len));
      }
    }
  }
  atomicAdd(&s.nnz, nnz);
  atomicAdd(&s.sum_sq, sum_sq);
  atomicAdd(&s.empty_rows, empty);
  atomicAdd(&s.n_iter, n_iter);
  atomicMax(&s.chain, chain);
  atomicMin(&s.min_len, lo);
  atomicMax(&s.max_len, hi);
  __syncthreads();
  device_strip* o = out + blockIdx.x;
  for (int b = threadIdx.x; b < strip_bins; b += blockDim.x) {
    o->bin_rows[b] = s.bin_rows[b];
    o->bin_nnz[b] = s.bin_nnz[b];
  }
  if (threadIdx.x == 0) {
    o->nnz = s.nnz;
    o->sum_sq = s.sum_sq;
    o->empty_rows = s.empty_rows;
    o->n_iter = s.n_iter;
    o->chain = s.chain;
    o->min_len = s.min_len;
    o->max_len = s.max_len;
  }
}

}  // namespace

namespace detail {

std::size_t strip_summary_buffer_bytes(size_type strips) { return static_cast<std::size_t>(strips) * sizeof(device_strip); }

size_type strip_count(size_type rows, size_type rows_per_strip)
{
  AIJP_ENSURE(rows_per_strip > 0 && rows_per_strip % stats_warp_size == 0, bad_input,
              "rows per strip must be a positive multiple of 32");
  const size_type n = (rows + rows_per_strip - 1) / rows_per_strip;
  AIJP_ENSURE(n <= 65535, bad_input, "too many strips (" + std::to_string(n) + ")");
  return n;
}

void issue_strip_summaries(size_type rows, const index_type* d_row_ptr, size_type rows_per_strip, void* d, void* h,
                           cudaStream_t stream)
{
  const size_type n = strip_count(rows, rows_per_strip);
  if (n == 0) return;
  strip_summary_kernel<<<static_cast<unsigned>(n), strip_block, 0, stream>>>(rows, rows_per_strip, d_row_ptr, static_cast<device_strip*>(d));
  AIJP_CHECK_LAUNCH();
  AIJP_CUDA_CHECK(cudaMemcpyAsync(h, d, strip_summary_buffer_bytes(n), cudaMemcpyDeviceToHost, stream));
}

std::vector<strip_summary> decode_strip_summaries(size_type rows, size_type rows_per_strip, const void* h)
{
  const size_type n = strip_count(rows, rows_per_strip);
  std::vector<strip_summary> out(n);
  const auto* hs = static_cast<const device_strip*>(h);
  for (size_type k = 0; k < n; ++k) {
    strip_summary& o = out[k];
    const device_strip& g = hs[k];
    o.row_begin = k * rows_per_strip;
    o.rows = std::min(rows_per_strip, rows - o.row_begin);
    o.nnz = static_cast<size_type>(g.nnz);
    o.empty_rows = static_cast<size_type>(g.empty_rows);
    o.n_iter_natural = static_cast<size_type>(g.n_iter);
    o.chain_warp_nnz = chain_key_nnz(g.chain);
    o.sum_sq = static_cast<double>(g.sum_sq);
    o.min_len = g.min_len;
    o.max_len = g.max_len;
    for (int b = 0; b < strip_bins; ++b) {
      o.bin_rows[b] = static_cast<size_type>(g.bin_rows[b]);
      o.bin_nnz[b] = static_cast<size_type>(g.bin_nnz[b]);
    }
  }
  return out;
}

}  // namespace detail

std::vector<strip_summary> compute_strip_summaries_device(size_type rows, const index_type* d_row_ptr,
                                                          size_type rows_per_strip, cudaStream_t stream)
{
  const size_type n = detail::strip_count(rows, rows_per_strip);
  if (n == 0) return {};
  detail::device_buffer<device_strip> d(n);
  std::vector<device_strip> h(n);
  detail::issue_strip_summaries(rows, d_row_ptr, rows_per_strip, d.data(), h.data(), stream);
  detail::wait_stream(stream);
  return detail::decode_strip_summaries(rows, rows_per_strip, h.data());
}

namespace detail {

struct row_stats_job::state {
  size_type rows = 0, cols = 0;
  const index_type* row_ptr = nullptr;
  int phase = 0;  // 0: not started, 1: per-warp pass in flight, 2: histogram in flight, 3: done
  scratch_buffer<warp_summary> d_sum;
  scratch_buffer<int> d_hist;
  scratch_buffer<int> d_long;  // long_rows_kernel's list
  pinned_buffer<warp_summary> h_sum;  // one summary, taken from the pool at start (a job may be made long before)
  pinned_buffer<int> h_hist;
  pinned_buffer<int> h_long;
  int bins = 0;       // lengths 0..bins-1 are binned
  int listed = 0;     // rows listed (lengths >= bins), 0 when the bins cover every length
  bool pieces = false;  // start(..., pieces): one CUDA call per issue_pending() or poll()
  piece_queue q;        // the pass's calls not issued yet
  cudaStream_t stream = nullptr;
  poll_event event;
  row_stats result;
  ~state() { q.settle(event, stream); }  // the pooled blocks go back to the pool: nothing issued may still use them
};

row_stats_job::row_stats_job() : s_(std::make_unique<state>()) {}
row_stats_job::~row_stats_job() = default;
const row_stats& row_stats_job::result() const { return s_->result; }
int row_stats_job::phase() const { return s_->phase; }
piece_kind row_stats_job::last_piece() const { return s_->q.last(); }

void row_stats_job::start(size_type rows, size_type cols, const index_type* d_row_ptr, cudaStream_t stream, bool pieces)
{
  state& s = *s_;
  s.rows = rows;
  s.cols = cols;
  s.row_ptr = d_row_ptr;
  s.pieces = pieces;
  s.stream = stream;
  if (rows == 0) {
    s.result = stats_from_histogram(0, cols, nullptr, 0, 0);
    s.phase = 3;
    return;
  }
  s.d_sum.resize(1);
  s.h_sum.resize(1);
  const auto grid = static_cast<unsigned>(std::min<size_type>((rows + warp_max_block - 1) / warp_max_block, warp_max_blocks));
  state* sp = &s;
  s.q.push(piece_kind::memset, [sp] { AIJP_CUDA_CHECK(cudaMemsetAsync(sp->d_sum.data(), 0, sizeof(warp_summary), sp->stream)); });
  s.q.push(piece_kind::launch, [sp, grid] {
    warp_max_kernel<<<grid, warp_max_block, 0, sp->stream>>>(sp->rows, sp->row_ptr, sp->d_sum.data());
    AIJP_CHECK_LAUNCH();
  });
  s.q.push(piece_kind::copy, [sp] {
    AIJP_CUDA_CHECK(cudaMemcpyAsync(sp->h_sum.data(), sp->d_sum.data(), sizeof(warp_summary), cudaMemcpyDeviceToHost, sp->stream));
  });
  s.q.push(piece_kind::event, [sp] { sp->event.record(sp->stream); });
  s.phase = 1;
  s.q.issue(pieces);
}

bool row_stats_job::issue_pending() { return s_->q.issue_one(); }

bool row_stats_job::poll(cudaStream_t stream)
{
  state& s = *s_;
  AIJP_ENSURE(s.phase > 0, error, "row_stats_job::poll before start");
  if (s.phase == 3) return true;
  if (s.q.issue_one()) return false;
  if (!s.event.done()) return false;
  if (s.phase == 1) {
    // Bins of width one for lengths 0..max_len; the long rows listed instead when they are few.
    const warp_summary& sum = s.h_sum[0];
    const bool list = sum.max_len >= long_row_length && sum.long_rows <= max_listed_rows;
    s.bins = list ? long_row_length : sum.max_len + 1;
    s.listed = list ? static_cast<int>(sum.long_rows) : 0;
    s.stream = stream;
    state* sp = &s;
    if (list) {
      s.d_long.resize(static_cast<std::size_t>(s.listed) + 1);
      s.h_long.resize(static_cast<std::size_t>(s.listed) + 1);
      s.q.push(piece_kind::memset, [sp] { AIJP_CUDA_CHECK(cudaMemsetAsync(sp->d_long.data(), 0, sizeof(int), sp->stream)); });
      s.q.push(piece_kind::launch, [sp] {
        const auto grid = static_cast<unsigned>((sp->rows + warp_max_block - 1) / warp_max_block);
        long_rows_kernel<<<grid, warp_max_block, 0, sp->stream>>>(sp->rows, sp->row_ptr, sp->d_long.data());
        AIJP_CHECK_LAUNCH();
      });
    }
    s.d_hist.resize(s.bins);
    s.h_hist.resize(s.bins);
    s.q.push(piece_kind::memset, [sp] { AIJP_CUDA_CHECK(cudaMemsetAsync(sp->d_hist.data(), 0, sp->bins * sizeof(int), sp->stream)); });
    s.q.push(piece_kind::launch, [sp] {
      const auto blocks = static_cast<unsigned>(std::min<size_type>((sp->rows + histogram_block - 1) / histogram_block, histogram_max_blocks));
      const std::size_t shared = static_cast<std::size_t>(std::min(sp->bins, histogram_shared_bins)) * sizeof(int);
      length_histogram_kernel<<<blocks, histogram_block, shared, sp->stream>>>(sp->rows, sp->row_ptr, sp->bins, sp->d_hist.data());
      AIJP_CHECK_LAUNCH();
    });
    if (list) {
      s.q.push(piece_kind::copy, [sp] {
        AIJP_CUDA_CHECK(cudaMemcpyAsync(sp->h_long.data(), sp->d_long.data(), (sp->listed + 1) * sizeof(int), cudaMemcpyDeviceToHost, sp->stream));
      });
    }
    s.q.push(piece_kind::copy, [sp] {
      AIJP_CUDA_CHECK(cudaMemcpyAsync(sp->h_hist.data(), sp->d_hist.data(), sp->bins * sizeof(int), cudaMemcpyDeviceToHost, sp->stream));
    });
    s.q.push(piece_kind::event, [sp] { sp->event.record(sp->stream); });
    s.phase = 2;
    s.q.issue(s.pieces);
    return false;
  }
  // The occupied lengths: the binned ones, then the listed ones in increasing order.
  std::vector<length_bin> bins;
  const int* h = s.h_hist.data();
  for (int len = 0; len < s.bins; ++len) {
    if (h[len] != 0) bins.push_back({static_cast<index_type>(len), static_cast<size_type>(h[len])});
  }
  if (s.listed > 0) {
    AIJP_ENSURE(s.h_long[0] == s.listed, error, "long rows listed: " + std::to_string(s.h_long[0]) + " of " + std::to_string(s.listed));
    std::vector<int> lengths(s.h_long.data() + 1, s.h_long.data() + 1 + s.listed);
    std::sort(lengths.begin(), lengths.end());
    for (int len : lengths) {
      if (!bins.empty() && bins.back().len == len) {
        ++bins.back().rows;
      } else {
        bins.push_back({static_cast<index_type>(len), 1});
      }
    }
  }
  s.result = stats_from_bins(s.rows, s.cols, bins, static_cast<size_type>(s.h_sum[0].n_iter), chain_key_nnz(s.h_sum[0].chain));
  s.phase = 3;
  return true;
}

const row_stats& row_stats_job::wait(cudaStream_t stream)
{
  s_->q.issue_all();
  while (!poll(stream)) {
    s_->q.issue_all();
    s_->event.wait();
  }
  return s_->result;
}

}  // namespace detail

row_stats compute_row_stats_device(size_type rows, size_type cols, const index_type* d_row_ptr, cudaStream_t stream)
{
  detail::row_stats_job job;
  job.start(rows, cols, d_row_ptr, stream);
  return job.wait(stream);
}

}  // namespace aijp

// The module of this unit is loaded at context creation (module_preload.hpp).
AIJP_MODULE_ANCHOR("stats.cu", 0)
