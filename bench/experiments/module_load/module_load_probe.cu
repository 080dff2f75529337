// Experiment: what a CUDA module costs at its first use under lazy loading, and whether loading it on another
// host thread stalls the thread that issues the products. Issue 6: the conversion part of a staged step spent
// 0.45-1.1 ms loading one format's module (bench/results/2026-11-24_h100_session13_first_use.txt).
// Each tu_<name>.cu is a module of its own (gen_tus.sh): s* / bg* hold one tiny kernel, m* 40 and b* / bgb
// 200 filler kernels besides it. Build and run (see run.sh):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o module_load_probe module_load_probe.cu tu_*.cu -lpthread
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#define DECL(n) void* probe_##n##_tiny(); void* probe_##n##_filler();
DECL(s1) DECL(s2) DECL(s3) DECL(s4) DECL(s5) DECL(s6) DECL(bg1) DECL(bg2) DECL(bg3) DECL(m1) DECL(m2) DECL(b1) DECL(b2) DECL(bgb)

namespace {
using clk = std::chrono::steady_clock;
double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
void check(cudaError_t e, const char* what)
{
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
__global__ void main_tiny(float* p) { p[threadIdx.x] += 1.0f; }
__global__ void spin(long long cycles)
{
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
float* g_buf = nullptr;

double attr_us(void* f)
{
  cudaFuncAttributes a;
  const auto t0 = clk::now();
  check(cudaFuncGetAttributes(&a, f), "cudaFuncGetAttributes");
  return us(t0, clk::now());
}
double launch_sync_us(void* f)
{
  void* args[] = {&g_buf};
  const auto t0 = clk::now();
  check(cudaLaunchKernel(f, dim3(1), dim3(32), args, 0, nullptr), "launch");
  check(cudaStreamSynchronize(nullptr), "sync");
  return us(t0, clk::now());
}
double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The products' thread: `iters` launches of a tiny kernel, a stream synchronisation every 8 (a KSP's dot
// products), each iteration's host time recorded. At iteration `at`, `go` is raised for the loader.
std::vector<double> product_loop(int iters, int at, std::atomic<int>* go)
{
  std::vector<double> t(iters);
  void* args[] = {&g_buf};
  for (int i = 0; i < iters; ++i) {
    if (go != nullptr && i == at) go->store(1);
    const auto t0 = clk::now();
    check(cudaLaunchKernel(reinterpret_cast<void*>(&main_tiny), dim3(1), dim3(32), args, 0, nullptr), "launch");
    if (i % 8 == 7) check(cudaStreamSynchronize(nullptr), "sync");
    t[i] = us(t0, clk::now());
  }
  check(cudaStreamSynchronize(nullptr), "sync");
  return t;
}

void report_loop(const char* what, const std::vector<double>& t, double base_median, double loader_us)
{
  double excess = 0, worst = 0;
  for (double x : t) {
    excess += std::max(0.0, x - base_median);
    worst = std::max(worst, x);
  }
  double total = 0;
  for (double x : t) total += x;
  std::printf("%-44s total %9.1f us  median %6.2f  worst %8.1f  excess over base median %8.1f us  loader %8.1f us\n", what, total,
              median(t), worst, excess, loader_us);
}

// The loop with a loader thread that loads module `f` (cudaFuncGetAttributes) once the loop reaches `at`.
void with_loader(const char* what, void* f, double base_median, int iters)
{
  std::atomic<int> go{0};
  double loader = 0;
  std::thread th([&] {
    while (go.load() == 0) std::this_thread::yield();
    loader = attr_us(f);
  });
  const auto t = product_loop(iters, iters / 2, &go);
  th.join();
  report_loop(what, t, base_median, loader);
}
}  // namespace

int main(int argc, char** argv)
{
  if (argc > 1 && std::string(argv[1]) == "--help") {
    std::printf("Usage: module_load_probe\nFirst-use cost of CUDA modules of several sizes under lazy loading, and the stall a loader thread\n"
                "causes on a thread issuing small kernels. Run with CUDA_MODULE_LOADING=LAZY (default) or EAGER.\n");
    return 0;
  }
  const char* ml = std::getenv("CUDA_MODULE_LOADING");
  std::printf("# CUDA_MODULE_LOADING=%s\n", ml ? ml : "(unset: LAZY)");
  check(cudaFree(nullptr), "context");
  check(cudaMalloc(&g_buf, 4096), "malloc");
  check(cudaMemset(g_buf, 0, 4096), "memset");
  launch_sync_us(reinterpret_cast<void*>(&main_tiny));
  std::printf("main module tiny kernel, launch+sync (warm):          %8.1f us\n", launch_sync_us(reinterpret_cast<void*>(&main_tiny)));

  std::printf("\n== A. first use by size (cudaFuncGetAttributes = load, no launch)\n");
  // One call per statement: the order of evaluation of a call's arguments is unspecified.
  {
    const double a1 = attr_us(probe_s1_tiny()), a2 = attr_us(probe_s1_tiny()), l = launch_sync_us(probe_s1_tiny());
    std::printf("s1 (1 kernel)   attributes first %8.1f us, again %6.1f us; launch+sync after %6.1f us\n", a1, a2, l);
    const double f = launch_sync_us(probe_s2_tiny()), g = launch_sync_us(probe_s2_tiny());
    std::printf("s2 (1 kernel)   first launch+sync %8.1f us, second %6.1f us\n", f, g);
    const double m1t = attr_us(probe_m1_tiny()), m1f = attr_us(probe_m1_filler());
    std::printf("m1 (41 kernels) attributes first %8.1f us; another kernel of it %6.1f us\n", m1t, m1f);
    const double m2a = launch_sync_us(probe_m2_tiny()), m2b = launch_sync_us(probe_m2_tiny());
    std::printf("m2 (41 kernels) first launch+sync %8.1f us, second %6.1f us\n", m2a, m2b);
    const double b1t = attr_us(probe_b1_tiny()), b1f = attr_us(probe_b1_filler());
    std::printf("b1 (201 kernels) attributes first %8.1f us; another kernel of it %6.1f us\n", b1t, b1f);
    const double b2a = launch_sync_us(probe_b2_tiny()), b2b = launch_sync_us(probe_b2_tiny());
    std::printf("b2 (201 kernels) first launch+sync %8.1f us, second %6.1f us\n", b2a, b2b);
  }

  std::printf("\n== B. first use while the GPU runs a 3 ms kernel\n");
  {
    int clock_khz = 0;
    check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "clock");
    const long long cycles = static_cast<long long>(clock_khz) * 3;  // 3 ms
    spin<<<1, 1>>>(cycles);
    const auto t0 = clk::now();
    const double a = attr_us(probe_s3_tiny());
    void* args[] = {&g_buf};
    const auto t1 = clk::now();
    check(cudaLaunchKernel(probe_s4_tiny(), dim3(1), dim3(32), args, 0, nullptr), "launch");
    const auto t2 = clk::now();
    check(cudaStreamSynchronize(nullptr), "sync");
    std::printf("s3 attributes %8.1f us (GPU busy); s4 first launch call %8.1f us (GPU busy); the 3 ms kernel ended %8.1f us after\n", a,
                us(t1, t2), us(t0, clk::now()));
  }

  std::printf("\n== C. a loader thread while this thread issues small kernels (4000 launches, a sync every 8)\n");
  const int iters = 4000;
  product_loop(iters, -1, nullptr);
  const auto base = product_loop(iters, -1, nullptr);
  const double bm = median(base);
  report_loop("no loader (baseline)", base, bm, 0);
  report_loop("no loader (again)", product_loop(iters, -1, nullptr), bm, 0);
  with_loader("loader: small module bg1", probe_bg1_tiny(), bm, iters);
  with_loader("loader: 201-kernel module bgb", probe_bgb_tiny(), bm, iters);
  {
    const auto t = product_loop(iters / 2, -1, nullptr);
    const double inline_load = attr_us(probe_bg2_tiny());
    const auto t2 = product_loop(iters / 2, -1, nullptr);
    std::vector<double> all(t);
    all.push_back(inline_load);
    all.insert(all.end(), t2.begin(), t2.end());
    report_loop("same thread: small module bg2 in the loop", all, bm, inline_load);
  }

  std::printf("\n== D. a loader thread while this thread waits for a 2 ms kernel\n");
  {
    int clock_khz = 0;
    check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "clock");
    const long long cycles = static_cast<long long>(clock_khz) * 2;
    spin<<<1, 1>>>(cycles);
    check(cudaStreamSynchronize(nullptr), "sync");
    auto t0 = clk::now();
    spin<<<1, 1>>>(cycles);
    check(cudaStreamSynchronize(nullptr), "sync");
    const double alone = us(t0, clk::now());
    std::atomic<int> go{0};
    double loader = 0;
    std::thread th([&] {
      while (go.load() == 0) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      loader = attr_us(probe_bg3_tiny());
    });
    t0 = clk::now();
    spin<<<1, 1>>>(cycles);
    go.store(1);
    check(cudaStreamSynchronize(nullptr), "sync");
    const double with = us(t0, clk::now());
    th.join();
    std::printf("2 ms kernel + sync alone %8.1f us; with a loader thread loading bg3 during the wait %8.1f us (loader %8.1f us)\n", alone,
                with, loader);
  }
  const double e5 = attr_us(probe_s5_tiny()), e6 = launch_sync_us(probe_s6_tiny());
  std::printf("\n== E. s5 / s6 after all that: attributes %8.1f us, first launch+sync %8.1f us\n", e5, e6);
  return 0;
}
