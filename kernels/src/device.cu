// Device discovery, fingerprint, calibration of the placeholder model's constants, and the context.
#include <aijpredict/device.hpp>
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/measure.hpp>

#include "analysis_jobs.hpp"
#include "async_ops.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "format_impl.hpp"
#include "vector_ops.hpp"
#include "module_preload.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <vector>

#ifndef AIJP_DEFAULTS_DIR
#error "AIJP_DEFAULTS_DIR must be defined by the build (the shipped cache defaults)"
#endif
#ifndef AIJP_KERNEL_SET_HASH
#error "AIJP_KERNEL_SET_HASH must be defined by the build (hash of the kernel sources)"
#endif

namespace aijp {

bool device_available(std::string* why)
{
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    if (why) *why = e != cudaSuccess ? std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")" : "no CUDA device";
    return false;
  }
  return true;
}

device_properties query_device_properties(int ordinal)
{
  device_properties d;
  cudaDeviceProp prop{};
  AIJP_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  d.ordinal = ordinal;
  d.name = prop.name;
  char uuid[64];
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof(uuid), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  d.uuid = uuid;
  const auto attr = [ordinal](cudaDeviceAttr a) {
    int v = 0;
    AIJP_CUDA_CHECK(cudaDeviceGetAttribute(&v, a, ordinal));
    return v;
  };
  d.cc_major = attr(cudaDevAttrComputeCapabilityMajor);
  d.cc_minor = attr(cudaDevAttrComputeCapabilityMinor);
  d.sm_count = attr(cudaDevAttrMultiProcessorCount);
  d.max_threads_per_sm = attr(cudaDevAttrMaxThreadsPerMultiProcessor);
  d.max_threads_per_block = attr(cudaDevAttrMaxThreadsPerBlock);
  d.warp_size = attr(cudaDevAttrWarpSize);
  d.l2_bytes = attr(cudaDevAttrL2CacheSize);
  d.mem_bus_width_bits = attr(cudaDevAttrGlobalMemoryBusWidth);
  d.mem_clock_khz = attr(cudaDevAttrMemoryClockRate);
  d.total_memory_bytes = static_cast<size_type>(prop.totalGlobalMem);
  return d;
}

namespace {
// The latest device_memory_info reading of each device (ordinals beyond the table are not kept).
struct memory_reading {
  bool valid = false;
  std::chrono::steady_clock::time_point at;
  size_type free_bytes = 0, total_bytes = 0;
  long long allocated_before = 0;  // driver_allocations().device_bytes when it was read
};
constexpr int kept_readings = 64;
std::mutex readings_mutex;
memory_reading readings[kept_readings];
}  // namespace

void device_memory_info(size_type* free_bytes, size_type* total_bytes)
{
  int device = 0;
  AIJP_CUDA_CHECK(cudaGetDevice(&device));
  const long long allocated = detail::driver_allocations().device_bytes.load(std::memory_order_relaxed);
  std::size_t f = 0, t = 0;
  AIJP_CUDA_CHECK(cudaMemGetInfo(&f, &t));
  if (free_bytes) *free_bytes = static_cast<size_type>(f);
  if (total_bytes) *total_bytes = static_cast<size_type>(t);
  if (device >= 0 && device < kept_readings) {
    std::lock_guard<std::mutex> lock(readings_mutex);
    readings[device] = {true, std::chrono::steady_clock::now(), static_cast<size_type>(f), static_cast<size_type>(t), allocated};
  }
}

std::size_t upload_pool_idle_bytes()
{
  return detail::block_pool::instance(detail::pool_kind::matrix_storage).idle_bytes();
}

std::size_t trim_upload_pool()
{
  return detail::block_pool::instance(detail::pool_kind::matrix_storage).trim();
}

