// Experiment: what one product costs the host, and what online refinement adds to it.
//
// A short solve of a small matrix is host-bound: the device idles while the host issues the next product,
// so every microsecond the library spends around cusparseSpMV or its own kernel is a microsecond of the
// solve. This tool builds the same matrix six ways (cuSPARSE CSR forced and the runtime's own choice, each
// with and without online refinement, i.e. the event timing of sampled products and their read-back; and
// cuSPARSE CSR timing every product or none after the first 16) and times, in interleaved rounds:
//   call: host time of one apply() (steady clock around the call, median over the round's products);
//   free: products issued back to back, wall time per product (the device drains at the end);
//   sync: each product followed by a stream synchronisation (a Krylov iteration's dot product), wall time per
//         product.
// Built by CMake as aijp_host_cost (bench/CMakeLists.txt).
#include "../tool_support.hpp"

#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/online.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

const char* const aijp::bench::tool_name = "aijp_host_cost";

namespace {

using clock_type = std::chrono::steady_clock;

double us_between(clock_type::time_point a, clock_type::time_point b)
{
  return std::chrono::duration<double, std::micro>(b - a).count();
}

using aijp::online::median;

struct variant {
  std::string name;
  bool online;
  std::unique_ptr<aijp::gpu_matrix<double>> m;
  std::vector<double> call_us, free_us, sync_us;  // one value per round
};

void usage()
{
  std::printf(
      "Usage: aijp_host_cost [options] [MATRIX]\n\n"
      "Host cost of one product: MATRIX (a Matrix Market file or gen:SPEC; default gen:lap7:16x16x16) is built\n"
      "six ways: cuSPARSE CSR forced and the runtime's own plan, each with online refinement off and on (event\n"
      "timing of sampled products, read back later), and cuSPARSE CSR with online refinement timing every product\n"
      "('online/1') and none after the first 16 ('online/0'). After a warm-up that lets online refinement finish its\n"
      "exploration, each round times every variant, in a rotated order:\n"
      "  call  host time of one apply() (median over the round's products)\n"
      "  free  wall time per product, products issued back to back\n"
      "  sync  wall time per product, each followed by cudaStreamSynchronize (a Krylov iteration's dot product)\n"
      "and the table gives each variant's median over the rounds and its ratio to cuSPARSE CSR without online\n"
      "refinement (the work PETSc's aijcusparse does per product). Pin the process to one core (taskset) for\n"
      "stable numbers.\n\n"
      "Options:\n"
      "  --products N  products per variant per round and mode (default 2000)\n"
      "  --rounds R    interleaved rounds (default 9)\n"
      "  --warmup N    synchronised products per variant before the rounds (default 3000)\n"
      "  --help        this text\n");
}

}  // namespace

