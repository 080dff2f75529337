// Experiment: host time of the ways to get and give back device memory, with the device idle and with a
// kernel still running (does the call wait for it?). A staged conversion runs in parts of ~0.1 ms between a
// solver's products, so an allocation of 0.2 ms, or a free that waits for the queued products, is what a
// short solve sees. Built by CMake as aijp_alloc_cost (bench/CMakeLists.txt).
//   aijp_alloc_cost [--reps N] [--busy-us US]
// Driver calls (virtual memory management) through cudaGetDriverEntryPointByVersion: no link to libcuda.
#include "experiment_check.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

#define DCHECK(call)                                                                                  \
  do {                                                                                                \
    CUresult r_ = (call);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                         \
      std::fprintf(stderr, "aijp_alloc_cost: %s failed: CUresult %d (line %d)\n", #call, static_cast<int>(r_), __LINE__); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

using clock_type = std::chrono::steady_clock;
double us_since(clock_type::time_point t0) { return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count(); }

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

__global__ void spin_kernel(long long cycles)
{
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

template <class Fn>
Fn entry(const char* name, unsigned version)
{
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CHECK(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "aijp_alloc_cost: driver entry point %s not found\n", name);
    std::exit(1);
  }
  return reinterpret_cast<Fn>(fn);
}

struct vmm {
  PFN_cuMemGetAllocationGranularity_v10020 granularity = entry<PFN_cuMemGetAllocationGranularity_v10020>("cuMemGetAllocationGranularity", 10020);
  PFN_cuMemAddressReserve_v10020 reserve = entry<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve", 10020);
  PFN_cuMemAddressFree_v10020 address_free = entry<PFN_cuMemAddressFree_v10020>("cuMemAddressFree", 10020);
  PFN_cuMemCreate_v10020 create = entry<PFN_cuMemCreate_v10020>("cuMemCreate", 10020);
  PFN_cuMemRelease_v10020 release = entry<PFN_cuMemRelease_v10020>("cuMemRelease", 10020);
  PFN_cuMemMap_v10020 map = entry<PFN_cuMemMap_v10020>("cuMemMap", 10020);
  PFN_cuMemUnmap_v10020 unmap = entry<PFN_cuMemUnmap_v10020>("cuMemUnmap", 10020);
  PFN_cuMemSetAccess_v10020 set_access = entry<PFN_cuMemSetAccess_v10020>("cuMemSetAccess", 10020);
};

}  // namespace

int main(int argc, char** argv)
{
  int reps = 7;
  double busy_us = 3000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help") {
      std::printf("Usage: aijp_alloc_cost [--reps N] [--busy-us US]\n"
                  "Host time (median of N) of cudaMalloc/cudaFree, of virtual-memory chunks (cuMemCreate/Map/SetAccess),\n"
                  "and of a stream-ordered pool, with the device idle and behind a kernel of US microseconds; small cudaMallocs\n"
                  "(alone and beside a live one) and cudaMemGetInfo.\n");
      return 0;
    }
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--busy-us" && i + 1 < argc) {
      busy_us = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "aijp_alloc_cost: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  const long long busy_cycles = static_cast<long long>(busy_us * 1e-3 * clock_khz);
  cudaStream_t s = nullptr;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaFree(nullptr));
  spin_kernel<<<1, 1, 0, s>>>(1000);
  CHECK(cudaStreamSynchronize(s));
  std::printf("# device %s, %d reps (median host us), busy kernel %.0f us\n", prop.name, reps, busy_us);

  const std::size_t MiB = std::size_t(1) << 20;
  const std::vector<std::size_t> sizes = {1 * MiB, 8 * MiB, 32 * MiB, 128 * MiB, 512 * MiB};

  std::printf("\n## cudaMalloc / cudaFree (device idle; free behind a busy kernel)\n%10s %12s %12s %16s\n", "MiB", "malloc", "free", "free behind busy");
  for (std::size_t bytes : sizes) {
    std::vector<double> tm, tf, tb;
    for (int r = 0; r < reps; ++r) {
      void* p = nullptr;
      auto t0 = clock_type::now();
      CHECK(cudaMalloc(&p, bytes));
      tm.push_back(us_since(t0));
      t0 = clock_type::now();
      CHECK(cudaFree(p));
      tf.push_back(us_since(t0));
      CHECK(cudaMalloc(&p, bytes));
      spin_kernel<<<1, 1, 0, s>>>(busy_cycles);
      t0 = clock_type::now();
      CHECK(cudaFree(p));
      tb.push_back(us_since(t0));
      CHECK(cudaStreamSynchronize(s));
    }
    std::printf("%10zu %12.1f %12.1f %16.1f\n", bytes / MiB, median(tm), median(tf), median(tb));
  }

  // Small allocations (a small matrix's CSR arrays, aijcusparse's three device vectors), each freed before the
  // next, and beside a small allocation still live (the driver may place them in one chunk); cudaMemGetInfo.
  std::printf("\n## small cudaMalloc (device idle): alone, and while another small allocation is live; cudaMemGetInfo\n%10s %12s %12s %12s\n", "KiB", "malloc", "beside live", "free");
  for (std::size_t kib : {4, 64, 256, 1024, 2048}) {
    std::vector<double> tm, tl, tf;
    for (int r = 0; r < reps; ++r) {
      void* p = nullptr;
      void* live = nullptr;
      auto t0 = clock_type::now();
      CHECK(cudaMalloc(&p, kib * 1024));
      tm.push_back(us_since(t0));
      CHECK(cudaMalloc(&live, 4096));
      void* q = nullptr;
      t0 = clock_type::now();
      CHECK(cudaMalloc(&q, kib * 1024));
      tl.push_back(us_since(t0));
      t0 = clock_type::now();
      CHECK(cudaFree(q));
      tf.push_back(us_since(t0));
      CHECK(cudaFree(live));
      CHECK(cudaFree(p));
    }
    std::printf("%10zu %12.1f %12.1f %12.1f\n", kib, median(tm), median(tl), median(tf));
  }
  {
    std::vector<double> tq;
    for (int r = 0; r < reps; ++r) {
      std::size_t f = 0, t = 0;
      const auto t0 = clock_type::now();
      CHECK(cudaMemGetInfo(&f, &t));
      tq.push_back(us_since(t0));
    }
    std::printf("cudaMemGetInfo %.1f us (median of %d)\n", median(tq), reps);
  }

  vmm d;
  CUmemAllocationProp ap{};
  ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.location.id = dev;
  std::size_t gmin = 0, grec = 0;
  DCHECK(d.granularity(&gmin, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  DCHECK(d.granularity(&grec, &ap, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  CUmemAccessDesc access{};
  access.location = ap.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::printf("\n## virtual memory management: granularity minimum %zu KiB, recommended %zu KiB\n", gmin >> 10, grec >> 10);
  std::printf("%10s %10s %10s %10s %10s %14s %14s\n", "chunk MiB", "reserve", "create", "map", "access", "unmap+release", "behind busy");
  for (std::size_t chunk : {2 * MiB, 8 * MiB, 32 * MiB, 128 * MiB}) {
    std::vector<double> tr, tc, tm, ta, tu, tb;
    for (int r = 0; r < reps; ++r) {
      CUdeviceptr va = 0;
      auto t0 = clock_type::now();
      DCHECK(d.reserve(&va, 512 * MiB, 0, 0, 0));
      tr.push_back(us_since(t0));
      CUmemGenericAllocationHandle h = 0;
      t0 = clock_type::now();
      DCHECK(d.create(&h, chunk, &ap, 0));
      tc.push_back(us_since(t0));
      t0 = clock_type::now();
      DCHECK(d.map(va, chunk, 0, h, 0));
      tm.push_back(us_since(t0));
      t0 = clock_type::now();
      DCHECK(d.set_access(va, chunk, &access, 1));
      ta.push_back(us_since(t0));
      t0 = clock_type::now();
      DCHECK(d.unmap(va, chunk));
      DCHECK(d.release(h));
      tu.push_back(us_since(t0));
      // Again, given back behind a busy kernel that does not use it.
      DCHECK(d.create(&h, chunk, &ap, 0));
      DCHECK(d.map(va, chunk, 0, h, 0));
      DCHECK(d.set_access(va, chunk, &access, 1));
      spin_kernel<<<1, 1, 0, s>>>(busy_cycles);
      t0 = clock_type::now();
      DCHECK(d.unmap(va, chunk));
      DCHECK(d.release(h));
      tb.push_back(us_since(t0));
      CHECK(cudaStreamSynchronize(s));
      DCHECK(d.address_free(va, 512 * MiB));
    }
    std::printf("%10zu %10.1f %10.1f %10.1f %10.1f %14.1f %14.1f\n", chunk / MiB, median(tr), median(tc), median(tm), median(ta), median(tu), median(tb));
  }

  std::printf("\n## stream-ordered pool (own pool, release threshold: all): first allocation (grows), again after free\n");
  std::printf("%10s %12s %12s %12s %16s\n", "MiB", "first", "free", "again", "again behind busy");
  for (std::size_t bytes : sizes) {
    std::vector<double> tf, tfr, ta, tb;
    for (int r = 0; r < reps; ++r) {
      cudaMemPoolProps pp{};
      pp.allocType = cudaMemAllocationTypePinned;
      pp.location.type = cudaMemLocationTypeDevice;
      pp.location.id = dev;
      cudaMemPool_t pool = nullptr;
      CHECK(cudaMemPoolCreate(&pool, &pp));
      unsigned long long threshold = ~0ull;
      CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
      void* p = nullptr;
      auto t0 = clock_type::now();
      CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, s));
      tf.push_back(us_since(t0));
      t0 = clock_type::now();
      CHECK(cudaFreeAsync(p, s));
      tfr.push_back(us_since(t0));
      CHECK(cudaStreamSynchronize(s));
      t0 = clock_type::now();
      CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, s));
      ta.push_back(us_since(t0));
      CHECK(cudaFreeAsync(p, s));
      spin_kernel<<<1, 1, 0, s>>>(busy_cycles);
      t0 = clock_type::now();
      CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, s));
      tb.push_back(us_since(t0));
      CHECK(cudaFreeAsync(p, s));
      CHECK(cudaStreamSynchronize(s));
      CHECK(cudaMemPoolDestroy(pool));
    }
    std::printf("%10zu %12.1f %12.1f %12.1f %16.1f\n", bytes / MiB, median(tf), median(tfr), median(ta), median(tb));
  }
  CHECK(cudaStreamDestroy(s));
  return 0;
}
