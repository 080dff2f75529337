// What one CUDA call (or host busy time) inserted into a launch-bound solve costs the solve.
//
// A "solve" imitates a short GMRES solve on a small matrix: `iters` iterations of `launches` tiny kernels
// and an 8-byte read-back that waits (a dot product's result), on one stream. Every `every`-th solve gets
// one insertion at the middle iteration, right after its first launch; its time is paired with the plain
// solve just before it. Prints, per insertion, the median over the pairs of (solve with it - solve without)
// in microseconds, and the insertion's own host time.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 call_cost.cu -o call_cost
// Usage: call_cost [pairs=1500] [every=2]
#include "experiment_check.hpp"

#include <cuda_runtime.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using clk = std::chrono::steady_clock;
static double us_since(clk::time_point t0) { return std::chrono::duration<double, std::micro>(clk::now() - t0).count(); }

__global__ void tiny(double* y, int n)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * 0.5 + 1.0;
}

// A pass over a 2003-row matrix's row pointers, as the statistics pass does: about one wave of work.
__global__ void pass(const int* row_ptr, int rows, unsigned long long* out)
{
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  int len = r < rows ? row_ptr[r + 1] - row_ptr[r] : 0;
  for (int o = 16; o > 0; o /= 2) len = max(len, __shfl_down_sync(0xffffffffu, len, o));
  if ((threadIdx.x & 31) == 0 && len > 0) atomicMax(out, static_cast<unsigned long long>(len));
}

int main(int argc, char** argv)
{
  const int pairs = argc > 1 ? std::atoi(argv[1]) : 1500;
  const int every = argc > 2 ? std::atoi(argv[2]) : 2;
  const int iters = 10, launches = 8, n = 4096, rows = 2003;
  cudaStream_t s, side_low, side_def;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int least = 0, greatest = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK(cudaStreamCreateWithPriority(&side_low, cudaStreamNonBlocking, least));
  CHECK(cudaStreamCreateWithFlags(&side_def, cudaStreamNonBlocking));
  double* y;
  CHECK(cudaMalloc(&y, n * sizeof(double)));
  CHECK(cudaMemset(y, 0, n * sizeof(double)));
  int* row_ptr;
  std::vector<int> h_rp(rows + 1);
  for (int r = 0; r <= rows; ++r) h_rp[r] = 42 * r;
  CHECK(cudaMalloc(&row_ptr, (rows + 1) * sizeof(int)));
  CHECK(cudaMemcpy(row_ptr, h_rp.data(), (rows + 1) * sizeof(int), cudaMemcpyHostToDevice));
  unsigned long long* d_out;
  CHECK(cudaMalloc(&d_out, 64));
  double* pinned;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 64, cudaHostAllocDefault));
  unsigned long long* mapped;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&mapped), 64, cudaHostAllocMapped));
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  std::vector<char> junk(1 << 20);

  struct insertion {
    std::string name;
    std::function<void()> f;
  };
  const std::vector<insertion> ins = {
      {"nothing", [] {}},
      {"spin 5 us", [] { const auto t = clk::now(); while (us_since(t) < 5) {} }},
      {"spin 10 us", [] { const auto t = clk::now(); while (us_since(t) < 10) {} }},
      {"spin 10 us touching 1 MiB", [&] { const auto t = clk::now(); std::size_t k = 0; while (us_since(t) < 10) for (int i = 0; i < 256; ++i, k += 64) junk[k % junk.size()]++; }},
      {"tiny kernel, products' stream", [&] { tiny<<<16, 256, 0, s>>>(y, n); }},
      {"tiny kernel, side stream (lowest priority)", [&] { tiny<<<16, 256, 0, side_low>>>(y + 0, n); }},
      {"tiny kernel, side stream (default priority)", [&] { tiny<<<16, 256, 0, side_def>>>(y, n); }},
      {"row pass, products' stream", [&] { pass<<<(rows + 255) / 256, 256, 0, s>>>(row_ptr, rows, d_out); }},
      {"row pass, side stream (lowest)", [&] { pass<<<(rows + 255) / 256, 256, 0, side_low>>>(row_ptr, rows, d_out); }},
      {"row pass writing mapped memory, side", [&] { pass<<<(rows + 255) / 256, 256, 0, side_low>>>(row_ptr, rows, mapped); }},
      {"memset 8 B, products' stream", [&] { CHECK(cudaMemsetAsync(d_out, 0, 8, s)); }},
      {"memset 8 B, side stream", [&] { CHECK(cudaMemsetAsync(d_out, 0, 8, side_low)); }},
      {"copy 8 B D2H pinned, side stream", [&] { CHECK(cudaMemcpyAsync(pinned + 1, d_out, 8, cudaMemcpyDeviceToHost, side_low)); }},
      {"event record, side stream", [&] { CHECK(cudaEventRecord(ev, side_low)); }},
      {"event query", [&] { (void)cudaEventQuery(ev); }},
      {"getrusage(RUSAGE_THREAD) twice", [] { rusage u{}; getrusage(RUSAGE_THREAD, &u); getrusage(RUSAGE_THREAD, &u); }},
      {"steady_clock::now() 8 times", [] { for (int i = 0; i < 8; ++i) (void)clk::now(); }},
      {"read a mapped flag", [&] { volatile unsigned long long v = *static_cast<volatile unsigned long long*>(mapped); (void)v; }},
  };

  double insert_us = 0;
  auto solve = [&](const insertion* in) {
    const auto t0 = clk::now();
    for (int it = 0; it < iters; ++it) {
      for (int l = 0; l < launches; ++l) {
        tiny<<<16, 256, 0, s>>>(y, n);
        if (l == 0 && in && it == iters / 2) {
          const auto t1 = clk::now();
          in->f();
          insert_us = us_since(t1);
        }
      }
      CHECK(cudaMemcpyAsync(pinned, y, 8, cudaMemcpyDeviceToHost, s));
      CHECK(cudaStreamSynchronize(s));
    }
    return us_since(t0);
  };
  for (int w = 0; w < 200; ++w) solve(nullptr);
  for (const auto& in : ins) in.f();
  CHECK(cudaDeviceSynchronize());
  std::printf("# every %d-th solve has the insertion; %d pairs each; solve = %d iterations of %d launches and a waited 8-byte read-back\n",
              every, pairs, iters, launches);
  std::printf("%-46s %12s %14s %12s\n", "insertion", "solve us", "excess us", "own host us");
  for (const auto& in : ins) {
    std::vector<double> excess, own, base;
    for (int p = 0; p < pairs; ++p) {
      double plain = 0;
      for (int k = 0; k < every - 1; ++k) plain = solve(nullptr);
      const double with = solve(&in);
      excess.push_back(with - plain);
      own.push_back(insert_us);
      base.push_back(plain);
      CHECK(cudaStreamSynchronize(side_low));
      CHECK(cudaStreamSynchronize(side_def));
    }
    auto med = [](std::vector<double> v) { std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end()); return v[v.size() / 2]; };
    std::printf("%-46s %12.1f %14.2f %12.2f\n", in.name.c_str(), med(base), med(excess), med(own));
  }
  return 0;
}