bool recent_device_memory_info(double max_age_ms, size_type* free_bytes, size_type* total_bytes)
{
  int device = 0;
  if (!(max_age_ms > 0) || cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kept_readings) return false;
  memory_reading r;
  {
    std::lock_guard<std::mutex> lock(readings_mutex);
    r = readings[device];
  }
  if (!r.valid) return false;
  const double age_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r.at).count();
  if (age_ms > max_age_ms) return false;
  const long long since = detail::driver_allocations().device_bytes.load(std::memory_order_relaxed) - r.allocated_before;
  const size_type taken = static_cast<size_type>(std::max<long long>(since, 0));
  if (free_bytes) *free_bytes = r.free_bytes > taken ? r.free_bytes - taken : 0;
  if (total_bytes) *total_bytes = r.total_bytes;
  return true;
}

cache::device_fingerprint make_fingerprint(const device_properties& dev)
{
  cache::device_fingerprint fp;
  fp.name = dev.name;
  fp.uuid = dev.uuid;
  fp.cc_major = dev.cc_major;
  fp.cc_minor = dev.cc_minor;
  fp.sm_count = dev.sm_count;
  fp.mem_bus_width_bits = dev.mem_bus_width_bits;
  fp.mem_clock_khz = dev.mem_clock_khz;
  fp.l2_bytes = dev.l2_bytes;
  AIJP_CUDA_CHECK(cudaDriverGetVersion(&fp.driver_version));
  AIJP_CUDA_CHECK(cudaRuntimeGetVersion(&fp.runtime_version));
  int major = 0, minor = 0, patch = 0;
  AIJP_CUSPARSE_CHECK(cusparseGetProperty(MAJOR_VERSION, &major));
  AIJP_CUSPARSE_CHECK(cusparseGetProperty(MINOR_VERSION, &minor));
  AIJP_CUSPARSE_CHECK(cusparseGetProperty(PATCH_LEVEL, &patch));
  fp.cusparse_version = major * 10000 + minor * 100 + patch;
  fp.kernel_set_hash = AIJP_KERNEL_SET_HASH;
  return fp;
}

namespace {

__global__ void empty_kernel() {}

// Grid-stride read of 16-byte vectors; the block's sum is written only if it equals an impossible value,
// so the loads cannot be removed and nothing is written in practice.
__global__ void stream_read_kernel(const double2* __restrict__ in, std::size_t n, double* out)
{
  double acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double2 v = __ldg(in + i);
    acc += v.x + v.y;
  }
  if (acc == -1.2345e300) out[0] = acc;
}

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

namespace {

// Row r of a banded matrix with `k` entries per row: columns start .. start + k - 1 around r (sorted,
// distinct), values 1. The calibration matrix of cuSPARSE CSR's streaming efficiency.
__global__ void banded_csr_kernel(size_type rows, int k, index_type* row_ptr, index_type* col_idx, double* values)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r > rows) return;
  row_ptr[r] = static_cast<index_type>(r * k);
  if (r == rows) return;
  size_type start = r > static_cast<size_type>(k / 2) ? r - k / 2 : 0;
  if (start + k > rows) start = rows - k;
  for (int j = 0; j < k; ++j) {
    col_idx[r * k + j] = static_cast<index_type>(start + j);
    values[r * k + j] = 1.0;
  }
}

// Row r of a matrix with `k` pseudo-random columns in [0, cols) (a multiplicative hash of the entry index;
// columns within a row need not be sorted or distinct for cuSPARSE CSR), values 1. The calibration matrix of
// the L2's sector rate: every entry gathers x from its own 32-byte sector.
__global__ void random_csr_kernel(size_type rows, size_type cols, int k, index_type* row_ptr, index_type* col_idx, double* values)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r > rows) return;
  row_ptr[r] = static_cast<index_type>(r * k);
  if (r == rows) return;
  for (int j = 0; j < k; ++j) {
    const unsigned long long e = static_cast<unsigned long long>(r) * k + j;
    const unsigned long long h = (e + 1) * 0x9E3779B97F4A7C15ull;
    col_idx[r * k + j] = static_cast<index_type>((h >> 24) % static_cast<unsigned long long>(cols));
    values[r * k + j] = 1.0;
  }
}

}  // namespace

