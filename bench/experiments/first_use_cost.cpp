// Experiment: host time of the first and the second conversion and product of each format in one process
// (CUDA lazy loading: a kernel's module is loaded at its first use, inside the conversion or product that
// needs it). Built by CMake as aijp_first_use_cost (bench/CMakeLists.txt); run it with
// CUDA_MODULE_LOADING=LAZY (the default) and =EAGER to separate the loading from the rest, and with and
// without the context's module preload (context_options::preload, on by default).
//   aijp_first_use_cost [--no-preload] [generator spec, default lap7:32x32x32]
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
  bool preload = true;
  std::string spec = "lap7:32x32x32";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") {
      std::printf("Usage: aijp_first_use_cost [--no-preload] [GENERATOR_SPEC]\nHost time of the first and second forced conversion and "
                  "product per format.\n  --no-preload  the context does not load the library's modules at its creation\n");
      return 0;
    }
    if (arg == "--no-preload") {
      preload = false;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "aijp_first_use_cost: unknown option %s (see --help)\n", arg.c_str());
      return 2;
    } else {
      spec = arg;
    }
  }
  const auto a = gen::from_spec(spec);
  context_options co;
  co.use_cache = false;
  co.preload = preload ? kernel_preload::double_values : kernel_preload::none;
  const auto t_ctx = std::chrono::steady_clock::now();
  context ctx(co);
  const kernel_preload_report& pr = ctx.preload();
  std::printf("context made in %.3f ms; preload: %d modules, %d functions (%d loaded now) in %.3f ms%s%s\n", us_since(t_ctx) * 1e-3, pr.modules,
              pr.functions, pr.loaded_now, pr.ms, pr.note.empty() ? "" : "; ", pr.note.c_str());
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
