// Experiment: host time of the first and the second conversion and product of each format in one process
// (CUDA lazy loading: a kernel's module is loaded at its first use, inside the conversion or product that
// needs it). Built by CMake as aijp_first_use_cost (bench/CMakeLists.txt); run it with
// CUDA_MODULE_LOADING=LAZY (the default) and =EAGER to separate the loading from the rest.
//   aijp_first_use_cost [generator spec, default lap7:32x32x32]
#include <aijpredict/generators.hpp>
#include <aijpredict/gpu_matrix.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {
double us_since(std::chrono::steady_clock::time_point t0)
{
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv)
{
  using namespace aijp;
  if (argc > 1 && std::string(argv[1]) == "--help") {
    std::printf("Usage: aijp_first_use_cost [GENERATOR_SPEC]\nHost time of the first and second forced conversion and product per format.\n");
    return 0;
  }
  const std::string spec = argc > 1 ? argv[1] : "lap7:32x32x32";
  const auto a = gen::from_spec(spec);
  context_options co;
  co.use_cache = false;
  context ctx(co);
  cudaStream_t s = nullptr;
  std::vector<double> x(a.cols, 1.0);
  double *dx = nullptr, *dy = nullptr;
  cudaMalloc(&dx, a.cols * sizeof(double));
  cudaMalloc(&dy, a.rows * sizeof(double));
  cudaMemcpy(dx, x.data(), a.cols * sizeof(double), cudaMemcpyHostToDevice);
  plan_options none;
  none.analyze = false;
  gpu_matrix<double> m(ctx, a.view(), none, s);
  m.apply(1.0, dx, 0.0, dy, s);
  cudaDeviceSynchronize();
  std::printf("%s: %lld rows, %lld nonzeros\n%-18s %12s %12s %12s %12s\n", spec.c_str(), (long long)a.rows, (long long)a.nnz(),
              "format", "build1 us", "apply1 us", "build2 us", "apply2 us");
  for (int i = 0; i < format_count; ++i) {
    const auto f = static_cast<format_id>(i);
    double t[4];
    for (int pass = 0; pass < 2; ++pass) {
      plan_options o;
      o.forced = f;
      o.online = false;
      o.partition = false;
      cudaDeviceSynchronize();
      auto t0 = std::chrono::steady_clock::now();
      m.analyze(ctx, o, s);
      t[2 * pass] = us_since(t0);
      cudaDeviceSynchronize();
      t0 = std::chrono::steady_clock::now();
      m.apply(1.0, dx, 0.0, dy, s);
      t[2 * pass + 1] = us_since(t0);
      cudaDeviceSynchronize();
    }
    std::printf("%-18s %12.1f %12.1f %12.1f %12.1f   (%s)\n", format_name(f), t[0], t[1], t[2], t[3], format_name(m.format()));
  }
  cudaFree(dx);
  cudaFree(dy);
  return 0;
}
