// Row-length statistics on the device: one pass for the per-warp maxima (N_iter, Eq. 1) and the maximum,
// then a CUB histogram of the row lengths; the O(max_len) histogram tail is finished on the host by the
// same code as the host reference (aijp::stats_from_histogram), so both agree exactly.
#include <aijpredict/gpu_matrix.hpp>

#include "cuda_check.hpp"
#include "device_buffer.hpp"

#include <cub/device/device_histogram.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <vector>

namespace aijp {

namespace {

struct row_length_op {
  const index_type* row_ptr;
  __host__ __device__ index_type operator()(index_type r) const { return row_ptr[r + 1] - row_ptr[r]; }
};

struct warp_summary {
  unsigned long long n_iter;
  int max_len;
};

// One thread per row; the warp's longest row is added to N_iter (rows grouped by 32 in natural order, as
// in Eq. 1: the warp of the kernel and the warp of the statistic coincide because blockDim % 32 == 0).
__global__ void warp_max_kernel(size_type rows, const index_type* __restrict__ row_ptr, warp_summary* out)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int len = r < rows ? row_ptr[r + 1] - row_ptr[r] : 0;
  int m = len;
  for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0 && m > 0) {
    atomicAdd(&out->n_iter, static_cast<unsigned long long>(m));
    atomicMax(&out->max_len, m);
  }
}

}  // namespace

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
  return stats_from_histogram(rows, cols, hist.data(), bins, static_cast<size_type>(h_sum.n_iter));
}

}  // namespace aijp