int main(int argc, char** argv)
{
  using namespace aijp;
  using bench::die;
  int products = 2000, rounds = 9, warmup = 3000;
  std::string input = "gen:lap7:16x16x16";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--help") {
      usage();
      return 0;
    } else if (arg == "--products") {
      products = bench::parse_int(arg, next, 10);
      ++i;
    } else if (arg == "--rounds") {
      rounds = bench::parse_int(arg, next, 1);
      ++i;
    } else if (arg == "--warmup") {
      warmup = bench::parse_int(arg, next, 0);
      ++i;
    } else if (!arg.empty() && arg[0] == '-') {
      die("unknown option " + arg + " (see --help)");
    } else {
      input = arg;
    }
  }
  bench::input_matrix in;
  try {
    in = bench::load_input(input);
  } catch (const std::exception& e) {
    die(input + ": " + e.what());
  }
  const auto& a = in.a;

  cudaStream_t s = nullptr;
  AIJP_TOOL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double *dx = nullptr, *dy = nullptr;
  AIJP_TOOL_CUDA(cudaMalloc(&dx, std::max<size_type>(a.cols, 1) * sizeof(double)));
  AIJP_TOOL_CUDA(cudaMalloc(&dy, std::max<size_type>(a.rows, 1) * sizeof(double)));
  {
    std::vector<double> x(a.cols, 1.0);
    AIJP_TOOL_CUDA(cudaMemcpy(dx, x.data(), a.cols * sizeof(double), cudaMemcpyHostToDevice));
  }

  std::unique_ptr<context> plain, online;  // before the plans, which refer to them
  std::vector<variant> vs;
  try {
    context_options co;
    co.use_cache = false;
    plain = std::make_unique<context>(co);
    co.online = true;
    online = std::make_unique<context>(co);
    // sample_every 1 and 0 split online refinement's cost into that of a timed product (two event records,
    // the read-back) and that of the untimed ones (the bookkeeping around every product).
    struct config {
      const char* name;
      bool forced, on;
      int sample_every;
    };
    const config configs[] = {{"cusparse_csr", true, false, 8},
                              {"cusparse_csr, online", true, true, 8},
                              {"cusparse_csr, online/1", true, true, 1},
                              {"cusparse_csr, online/0", true, true, 0},
                              {"own plan", false, false, 8},
                              {"own plan, online", false, true, 8}};
    for (const auto& c : configs) {
      variant v{c.name, c.on, nullptr, {}, {}, {}};
      plan_options o;
      if (c.forced) o.forced = format_id::cusparse_csr;
      o.online = c.on;
      o.online_policy.sample_every = c.sample_every;
      if (c.sample_every != 8) o.online_policy.sample_every_max = c.sample_every;  // no thinning: every product / none
      v.m = std::make_unique<gpu_matrix<double>>(c.on ? *online : *plain, a.view(), o, s);
      vs.push_back(std::move(v));
    }
  } catch (const std::exception& e) {
    die(e.what());
  }
  std::printf("# %s: %lld x %lld, %lld nonzeros; %s\n", in.name.c_str(), (long long)a.rows, (long long)a.cols, (long long)a.nnz(),
              plain->device().to_string().c_str());
  std::printf("# %d rounds x %d products per variant and mode, after %d synchronised products per variant\n", rounds, products, warmup);

  try {
    for (auto& v : vs) {
      for (int k = 0; k < warmup; ++k) {
        v.m->apply(1.0, dx, 0.0, dy, s);
        AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
      }
      v.m->online_sync();
    }
    std::vector<double> per_call(static_cast<std::size_t>(products));
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t j = 0; j < vs.size(); ++j) {
        auto& v = vs[(j + static_cast<std::size_t>(r)) % vs.size()];
        AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
        // call: the host time of each apply(), the device kept draining behind it (synchronised every 64
        // products so that the queue never fills and blocks a launch).
        for (int k = 0; k < products; ++k) {
          const auto t0 = clock_type::now();
          v.m->apply(1.0, dx, 0.0, dy, s);
          per_call[static_cast<std::size_t>(k)] = us_between(t0, clock_type::now());
          if (k % 64 == 63) AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
        }
        AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
        v.call_us.push_back(median(per_call));
        auto t0 = clock_type::now();
        for (int k = 0; k < products; ++k) v.m->apply(1.0, dx, 0.0, dy, s);
        AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
        v.free_us.push_back(us_between(t0, clock_type::now()) / products);
        t0 = clock_type::now();
        for (int k = 0; k < products; ++k) {
          v.m->apply(1.0, dx, 0.0, dy, s);
          AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
        }
        v.sync_us.push_back(us_between(t0, clock_type::now()) / products);
      }
    }
    for (auto& v : vs) v.m->online_sync();
  } catch (const std::exception& e) {
    die(e.what());
  }

  const auto& base = vs.front();
  const double bc = median(base.call_us), bf = median(base.free_us), bs = median(base.sync_us);
  std::printf("%-22s %-14s %9s %9s %9s %9s %9s %9s %9s\n", "variant", "plan", "call us", "free us", "sync us", "call x", "free x",
              "sync x", "sync min");
  for (const auto& v : vs) {
    const double c = median(v.call_us), f = median(v.free_us), y = median(v.sync_us);
    std::printf("%-22s %-14s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", v.name.c_str(), v.m->report().plan.c_str(), c, f, y, c / bc,
                f / bf, y / bs, *std::min_element(v.sync_us.begin(), v.sync_us.end()));
  }
  for (const auto& v : vs) {
    if (!v.online) continue;
    const auto& r = v.m->report();
    std::printf("# %s: %d timed products, measured %.2f us (predicted %.2f us)\n", v.name.c_str(), r.measured_samples, r.measured_us,
                r.predicted_us);
    for (const auto& line : r.refinement) std::printf("#   %s\n", line.c_str());
  }
  // What a timed product is made of: the host time of each CUDA call the timer makes (median of 2000 calls,
  // the stream idle, every event complete).
  {
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    AIJP_TOOL_CUDA(cudaEventCreate(&e0));
    AIJP_TOOL_CUDA(cudaEventCreate(&e1));
    AIJP_TOOL_CUDA(cudaEventRecord(e0, s));
    AIJP_TOOL_CUDA(cudaEventRecord(e1, s));
    AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
    const auto cost = [&](const char* what, auto&& call) {
      std::vector<double> t(2000);
      for (auto& v : t) {
        const auto t0 = clock_type::now();
        call();
        v = us_between(t0, clock_type::now());
      }
      AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
      std::printf("# host time of %-34s %7.3f us (median of %zu)\n", what, median(t), t.size());
    };
    cost("cudaEventRecord (timing event)", [&] { AIJP_TOOL_CUDA(cudaEventRecord(e1, s)); });
    cost("cudaStreamIsCapturing", [&] {
      cudaStreamCaptureStatus c;
      AIJP_TOOL_CUDA(cudaStreamIsCapturing(s, &c));
    });
    AIJP_TOOL_CUDA(cudaEventRecord(e1, s));
    AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
    cost("cudaEventQuery (complete)", [&] { AIJP_TOOL_CUDA(cudaEventQuery(e1)); });
    cost("cudaEventElapsedTime", [&] {
      float ms = 0;
      AIJP_TOOL_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    });
    cost("cudaPeekAtLastError", [&] { (void)cudaPeekAtLastError(); });
    cost("apply (cusparse_csr, online off)", [&] { vs.front().m->apply(1.0, dx, 0.0, dy, s); });
    AIJP_TOOL_CUDA(cudaEventDestroy(e0));
    AIJP_TOOL_CUDA(cudaEventDestroy(e1));
  }
  vs.clear();
  AIJP_TOOL_CUDA(cudaFree(dx));
  AIJP_TOOL_CUDA(cudaFree(dy));
  AIJP_TOOL_CUDA(cudaStreamDestroy(s));
  return 0;
}
