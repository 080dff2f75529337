// Device-side generation of the warm-up's benchmark matrices: row lengths drawn per row from a counter-based
// hash (no RNG state), an exclusive scan (CUB) for the row pointers, then one thread per row fills sorted,
// distinct columns: one random column in each of `length` equal segments of the row's window.
#include <aijpredict/device_generate.hpp>

#include "cuda_check.hpp"
#include "device_buffer.hpp"

#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace aijp {

namespace {

__host__ __device__ inline std::uint64_t mix(std::uint64_t x)
{
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__device__ inline double unit(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

__global__ void draw_lengths(device_generator_spec::lengths dist, size_type rows, size_type max_len, double mean,
                             double param, std::uint64_t seed, device_block_layout block, index_type* len)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r > rows) return;
  if (r == rows) {
    len[r] = 0;  // the scan turns this slot into the total
    return;
  }
  const std::uint64_t h1 = mix(seed ^ mix(static_cast<std::uint64_t>(r) * 2 + 1));
  const std::uint64_t h2 = mix(h1 ^ 0x5bd1e995ULL);
  double l = mean;
  if (dist == device_generator_spec::lengths::normal) {
    // Box-Muller; 1 - u keeps the logarithm finite.
    l = mean + param * sqrt(-2.0 * log(1.0 - unit(h1))) * cospi(2.0 * unit(h2));
  } else if (dist == device_generator_spec::lengths::uniform) {
    l = floor(mean - param + (2.0 * param + 1.0) * unit(h1));
  } else if (dist == device_generator_spec::lengths::pareto) {
    // Heavy-tailed (power-law graphs, circuits): scale x_m = mean (a - 1) / a gives the mean before clamping.
    l = mean * (param - 1.0) / param * pow(1.0 - unit(h1), -1.0 / param);
  } else if (dist == device_generator_spec::lengths::block) {
    l = r >= block.first_row && static_cast<double>(r - block.first_row) < param ? static_cast<double>(max_len)
        : r + 1 == block.first_row                                               ? mean + block.pad
                                                                                 : mean;
  }
  long long n = llrint(l);
  n = n < 0 ? 0 : (n > max_len ? max_len : n);
  len[r] = static_cast<index_type>(n);
}

template <typename Value>
__global__ void fill_rows(size_type rows, size_type cols, size_type window, std::uint64_t seed, size_type long_first,
                          size_type long_count, size_type long_base, const index_type* __restrict__ row_ptr,
                          index_type* __restrict__ col, Value* __restrict__ val)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const index_type begin = row_ptr[r];
  const long long len = row_ptr[r + 1] - begin;
  if (len == 0) return;
  const long long w = window < cols ? window : cols;
  const long long centre = static_cast<long long>((static_cast<double>(r) + 0.5) * cols / rows);
  long long base = centre - w / 2;
  base = base < 0 ? 0 : (base > cols - w ? cols - w : base);
  if (r >= long_first && r - long_first < long_count) base = long_base;  // a block's long rows: one shared window
  for (long long k = 0; k < len; ++k) {
    const long long lo = base + k * w / len, hi = base + (k + 1) * w / len;  // hi > lo since len <= w
    const std::uint64_t h = mix(seed ^ mix((static_cast<std::uint64_t>(r) << 20) ^ static_cast<std::uint64_t>(k)));
    col[begin + k] = static_cast<index_type>(lo + static_cast<long long>(h % static_cast<std::uint64_t>(hi - lo)));
    val[begin + k] = static_cast<Value>(2.0 * unit(mix(h)) - 1.0);
  }
}