bandwidth_model_params calibrate_device(const device_properties& dev, cudaStream_t stream)
{
  bandwidth_model_params p;
  p.l2_bytes = dev.l2_bytes;
  detail::event_timer timer;
  std::vector<double> t;

  // Streaming read over 8 x L2 (at least 256 MiB, at most a quarter of free memory).
  size_type free_bytes = 0;
  device_memory_info(&free_bytes, nullptr);
  std::size_t bytes = std::max<std::size_t>(std::size_t(8) * dev.l2_bytes, std::size_t(256) << 20);
  bytes = std::min<std::size_t>(bytes, static_cast<std::size_t>(free_bytes / 4));
  const std::size_t n = bytes / sizeof(double2);
  detail::device_buffer<double2> buf(n);
  detail::device_buffer<double> out(1);
  AIJP_CUDA_CHECK(cudaMemsetAsync(buf.data(), 0, n * sizeof(double2), stream));
  const unsigned grid = static_cast<unsigned>(dev.sm_count * (dev.max_threads_per_sm / 256));
  // Warm-up first. An idle GPU runs at its lowest clock (345 MHz on an H100) and takes tens of milliseconds
  // to reach its boost clock; the host's launch path is cold too. Without this, the launch overhead measured
  // at process start was 10 us on an H100 whose warm value is 3.4-4.4 us, and the planner then ranked every
  // format of ours behind cuSPARSE (bench/results/2026-11-23_h100_tiny_noise.txt).
  {
    double busy_ms = 0;
    for (int rep = 0; rep < 200 && busy_ms < 50; ++rep) {
      timer.start(stream);
      stream_read_kernel<<<grid, 256, 0, stream>>>(buf.data(), n, out.data());
      AIJP_CHECK_LAUNCH();
      busy_ms += timer.stop_ms(stream);
    }
    for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 32, 0, stream>>>();
    AIJP_CHECK_LAUNCH();
    AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  t.clear();
  for (int rep = 0; rep < 12; ++rep) {
    timer.start(stream);
    stream_read_kernel<<<grid, 256, 0, stream>>>(buf.data(), n, out.data());
    AIJP_CHECK_LAUNCH();
    const double ms = timer.stop_ms(stream);
    if (rep >= 2) t.push_back(static_cast<double>(n * sizeof(double2)) / (ms * 1e-3) / 1e9);
  }
  p.stream_read_gbs = median(t);

  // cuSPARSE CSR, ALG1 and ALG2 (both with cusparseSpMV_preprocess): the fixed cost, SpMV on a 1024 x 1024
  // identity (all overhead, no bandwidth), and the streaming efficiency, the fraction of the streaming
  // bandwidth reached on a banded matrix (8 entries per row, contiguous columns) whose working set is 4 x L2
  // (at least 256 MiB, at most a quarter of free memory), counted with the placeholder's bytes (matrix, row
  // pointers, x once, y) after the fixed cost. The constants they replace (0.72 and 0.85, DESIGN.md section
  // 7) described the kernels without preprocessing; on an H100 the placeholder then had ALG2 faster than
  // ALG1 where it measured 5 % slower (bench/results/2026-11-23_h100_run3_accuracy.csv).
  {
    detail::cusparse_handle handle;
    const row_stats no_stats;
    const auto make = [&](const detail::device_csr<double>& a, bool alg2) {
      return alg2 ? detail::make_cusparse_csr_alg2(detail::build_args<double>{a, no_stats, handle, stream})
                  : detail::make_cusparse_csr(a, handle.get());
    };
    // Time per call of `batch` back-to-back calls of `launch`.
    const auto batch_us = [&](auto&& launch, int batch) {
      timer.start(stream);
      for (int i = 0; i < batch; ++i) launch();
      AIJP_CHECK_LAUNCH();
      return timer.stop_ms(stream) * 1e3 / batch;
    };
    // Median over 7 batches of `batch` back-to-back products, per product (the streaming efficiency).
    const auto time_us = [&](detail::format_impl<double>& f, const double* x, double* y, int batch) {
      const auto product = [&] { f.apply(1.0, x, 0.0, y, stream); };
      for (int i = 0; i < 3; ++i) product();
      t.clear();
      for (int rep = 0; rep < 7; ++rep) t.push_back(batch_us(product, batch));
      return median(t);
    };

    detail::device_csr<double> id;
    const int m = 1024;
    std::vector<index_type> rp(m + 1), ci(m);
    std::vector<double> v(m, 1.0);
    for (int i = 0; i <= m; ++i) rp[i] = i;
    for (int i = 0; i < m; ++i) ci[i] = i;
    id.rows = id.cols = id.nnz = m;
    id.row_ptr.resize(m + 1);
    id.col_idx.resize(m);
    id.values.resize(m);
    AIJP_CUDA_CHECK(cudaMemcpy(id.row_ptr.data(), rp.data(), rp.size() * sizeof(index_type), cudaMemcpyHostToDevice));
    AIJP_CUDA_CHECK(cudaMemcpy(id.col_idx.data(), ci.data(), ci.size() * sizeof(index_type), cudaMemcpyHostToDevice));
    AIJP_CUDA_CHECK(cudaMemcpy(id.values.data(), v.data(), v.size() * sizeof(double), cudaMemcpyHostToDevice));
    detail::device_buffer<double> ix(m), iy(m);
    AIJP_CUDA_CHECK(cudaMemcpy(ix.data(), v.data(), m * sizeof(double), cudaMemcpyHostToDevice));
    // The fixed costs decide between our kernels and cuSPARSE's on small matrices, so they are measured
    // together: 9 rounds, each timing a batch of 200 empty kernels (our launch overhead) and batches of 50
    // cuSPARSE ALG1 and ALG2 products on the identity, back to back; each constant is its fastest round's.
    // A disturbance of the host or the GPU only adds time, and it then hits one round of all three alike
    // instead of one constant: with one median per constant, measured in turn, their differences moved by
    // several microseconds from run to run on an H100.
    {
      const auto alg1 = make(id, false);
      const auto alg2 = make(id, true);
      const auto empty = [&] { empty_kernel<<<1, 32, 0, stream>>>(); };
      const auto run1 = [&] { alg1->apply(1.0, ix.data(), 0.0, iy.data(), stream); };
      const auto run2 = [&] { alg2->apply(1.0, ix.data(), 0.0, iy.data(), stream); };
      for (int i = 0; i < 5; ++i) {  // cusparseSpMV_preprocess runs on the first product
        run1();
        run2();
      }
      double launch = 1e30, o1 = 1e30, o2 = 1e30;
      for (int round = 0; round < 9; ++round) {
        launch = std::min(launch, batch_us(empty, 200));
        o1 = std::min(o1, batch_us(run1, 50));
        o2 = std::min(o2, batch_us(run2, 50));
      }
      p.launch_us = launch;
      p.cusparse_csr_overhead_us = o1;
      p.cusparse_csr_alg2_overhead_us = o2;
    }

    constexpr int k = 8;
    const double per_row = k * (sizeof(double) + sizeof(index_type)) + sizeof(index_type) + 2 * sizeof(double);
    std::size_t want = std::max<std::size_t>(std::size_t(4) * dev.l2_bytes, std::size_t(256) << 20);
    want = std::min<std::size_t>(want, static_cast<std::size_t>(free_bytes / 4));
    const size_type rows = static_cast<size_type>(static_cast<double>(want) / per_row);
    if (rows > 1024) {
      detail::device_csr<double> a;
      a.rows = a.cols = rows;
      a.nnz = rows * k;
      a.row_ptr.resize(rows + 1);
      a.col_idx.resize(a.nnz);
      a.values.resize(a.nnz);
      banded_csr_kernel<<<static_cast<unsigned>((rows + 1 + 255) / 256), 256, 0, stream>>>(rows, k, a.row_ptr.data(), a.col_idx.data(),
                                                                                         a.values.data());
      AIJP_CHECK_LAUNCH();
      detail::device_buffer<double> x(rows), y(rows);
      AIJP_CUDA_CHECK(cudaMemsetAsync(x.data(), 0, rows * sizeof(double), stream));
      const double bytes = static_cast<double>(rows) * per_row + sizeof(index_type);
      const auto efficiency = [&](bool alg2, double overhead_us, double fallback) {
        const double streaming_us = time_us(*make(a, alg2), x.data(), y.data(), 1) - overhead_us;
        return streaming_us > 0 ? std::clamp(bytes / (p.stream_read_gbs * 1e3 * streaming_us), 0.3, 1.0) : fallback;
      };
      p.cusparse_csr_efficiency = efficiency(false, p.cusparse_csr_overhead_us, p.cusparse_csr_efficiency);
      p.cusparse_csr_alg2_efficiency = efficiency(true, p.cusparse_csr_alg2_overhead_us, p.cusparse_csr_alg2_efficiency);
    }

    // The L2's rate for scattered traffic (bandwidth_model_params::l2_gather_gbs, and ALG2's own rate
    // l2_gather_alg2_gbs): cuSPARSE CSR ALG1 (ALG2) on 16
    // random columns per row, x of L2 / 4 (resident in the L2, every entry its own sector), 8M nonzeros
    // (at most a quarter of free memory); the bytes as the placeholder counts them (l2_traffic_bytes, with
    // the sampled locality), over the time after the fixed cost. An H100 gives ~4.6 TB/s against 3.0 TB/s
    // of DRAM streaming.
    if (dev.l2_bytes > 0) {
      constexpr int rk = 16;
      const size_type rcols = std::max<size_type>(4096, static_cast<size_type>(dev.l2_bytes / 4 / sizeof(double)));
      const size_type rrows = size_type(1) << 19;
      const double rbytes = static_cast<double>(rrows) * (rk * (sizeof(double) + sizeof(index_type)) + sizeof(index_type));
      if (rbytes < static_cast<double>(free_bytes) / 4) {
        detail::device_csr<double> a;
        a.rows = rrows;
        a.cols = rcols;
        a.nnz = rrows * rk;
        a.row_ptr.resize(rrows + 1);
        a.col_idx.resize(a.nnz);
        a.values.resize(a.nnz);
        random_csr_kernel<<<static_cast<unsigned>((rrows + 1 + 255) / 256), 256, 0, stream>>>(rrows, rcols, rk, a.row_ptr.data(),
                                                                                             a.col_idx.data(), a.values.data());
        AIJP_CHECK_LAUNCH();
        detail::device_buffer<double> x(rcols), y(rrows);
        AIJP_CUDA_CHECK(cudaMemsetAsync(x.data(), 0, rcols * sizeof(double), stream));
        const locality_sample loc = sample_locality(rrows, rcols, a.row_ptr.data(), a.col_idx.data(), sizeof(double), stream);
        row_stats st;
        st.rows = rrows;
        st.cols = rcols;
        st.nnz = a.nnz;
        const double l2_bytes = l2_traffic_bytes(format_id::cusparse_csr, st, sizeof(double), loc.x_sectors_per_nnz, loc.sorted, &dev);
        const auto rate = [&](bool alg2, double overhead_us, double fallback) {
          const double us = time_us(*make(a, alg2), x.data(), y.data(), 1) - overhead_us;
          return us > 0 ? std::clamp(l2_bytes / (us * 1e3), 0.5 * p.stream_read_gbs, 20.0 * p.stream_read_gbs) : fallback;
        };
        p.l2_gather_gbs = rate(false, p.cusparse_csr_overhead_us, p.l2_gather_gbs);
        p.l2_gather_alg2_gbs = rate(true, p.cusparse_csr_alg2_overhead_us, p.l2_gather_gbs);
      }
    }
  }
  return p;
}

namespace {

std::string utc_now()
{
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

bool params_from_entry(const cache::cache_entry& e, bandwidth_model_params& p) { return params_from_metrics(e.device_metrics, p); }

void params_to_entry(const bandwidth_model_params& p, cache::cache_entry& e)
{
  params_to_metrics(p, e.device_metrics);
  e.provenance["device_metrics"] = "aijp::calibrate_device " + utc_now();
}

}  // namespace

kernel_preload_report preload_kernels(kernel_preload which)
{
  kernel_preload_report r;
  switch (which) {
    case kernel_preload::none: return r;
    case kernel_preload::double_values: r = detail::preload_modules(sizeof(double)); break;
    case kernel_preload::float_values: r = detail::preload_modules(sizeof(float)); break;
    case kernel_preload::all: r = detail::preload_modules(0); break;
  }
  const auto t0 = std::chrono::steady_clock::now();
  r.code_pages = detail::prefault_host_code();
  r.code_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

context::context(const context_options& opts)
{
  cache::load_result loaded;
  init_(opts, loaded);
  if (opts.online) load_online_(opts, loaded);
  if (opts.measure_launch_gap && params_.launch_gap_us > 0) {
    // A failed measurement leaves the predictions at the warm-up's gap, with a warning: it only refines them.
    const detail::stream_guard s;
    try {
      measure_launch_gap(s.get());
    } catch (const error& e) {
      params_.launch_shift_us = 0;
      launch_gap_now_ = 0;
      warnings_.push_back(std::string("aijpredict: the gap between back-to-back kernels could not be measured (") + e.what() +
                          "); predictions stay at the warm-up's");
    }
  }
}

double context::measure_launch_gap(cudaStream_t stream)
{
  timing_options o;
  o.gated = params_.launch_gap_gated > 0;
  launch_gap_now_ = aijp::measure_launch_gap(stream, device_, o).median_us;
  params_.launch_shift_us = params_.launch_gap_us > 0 && launch_gap_now_ > 0 ? launch_gap_now_ - params_.launch_gap_us : 0.0;
  return launch_gap_now_;
}

context::~context()
{
  try {
    save_online();
  } catch (...) {  // a destructor must not throw; save_online() reports the same failure to explicit callers
  }
}

void context::init_(const context_options& opts, cache::load_result& loaded)
{
  std::string why;
  if (!device_available(&why)) AIJP_THROW(not_supported, why);
  int ordinal = 0;
  AIJP_CUDA_CHECK(cudaGetDevice(&ordinal));
  device_ = query_device_properties(ordinal);
  // The read-backs and temporaries of the analysis and of staged steps (gpu_matrix.hpp) use pooled blocks,
  // allocated here, outside the products (a cudaHostAlloc costs 0.05-1 ms). Sizes from the staged parts'
  // labels on the H100 (session 16, "[2 allocations: 128 KiB, 128 KiB host]"): CUB temporaries (16 KiB),
  // strip locality groups (32 KiB) and strip summaries at the default 64 strips (128 KiB), each on the
  // device and read back; two of each, since a step may start while the last one's blocks are held.
  for (const auto kind : {detail::pool_kind::pinned_host, detail::pool_kind::device}) {
    detail::block_pool::instance(kind).reserve(4096, 8);
    detail::block_pool::instance(kind).reserve(8192, 2);
    detail::block_pool::instance(kind).reserve(16384, 2);
    detail::block_pool::instance(kind).reserve(32768, 2);
    detail::block_pool::instance(kind).reserve(65536, 2);
    detail::block_pool::instance(kind).reserve(131072, 2);
    // Two: a sell_sigma conversion of a 32768-row matrix sorts 256 KiB keys into 256 KiB (its staged fill part
    // took 118 us with the second one and an 8 KiB scan buffer allocated in it, session 21).
    detail::block_pool::instance(kind).reserve(262144, 2);
  }
  // The event pairs of two plans' timers (the running one and one being built) and of a staged step's
  // parts (4 pairs), and the staged jobs' events.
  detail::event_pool::instance(detail::event_kind::timing).reserve(2 * 2 * 32 + 2 * 4);
  detail::event_pool::instance(detail::event_kind::no_timing).reserve(16);
  preload_ = preload_kernels(opts.preload);
  detail::preload_analysis_kernels();
  (void)detail::analysis_stream();  // made here, not inside the product of the first staged analysis
  detail::step_worker::instance().start();  // the background steps' thread and stream, likewise
  if (opts.model != "placeholder") (void)model::make_model(opts.model);  // an unknown name is an error
  if (!opts.use_cache) {
    calibrate_();
    params_source_ = "calibrated now (cache disabled)";
    default_corrections_(make_fingerprint(device_));
    load_default_model_(opts, make_fingerprint(device_));
    return;
  }
  const cache::store store(opts.cache_dir.empty() ? cache::default_directory() : std::filesystem::path(opts.cache_dir));
  const cache::device_fingerprint fp = make_fingerprint(device_);
  cache_dir_ = store.directory();
  fingerprint_ = fp;
  loaded = opts.read_cache ? store.load_from(fp, opts.read_cache(store.path_for(fp))) : store.load(fp);
  if (loaded.status == cache::load_status::ok && params_from_entry(*loaded.entry, params_)) {
    params_.l2_bytes = device_.l2_bytes;
    params_source_ = "cache file " + loaded.path.string();
    if (!has_format_corrections(params_)) default_corrections_(fp);  // written by a calibration alone (or before the warm-up fitted them)
  } else {
    if (loaded.status != cache::load_status::ok && loaded.status != cache::load_status::missing) {
      warnings_.push_back(loaded.message);
    }
    calibrate_();
    params_source_ = "calibrated now";
    default_corrections_(fp);
    if (loaded.status != cache::load_status::ok && loaded.status != cache::load_status::missing) {
      params_source_ += " (existing cache file not used)";  // never overwrite a file we could not read
    } else {
      try {
        cache::cache_entry initial;
        initial.schema_version = cache::schema_version;
        initial.device = fp;
        initial.created_by = "aijpredict runtime";
        initial.created_at = utc_now();
        store.update(fp, [&](cache::cache_entry& e) { params_to_entry(params_, e); }, initial);
        params_source_ += ", saved to " + store.path_for(fp).string();
      } catch (const error& e) {
        warnings_.push_back(std::string("aijpredict: could not write the coefficient cache: ") + e.what());
      }
    }
  }
  if (opts.model == "placeholder") return;
  if (loaded.status == cache::load_status::ok) {
    const auto it = loaded.entry->coefficients.find(opts.model);
    if (it != loaded.entry->coefficients.end()) {
      model_ = model::make_model(opts.model);
      model_->set_coefficients(it->second);
      model_source_ = "model " + opts.model + " fitted on this GPU (" + loaded.path.string() + ")";
      return;
    }
  }
  load_default_model_(opts, fp);
}

void context::calibrate_()
{
  const detail::stream_guard s;
  params_ = calibrate_device(device_, s.get());
}

namespace {
std::filesystem::path defaults_dir()
{
  const char* env = std::getenv("AIJPREDICT_DEFAULTS_DIR");
  return env && *env ? std::filesystem::path(env) : std::filesystem::path(AIJP_DEFAULTS_DIR);
}
}  // namespace

// Calibrated now, no warm-up on this GPU yet: the placeholder's per-format fixed costs and chain factors
// (fitted by a warm-up, not by calibrate_device) come from the shipped default of the nearest GPU. Without
// them the placeholder misses the per-format costs of one product issued at a time (H100, empty cache
// directory: cusparse_sell 59 % mean error, ell 24 %, ALG2 22 %; with them 15 %, 7 %, 8 %, and selection
// regret 1.011 instead of 1.012: bench/results/2026-11-23_h100_session5_fresh_cache{,_defaults}_accuracy.txt).
// The fixed costs are times, but launch-sized ones that a GPU of the same generation shares; the chain
// factors are ratios.
void context::default_corrections_(const cache::device_fingerprint& fp)
{
  const auto def = cache::nearest_default(defaults_dir(), fp);
  if (!def) return;
  bandwidth_model_params d;
  if (!params_from_metrics(def->entry->device_metrics, d)) return;
  if (!has_format_corrections(d)) return;  // an older default without them
  copy_format_corrections(d, params_);
  params_source_ += "; per-format fixed costs, floors and chain factors from the shipped default " + def->path.string() + " (" +
                    def->entry->device.name + ")";
}

// No coefficients fitted on this GPU: take the shipped default of the nearest GPU (cache/defaults), with its
// times scaled by the ratio of the two GPUs' measured streaming bandwidths (an approximation: launch
// overheads do not scale with bandwidth; the warm-up replaces it with a real fit).
void context::load_default_model_(const context_options& opts, const cache::device_fingerprint& fp)
{
  if (opts.model == "placeholder") return;
  const std::filesystem::path dir = defaults_dir();
  const auto def = cache::nearest_default(dir, fp);
  if (!def) {
    model_source_ = "placeholder bandwidth model (no " + opts.model + " coefficients for this GPU and no shipped default in " +
                    dir.string() + ": run aijp_warmup)";
    return;
  }
  const auto it = def->entry->coefficients.find(opts.model);
  if (it == def->entry->coefficients.end()) {
    model_source_ = "placeholder bandwidth model (the nearest shipped default " + def->path.string() + " has no " +
                    opts.model + " coefficients)";
    return;
  }
  model_ = model::make_model(opts.model);
  model_->set_coefficients(it->second);
  const auto bw = def->entry->device_metrics.find("stream_read_gbs");
  const bool same_gpu = def->entry->device.name == fp.name;
  if (!same_gpu && bw != def->entry->device_metrics.end() && bw->second > 0 && params_.stream_read_gbs > 0) {
    model_scale_ = bw->second / params_.stream_read_gbs;
  }
  char scale[64];
  std::snprintf(scale, sizeof(scale), "%.3f", model_scale_);
  model_source_ = "model " + opts.model + " from the shipped default " + def->path.string() + " (" + def->entry->device.name +
                  (same_gpu ? ")" : std::string("), times scaled by ") + scale + " (bandwidth ratio); run aijp_warmup to fit this GPU");
}

// Online corrections belong to the model that ranks the formats (a ratio learned against the placeholder
// is meaningless for a fitted model), so the key names the model actually in use.
void context::load_online_(const context_options& opts, const cache::load_result& loaded)
{
  (void)opts;
  const std::string model = model_ ? model_->name() : std::string("placeholder");
  online_key_ = online::online_model_name(model);
  online_loaded_from_ = "nothing learned yet";
  if (loaded.status == cache::load_status::ok) {
    const auto it = loaded.entry->coefficients.find(online_key_);
    if (it != loaded.entry->coefficients.end()) {
      online_ = std::make_shared<online::corrections>(online::corrections::from_table(it->second));
      online_loaded_from_ = "loaded from " + loaded.path.string();
    }
  }
  if (loaded.status != cache::load_status::ok && loaded.status != cache::load_status::missing) {
    cache_dir_.clear();  // never overwrite a file we could not read (as for the device constants)
    online_loaded_from_ += " (the cache file is unusable: corrections will not be saved)";
  }
  if (!online_) online_ = std::make_shared<online::corrections>();
  online_saved_obs_ = online_->observations();
}

std::string context::online_source() const
{
  if (!online_) return "online refinement off";
  char n[64];
  std::snprintf(n, sizeof(n), "%.0f observations", online_->observations());
  return "online refinement (" + online_key_ + "): " + n + ", " + online_loaded_from_;
}

std::filesystem::path context::save_online()
{
  if (!online_ || cache_dir_.empty()) return {};
  const online::corrections mine(*online_);
  const double obs = mine.observations();
  if (!(obs > online_saved_obs_)) return {};
  const cache::store store(cache_dir_);
  cache::cache_entry initial;
  initial.schema_version = cache::schema_version;
  initial.device = fingerprint_;
  initial.created_by = "aijpredict runtime";
  initial.created_at = utc_now();
  params_to_entry(params_, initial);
  store.update(
      fingerprint_,
      [&](cache::cache_entry& e) {
        online::corrections merged(mine);
        const auto it = e.coefficients.find(online_key_);
        if (it != e.coefficients.end()) merged.merge(online::corrections::from_table(it->second));
        e.coefficients[online_key_] = merged.to_table();
        e.provenance[online_key_] = "aijp::context::save_online " + utc_now();
      },
      initial);
  online_saved_obs_ = obs;
  return store.path_for(fingerprint_);
}

}  // namespace aijp
