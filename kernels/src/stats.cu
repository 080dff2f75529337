// Row-length statistics on the device: one pass for the per-warp maxima (N_iter, Eq. 1) and the maximum,
// then a CUB histogram of the row lengths; the O(max_len) histogram tail is finished on the host by the
// same code as the host reference (aijp::stats_from_histogram), so both agree exactly.
#include <aijpredict/gpu_matrix.hpp>

#include "cuda_check.hpp"
#include "device_buffer.hpp"

#include <aijpredict/planner.hpp>

#include <cub/device/device_histogram.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <climits>
#include <vector>

namespace aijp {

namespace {

struct row_length_op {
  const index_type* row_ptr;
  __host__ __device__ index_type operator()(index_type r) const { return row_ptr[r + 1] - row_ptr[r]; }
};

struct warp_summary {
  unsigned long long n_iter;
  unsigned long long chain;  // chain_key of the longest row's group
  int max_len;
};

// One thread per row; the warp's longest row is added to N_iter (rows grouped by 32 in natural order, as
// in Eq. 1: the warp of the kernel and the warp of the statistic coincide because blockDim % 32 == 0).
__global__ void warp_max_kernel(size_type rows, const index_type* __restrict__ row_ptr, warp_summary* out)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int len = r < rows ? row_ptr[r + 1] - row_ptr[r] : 0;
  int m = len;
  unsigned long long sum = static_cast<unsigned long long>(len);
  for (int off = 16; off > 0; off /= 2) {
    m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
    sum += __shfl_xor_sync(0xffffffffu, sum, off);
  }
  if ((threadIdx.x & 31) == 0 && m > 0) {
    atomicAdd(&out->n_iter, static_cast<unsigned long long>(m));
    atomicMax(&out->max_len, m);
    atomicMax(&out->chain, chain_key(m, sum));
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

std::vector<strip_summary> compute_strip_summaries_device(size_type rows, const index_type* d_row_ptr,
                                                          size_type rows_per_strip, cudaStream_t stream)
{
  AIJP_ENSURE(rows_per_strip > 0 && rows_per_strip % stats_warp_size == 0, bad_input,
              "rows per strip must be a positive multiple of 32");
  const size_type n = (rows + rows_per_strip - 1) / rows_per_strip;
  std::vector<strip_summary> out(n);
  if (n == 0) return out;
  AIJP_ENSURE(n <= 65535, bad_input, "too many strips (" + std::to_string(n) + ")");
  detail::device_buffer<device_strip> d(n);
  strip_summary_kernel<<<static_cast<unsigned>(n), strip_block, 0, stream>>>(rows, rows_per_strip, d_row_ptr, d.data());
  AIJP_CHECK_LAUNCH();
  std::vector<device_strip> h(n);
  AIJP_CUDA_CHECK(cudaMemcpyAsync(h.data(), d.data(), n * sizeof(device_strip), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (size_type k = 0; k < n; ++k) {
    strip_summary& o = out[k];
    const device_strip& g = h[k];
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

row_stats compute_row_stats_device(size_type rows, size_type cols, const index_type* d_row_ptr, cudaStream_t stream)
{
  if (rows == 0) return stats_from_histogram(0, cols, nullptr, 0, 0);
  detail::device_buffer<warp_summary> d_sum(1);
  AIJP_CUDA_CHECK(cudaMemsetAsync(d_sum.data(), 0, sizeof(warp_summary), stream));
  constexpr int block = 256;
  const auto grid = static_cast<unsigned>((rows + block - 1) / block);
  warp_max_kernel<<<grid, block, 0, stream>>>(rows, d_row_ptr, d_sum.data());
  AIJP_CHECK_LAUNCH();
  warp_summary h_sum{};
  AIJP_CUDA_CHECK(cudaMemcpyAsync(&h_sum, d_sum.data(), sizeof(h_sum), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));

  // Bins of width one for lengths 0..max_len.
  const int bins = h_sum.max_len + 1;
  auto lengths = thrust::make_transform_iterator(thrust::counting_iterator<index_type>(0), row_length_op{d_row_ptr});
  detail::device_buffer<int> d_hist(bins);
  std::size_t temp_bytes = 0;
  AIJP_CUDA_CHECK(cub::DeviceHistogram::HistogramEven(nullptr, temp_bytes, lengths, d_hist.data(), bins + 1, 0,
                                                      bins, static_cast<int>(rows), stream));
  detail::device_buffer<unsigned char> temp(temp_bytes);
  AIJP_CUDA_CHECK(cub::DeviceHistogram::HistogramEven(temp.data(), temp_bytes, lengths, d_hist.data(), bins + 1, 0,
                                                      bins, static_cast<int>(rows), stream));
  std::vector<int> h_hist(bins);
  AIJP_CUDA_CHECK(cudaMemcpyAsync(h_hist.data(), d_hist.data(), bins * sizeof(int), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<size_type> hist(h_hist.begin(), h_hist.end());
  return stats_from_histogram(rows, cols, hist.data(), bins, static_cast<size_type>(h_sum.n_iter), chain_key_nnz(h_sum.chain));
}

}  // namespace aijp