unsigned grid(size_type n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

device_block_layout block_layout(const device_generator_spec& spec)
{
  device_block_layout b;
  if (spec.dist != device_generator_spec::lengths::block) return b;
  const long long rows = spec.rows, cols = spec.cols, count = static_cast<long long>(std::ceil(spec.param));
  const std::uint64_t h1 = mix(spec.seed ^ 0x626c6f636b2d6174ULL), h2 = mix(h1), h3 = mix(h2);
  constexpr long long group = 32;  // the warp of the thread-per-row formats and the SELL slice height
  const long long groups = rows / group;
  if (count <= group && groups >= 2) {
    b.first_row = group * (1 + static_cast<long long>(h1 % static_cast<std::uint64_t>(groups - 1))) +
                  static_cast<long long>(h2 % static_cast<std::uint64_t>(group + 1 - count));
  } else if (rows > count) {
    b.first_row = 1 + static_cast<long long>(h1 % static_cast<std::uint64_t>(rows - count));
  }
  if (b.first_row > 0) b.pad = static_cast<index_type>(1 + 2 * (h3 % 4));
  const long long w = std::min(spec.window, spec.cols);
  const long long centre = static_cast<long long>((static_cast<double>(b.first_row) + 0.5) * cols / rows);
  long long c = std::clamp(centre - w / 2, 0LL, cols - w);
  c += 1 + 2 * static_cast<long long>((h3 >> 8) % 4) - c % 8;  // odd: off an 8-column (32-byte float) sector
  if (c > cols - w) c -= 8;
  b.first_col = c < 0 ? 0 : c;
  return b;
}

std::string device_generator_spec::to_string() const
{
  std::ostringstream os;
  os << (dist == lengths::constant  ? "constant"
         : dist == lengths::normal  ? "normal"
         : dist == lengths::uniform ? "uniform"
         : dist == lengths::pareto  ? "pareto"
                                    : "block")
     << ":rows=" << rows << ",cols=" << cols << ",mean=" << mean;
  if (dist != lengths::constant) {
    os << (dist == lengths::normal    ? ",sigma="
           : dist == lengths::uniform ? ",width="
           : dist == lengths::pareto  ? ",exponent="
                                      : ",long_rows=")
       << param;
  }
  if (dist == lengths::block) os << ",placed=hashed";  // block_layout; names without it had rows 0 .. param - 1
  os << ",window=" << window << ",seed=" << seed;
  return os.str();
}

template <typename Value>
struct device_csr_matrix<Value>::impl {
  size_type rows, cols, nnz;
  detail::device_buffer<index_type> row_ptr, col_idx;
  detail::device_buffer<Value> values;
};

template <typename Value>
device_csr_matrix<Value>::device_csr_matrix(size_type rows, size_type cols, size_type nnz)
    : impl_(std::make_unique<impl>())
{
  impl_->rows = rows;
  impl_->cols = cols;
  impl_->nnz = nnz;
  impl_->row_ptr.resize(rows + 1);
  impl_->col_idx.resize(nnz);
  impl_->values.resize(nnz);
}
template <typename Value>
device_csr_matrix<Value>::~device_csr_matrix() = default;
template <typename Value>
device_csr_matrix<Value>::device_csr_matrix(device_csr_matrix&&) noexcept = default;
template <typename Value>
device_csr_matrix<Value>& device_csr_matrix<Value>::operator=(device_csr_matrix&&) noexcept = default;
template <typename Value>
csr_view<Value> device_csr_matrix<Value>::view() const
{
  return {impl_->rows, impl_->cols, impl_->nnz, impl_->row_ptr.data(), impl_->col_idx.data(), impl_->values.data()};
}
template <typename Value>
index_type* device_csr_matrix<Value>::row_ptr()
{
  return impl_->row_ptr.data();
}
template <typename Value>
index_type* device_csr_matrix<Value>::col_idx()
{
  return impl_->col_idx.data();
}
template <typename Value>
Value* device_csr_matrix<Value>::values()
{
  return impl_->values.data();
}

template <typename Value>
device_csr_matrix<Value> generate_on_device(const device_generator_spec& spec, cudaStream_t stream)
{
  constexpr auto index_max = std::numeric_limits<index_type>::max();
  AIJP_ENSURE(spec.rows > 0 && spec.cols > 0 && spec.rows <= index_max && spec.cols <= index_max, bad_input,
              "generator: rows and cols must be in [1, 2^31 - 1]: " + spec.to_string());
  AIJP_ENSURE(std::isfinite(spec.mean) && spec.mean >= 0 && std::isfinite(spec.param) && spec.param >= 0, bad_input,
              "generator: mean and spread must be finite and non-negative: " + spec.to_string());
  AIJP_ENSURE(spec.window >= 1, bad_input, "generator: window must be at least 1: " + spec.to_string());
  AIJP_ENSURE(spec.dist != device_generator_spec::lengths::pareto || spec.param > 1, bad_input,
              "generator: the pareto exponent must exceed 1: " + spec.to_string());
  AIJP_ENSURE(spec.dist != device_generator_spec::lengths::block || (spec.param >= 1 && spec.param <= spec.rows), bad_input,
              "generator: a block needs 1 to rows long rows: " + spec.to_string());
  const size_type max_len = std::min(spec.window, spec.cols);
  const device_block_layout block = block_layout(spec);
  const size_type long_count = spec.dist == device_generator_spec::lengths::block ? static_cast<size_type>(std::ceil(spec.param)) : 0;
  detail::device_buffer<index_type> len(spec.rows + 1);
  draw_lengths<<<grid(spec.rows + 1), 256, 0, stream>>>(spec.dist, spec.rows, max_len, spec.mean, spec.param, spec.seed,
                                                         block, len.data());
  AIJP_CHECK_LAUNCH();
  // Scan in 64 bits to detect totals beyond 32-bit indices before writing any row pointer.
  detail::device_buffer<long long> offsets(spec.rows + 1);
  std::size_t temp_bytes = 0;
  AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, len.data(), offsets.data(),
                                                static_cast<int>(spec.rows + 1), stream));
  detail::device_buffer<unsigned char> temp(temp_bytes);
  AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), temp_bytes, len.data(), offsets.data(),
                                                static_cast<int>(spec.rows + 1), stream));
  long long nnz = 0;
  AIJP_CUDA_CHECK(cudaMemcpyAsync(&nnz, offsets.data() + spec.rows, sizeof(nnz), cudaMemcpyDeviceToHost, stream));
  AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (nnz > index_max) AIJP_THROW(not_supported, "generator: " + std::to_string(nnz) + " nonzeros exceed 32-bit indices");
  device_csr_matrix<Value> m(spec.rows, spec.cols, nnz);
  // nnz fits in 32 bits, so does every offset: a 32-bit scan into row_ptr is exact.
  std::size_t temp32 = 0;
  AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp32, len.data(), m.row_ptr(), static_cast<int>(spec.rows + 1), stream));
  if (temp32 > temp_bytes) temp.resize(temp32);
  AIJP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), temp32, len.data(), m.row_ptr(),
                                                static_cast<int>(spec.rows + 1), stream));
  fill_rows<<<grid(spec.rows), 256, 0, stream>>>(spec.rows, spec.cols, max_len, spec.seed, block.first_row, long_count,
                                                 block.first_col, m.row_ptr(), m.col_idx(), m.values());
  AIJP_CHECK_LAUNCH();
  return m;
}

template class device_csr_matrix<double>;
template class device_csr_matrix<float>;
template device_csr_matrix<double> generate_on_device<double>(const device_generator_spec&, cudaStream_t);
template device_csr_matrix<float> generate_on_device<float>(const device_generator_spec&, cudaStream_t);

}  // namespace aijp
