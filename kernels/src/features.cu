// Locality of the x gathers, sampled on the device (a feature of our performance model; the published
// models ignore it). One block per sampled group of 32 consecutive rows inserts the 32-byte sector index of
// every entry's x into a shared-memory hash set and counts the distinct ones.
#include <aijpredict/gpu_matrix.hpp>

#include "cuda_check.hpp"
#include "device_buffer.hpp"

#include <algorithm>

namespace aijp {

namespace {

constexpr int group_rows = 32;       // a warp of a thread-per-row kernel / a SELL slice
constexpr int table_size = 8192;     // shared hash slots (32 KiB); groups with more entries are capped below
constexpr int max_entries = 4096;    // entries per group looked at (keeps the table at most half full)

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
  for (int i = threadIdx.x; i < table_size; i += blockDim.x) table[i] = -1;
  if (threadIdx.x == 0) distinct = 0;
  __syncthreads();
  // Evenly spaced groups over the whole matrix.
  const size_type total_groups = (rows + group_rows - 1) / group_rows;
  const size_type g = static_cast<size_type>(blockIdx.x) * total_groups / groups;
  const size_type r0 = g * group_rows, r1 = min(r0 + group_rows, rows);
  const index_type begin = row_ptr[r0];
  const index_type end = min(row_ptr[r1], begin + max_entries);
  for (index_type k = begin + threadIdx.x; k < end; k += blockDim.x) {
    const int sector = col_idx[k] >> shift;
    unsigned h = (static_cast<unsigned>(sector) * 2654435761u) & (table_size - 1);
    while (true) {
      const int prev = atomicCAS(&table[h], -1, sector);
      if (prev == -1) {
        atomicAdd(&distinct, 1u);
        break;
      }
      if (prev == sector) break;
      h = (h + 1) & (table_size - 1);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(&out->distinct, static_cast<unsigned long long>(distinct));
    atomicAdd(&out->entries, static_cast<unsigned long long>(end - begin));
  }
}

}  // namespace

double sample_x_sectors_per_nnz(size_type rows, size_type cols, const index_type* d_row_ptr, const index_type* d_col_idx,
                                int value_bytes, cudaStream_t stream, int max_groups)
{
  if (rows == 0 || cols == 0) return 0.0;
  const size_type total_groups = (rows + group_rows - 1) / group_rows;
  const int groups = static_cast<int>(std::min<size_type>(total_groups, std::max(1, max_groups)));
  const int shift = value_bytes == 8 ? 2 : 3;  // 32-byte sector = 4 doubles or 8 floats
  detail::device_buffer<locality_sums> sums(1);
  AIJP_CUDA_CHECK(cudaMemsetAsync(sums.data(), 0, sizeof(locality_sums), stream));
  sector_counts<<<groups, 256, 0, stream>>>(rows, groups, d_row_ptr, d_col_idx, shift, sums.data());
  AIJP_CHECK_LAUNCH();
  locality_sums h{};
  AIJP_CUDA_CHECK(cudaMemcpyAsync(&h, sums.data(), sizeof(h), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h.entries ? static_cast<double>(h.distinct) / static_cast<double>(h.entries) : 0.0;
}

}  // namespace aijp
