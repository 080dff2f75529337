// Experiment: what the analysis' device passes cost a solve, each of them alone.
//
// A staged analysis (gpu_matrix.hpp, background_mode::staged) issues its passes on the products' stream, one
// per part, and paces the parts by their host time only: their device time lands in the stream between two
// products, where a Krylov solver waits for it at its next dot product. This tool times each pass on the
// device (CUDA events around its launches on an otherwise idle stream; median over the rounds) and the host
// time of issuing it:
//   stats 1     the per-warp pass (N_iter, longest row), its read-back
//   histogram   the row-length histogram (and the long rows' list), its read-back
//   locality    both locality samplers, their read-back
// and, as the yardstick, one cuSPARSE CSR product (the runtime's forced plan) timed the same way.
// Built by CMake as aijp_analysis_cost (bench/CMakeLists.txt).
#include "../tool_support.hpp"

#include "analysis_jobs.hpp"

#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/online.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

const char* const aijp::bench::tool_name = "aijp_analysis_cost";

namespace {

using clock_type = std::chrono::steady_clock;

double us_since(clock_type::time_point t0) { return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count(); }

void usage()
{
  std::printf(
      "Usage: aijp_analysis_cost [options] MATRIX...\n\n"
      "Device and host time of each device pass of the runtime's analysis on each MATRIX (a Matrix Market file\n"
      "or gen:SPEC): the statistics' per-warp pass, the row-length histogram, the locality samplers; and of one\n"
      "cuSPARSE CSR product of the same matrix for comparison. Each is issued alone on an idle stream between\n"
      "two events; the table gives the median over the rounds of the device time (event to event) and of the\n"
      "host time of issuing it.\n\n"
      "Options:\n"
      "  --rounds R    rounds (default 21; the first is a warm-up and not counted)\n"
      "  --help        this text\n");
}

struct timed {
  std::vector<double> device_us, host_us;
};

}  // namespace

int main(int argc, char** argv)
{
  using namespace aijp;
  using bench::die;
  int rounds = 21;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--help") {
      usage();
      return 0;
    } else if (arg == "--rounds") {
      rounds = bench::parse_int(arg, next, 2);
      ++i;
    } else if (!arg.empty() && arg[0] == '-') {
      die("unknown option " + arg + " (see --help)");
    } else {
      inputs.push_back(arg);
    }
  }
  if (inputs.empty()) die("no matrix given (see --help)");

  cudaStream_t s = nullptr;
  AIJP_TOOL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  AIJP_TOOL_CUDA(cudaEventCreate(&e0));
  AIJP_TOOL_CUDA(cudaEventCreate(&e1));
  context_options co;
  co.use_cache = false;
  context ctx(co);
  std::printf("%-44s %10s %10s %12s %12s %12s %12s %12s %12s %12s %12s\n", "matrix", "rows", "nnz", "spmv dev us", "spmv host us",
              "stats1 dev", "stats1 host", "hist dev", "hist host", "local dev", "local host");
  for (const auto& input : inputs) {
    bench::input_matrix in;
    try {
      in = bench::load_input(input);
    } catch (const std::exception& e) {
      die(input + ": " + e.what());
    }
    const auto& a = in.a;
    plan_options o;
    o.forced = format_id::cusparse_csr;
    o.online = false;
    gpu_matrix<double> m(ctx, a.view(), o, s);
    index_type *d_row_ptr = nullptr, *d_col = nullptr;
    double *dx = nullptr, *dy = nullptr;
    AIJP_TOOL_CUDA(cudaMalloc(&d_row_ptr, (a.rows + 1) * sizeof(index_type)));
    AIJP_TOOL_CUDA(cudaMalloc(&d_col, std::max<size_type>(a.nnz(), 1) * sizeof(index_type)));
    AIJP_TOOL_CUDA(cudaMalloc(&dx, std::max<size_type>(a.cols, 1) * sizeof(double)));
    AIJP_TOOL_CUDA(cudaMalloc(&dy, std::max<size_type>(a.rows, 1) * sizeof(double)));
    AIJP_TOOL_CUDA(cudaMemcpy(d_row_ptr, a.row_ptr.data(), (a.rows + 1) * sizeof(index_type), cudaMemcpyHostToDevice));
    AIJP_TOOL_CUDA(cudaMemcpy(d_col, a.col_idx.data(), a.nnz() * sizeof(index_type), cudaMemcpyHostToDevice));
    AIJP_TOOL_CUDA(cudaMemset(dx, 0, a.cols * sizeof(double)));
    timed spmv, stats1, hist, local;
    // One piece of work between two events on the idle stream; `issue` returns once it is queued.
    const auto time = [&](timed& t, bool count, auto&& issue, auto&& finish) {
      AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
      AIJP_TOOL_CUDA(cudaEventRecord(e0, s));
      const auto t0 = clock_type::now();
      issue();
      const double host = us_since(t0);
      AIJP_TOOL_CUDA(cudaEventRecord(e1, s));
      AIJP_TOOL_CUDA(cudaEventSynchronize(e1));
      finish();
      float ms = 0;
      AIJP_TOOL_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      if (count) {
        t.device_us.push_back(1e3 * ms);
        t.host_us.push_back(host);
      }
    };
    const auto nothing = [] {};
    try {
      for (int r = 0; r < rounds; ++r) {
        const bool count = r > 0;
        time(spmv, count, [&] { m.apply(1.0, dx, 0.0, dy, s); }, nothing);
        detail::row_stats_job job;
        time(stats1, count, [&] { job.start(a.rows, a.cols, d_row_ptr, s); }, nothing);
        // The first poll finds the pass done and issues the histogram (the staged part 'gathering: histogram').
        time(hist, count, [&] {
          if (job.phase() == 1 && job.poll(s)) die("the statistics finished without a histogram pass");
        }, [&] { job.wait(s); });
        detail::locality_job loc;
        time(local, count, [&] { loc.start(a.rows, a.cols, d_row_ptr, d_col, sizeof(double), s); }, [&] { loc.wait(); });
      }
    } catch (const std::exception& e) {
      die(input + ": " + e.what());
    }
    const auto med = [](const std::vector<double>& v) { return online::median(v); };
    std::printf("%-44s %10lld %10lld %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f\n", input.c_str(), (long long)a.rows,
                (long long)a.nnz(), med(spmv.device_us), med(spmv.host_us), med(stats1.device_us), med(stats1.host_us),
                med(hist.device_us), med(hist.host_us), med(local.device_us), med(local.host_us));
    std::fflush(stdout);
    AIJP_TOOL_CUDA(cudaFree(d_row_ptr));
    AIJP_TOOL_CUDA(cudaFree(d_col));
    AIJP_TOOL_CUDA(cudaFree(dx));
    AIJP_TOOL_CUDA(cudaFree(dy));
  }
  AIJP_TOOL_CUDA(cudaEventDestroy(e0));
  AIJP_TOOL_CUDA(cudaEventDestroy(e1));
  AIJP_TOOL_CUDA(cudaStreamDestroy(s));
  return 0;
}
