// aijp_bench: SpMV time of every storage format on Matrix Market files and generated matrices, through the
// same executor production uses (aijp::gpu_matrix with a forced format), against cuSPARSE CSR ALG1 measured
// in the same run. Prints a table and writes JSON.
#include <aijpredict/generators.hpp>
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/matrix_market.hpp>
#include <aijpredict/measure.hpp>
#include <aijpredict/planner.hpp>
#include <aijpredict/reference.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "interleaved_rounds.hpp"
#include "tool_support.hpp"

const char* const aijp::bench::tool_name = "aijp_bench";

namespace {

using aijp::bench::die;
using aijp::bench::parse_int;


const char* usage =
    "Usage: aijp_bench [options] MATRIX...\n"
    "\n"
    "Times y = A x for every storage format (or those of --formats) on each MATRIX, a Matrix Market file\n"
    "(.mtx or .mtx.gz) or a generator spec (gen:SPEC, see below). For each format it reports the median of\n"
    "timed back-to-back batches (CUDA events, after warm-up; --reps / 5 batches, each at least 0.2 ms, the\n"
    "whole measurement capped near 0.3 s so pathological formats cost seconds), the effective bandwidth under the minimal-bytes\n"
    "model (each matrix entry, row pointer, x and y entry moved once), that bandwidth as a fraction of the\n"
    "device's measured streaming read bandwidth, the speedup over cuSPARSE CSR ALG1 measured in the same\n"
    "run, and the conversion time (CSR -> format, on the GPU) in units of one SpMV of that format.\n"
    "Every format's result is checked against the host reference before timing.\n"
    "\n"
    "The runtime's own plan (default options: automatic selection, row-partitioned when the planner's\n"
    "split is predicted to pay) is checked and timed the same way and printed as the 'plan' line: its\n"
    "blocks, its measured time against the best single format measured above, the planner's predicted\n"
    "times and planning time. When the planner proposes a split that the runtime does not take (gain\n"
    "below the margin), the proposal is timed too ('proposed' line), so the margin can be judged.\n"
    "With --online N the runtime's plan is also built as the PETSc plugin builds it, with online refinement\n"
    "(a second context, cache disabled: nothing is written), run for N products synchronised one by one as\n"
    "a Krylov iteration's dot product does, and timed again ('online' line): the plan it ended with after\n"
    "bounded exploration (a split that does not prove its predicted saving is compared with the single\n"
    "format once), and what refinement did. Corrections carry over from one matrix to the next, as in one\n"
    "application process.\n"
    "\n"
    "Head to head (--rounds R, default 9; not with --flush-l2): the sweep above times each format once, in\n"
    "turn, so a disturbance of the machine during one format's turn moves that format's number alone. The\n"
    "plan, the online plan and the four fastest single formats of the sweep (with cuSPARSE CSR always) are\n"
    "then built again side by side and timed in R interleaved rounds (each round times every contender in a\n"
    "rotated order: warm-up, then 3 batches of at least 1 ms); each contender's time is the median over the\n"
    "rounds. A plan that runs the same kernels as a single format (the same plan text) is that contender.\n"
    "The 'h2h' line gives the plan's and the online plan's time against the fastest single contender, and\n"
    "the summary at the end the geometric means over the matrices of both the sweep's and the head-to-head\n"
    "ratios (best single format's time / plan's time: above 1, the plan is faster), and the same ratio from\n"
    "each contender's fastest round: a disturbance of the (shared) machine only adds time, so where the\n"
    "median and the fastest round disagree, a disturbance, not the plan, made the difference.\n"
    "\n"
    "Options:\n"
    "  --formats LIST   comma-separated formats (default: all)\n"
    "  --reps N         timed repetitions: N / 5 batches (default 50; at least 5); with --flush-l2, N single runs\n"
    "  --warmup N       untimed repetitions first (default 10)\n"
    "  --flush-l2       write a buffer of twice the L2 size before each repetition (cold-cache timing;\n"
    "                   each repetition is then timed on its own)\n"
    "  --float          single precision values (default double)\n"
    "  --json FILE      write the results as JSON to FILE\n"
    "  --online N       also time the plan after N products with online refinement (see above; N >= 1)\n"
    "  --rounds R       interleaved head-to-head rounds (default 9; 0: no head-to-head)\n"
    "  --plan PLAN      also time this forced partition, e.g. 'sell[0,32768)+coo[32768,65536)' (blocks\n"
    "                   must cover the matrix's rows; matrices of another size skip it)\n"
    "  --help           this text\n"
    "\n"
    "Generator specs (gen:SPEC):\n";

struct options {
  std::vector<std::string> inputs;
  std::vector<aijp::format_id> formats = aijp::all_formats();
  int reps = 50;
  int warmup = 10;
  bool flush_l2 = false;
  bool use_float = false;
  std::string json;
  std::string plan;
  int online_products = 0;
  int rounds = 9;
};

options parse(int argc, char** argv)
{
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      std::cout << usage << aijp::gen::spec_help() << "\n";
      std::exit(0);
    } else if (a == "--formats") {
      if (!next) die("--formats needs a list");
      try {
        o.formats = aijp::parse_format_list(next);
      } catch (const std::exception& e) {
        die(e.what());
      }
      ++i;
    } else if (a == "--reps") {
      o.reps = parse_int(a, next, 5);
      ++i;
    } else if (a == "--warmup") {
      o.warmup = parse_int(a, next, 0);
      ++i;
    } else if (a == "--json") {
      if (!next) die("--json needs a file name");
      o.json = next;
      ++i;
    } else if (a == "--plan") {
      if (!next) die("--plan needs a partition");
      try {
        (void)aijp::parse_partition_plan(next);
      } catch (const std::exception& e) {
        die(e.what());
      }
      o.plan = next;
      ++i;
    } else if (a == "--online") {
      o.online_products = parse_int(a, next, 1);
      ++i;
    } else if (a == "--rounds") {
      o.rounds = parse_int(a, next, 0);
      ++i;
    } else if (a == "--flush-l2") {
      o.flush_l2 = true;
    } else if (a == "--float") {
      o.use_float = true;
    } else if (!a.empty() && a[0] == '-') {
      die("unknown option '" + a + "' (see --help)");
    } else {
      o.inputs.push_back(a);
    }
  }
  if (o.inputs.empty()) die("no matrix given (see --help)");
  return o;
}

struct result {
  std::string format;
  bool ok = false;
  std::string error;
  double median_us = 0, min_us = 0, gbs = 0, frac_stream = 0, speedup = 0, conversion_ms = 0, conversion_spmvs = 0;
};

struct matrix_results {
  std::string name;
  aijp::row_stats stats;
  double x_locality = 0;        // x sectors per nonzero, row order (sampled by the runtime's analysis)
  aijp::sorted_locality sorted;  // the same and y's in length-sorted order
  double min_bytes = 0;
  std::string predicted;  // the runtime's automatic choice
  std::vector<result> formats;
  // The runtime's own plan (possibly row-partitioned) and the planner's numbers.
  result plan;
  bool partitioned = false;
  aijp::partition_plan proposed;  // the DP's proposal (blocks, predictions, planning time)
  result proposed_run;            // the proposal timed when it split but was not taken
  result forced_plan;             // --plan
  result online;                  // --online: the plan after that many products with online refinement
  std::string online_first;       // the plan it started from
  std::string online_refinement;  // what refinement did (report().refinement, joined)
  std::string best_single;
  double best_single_us = 0;
  // Head to head (--rounds): contenders timed in interleaved rounds.
  struct contender {
    std::string plan;
    bool single = false;
    std::string error;
    std::vector<double> rounds_us;
    double median_us = 0;
    double fastest_us = 0;  // fastest round
  };
  std::vector<contender> h2h;
  std::string h2h_best_single;
  double h2h_best_single_us = 0, h2h_plan_us = 0, h2h_online_us = 0;
  double h2h_fastest_single_us = 0, h2h_fastest_plan_us = 0, h2h_fastest_online_us = 0;  // by fastest round
};

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

__attribute__((noinline)) void flush(void* buf, size_t bytes, cudaStream_t s)
{
  AIJP_TOOL_CUDA(cudaMemsetAsync(buf, 0, bytes, s));
}

// Builds the plan, the online plan and the fastest single formats of the sweep side by side and times them in
// interleaved rounds (see the usage text); fills mr.h2h and the h2h_* numbers.
template <typename T>
void head_to_head(const aijp::context& ctx, const aijp::csr_matrix<T>& a, const options& o, const T* dx, T* dy,
                  cudaStream_t s, matrix_results& mr)
{
  using contender = matrix_results::contender;
  std::vector<const result*> singles;
  for (const auto& r : mr.formats) {
    if (r.ok) singles.push_back(&r);
  }
  std::sort(singles.begin(), singles.end(), [](const result* x, const result* y) { return x->median_us < y->median_us; });
  std::vector<contender> cs;
  const auto add = [&](const std::string& plan, bool single) {
    for (auto& c : cs) {
      if (c.plan == plan) {
        c.single = c.single || single;
        return;
      }
    }
    contender c;
    c.plan = plan;
    c.single = single;
    cs.push_back(c);
  };
  add(mr.plan.format, false);
  if (mr.online.ok) add(mr.online.format, false);
  for (size_t k = 0; k < singles.size() && k < 4; ++k) add(singles[k]->format, true);
  for (const result* r : singles) {
    if (r->format == "cusparse_csr") add(r->format, true);
  }

  std::vector<std::unique_ptr<aijp::gpu_matrix<T>>> built(cs.size());
  for (size_t k = 0; k < cs.size(); ++k) {
    try {
      aijp::plan_options po;
      if (cs[k].plan.find('[') != std::string::npos) po.forced_plan = aijp::parse_partition_plan(cs[k].plan);
      else po.forced = aijp::parse_format(cs[k].plan);
      built[k] = std::make_unique<aijp::gpu_matrix<T>>(ctx, a.view(), po, s);
      if (built[k]->report().plan != cs[k].plan) {
        throw std::runtime_error("rebuilt as " + built[k]->report().plan);
      }
    } catch (const std::exception& e) {
      cs[k].error = e.what();  // e.g. out of GPU memory with the other contenders resident
      built[k].reset();
    }
  }
  aijp::timing_options to;
  to.warmup = o.warmup;
  to.min_samples = 3;
  to.min_sample_ms = 1.0;
  to.max_total_ms = 100;
  auto rounds_us = aijp::bench::interleaved_rounds(built, o.rounds, dx, dy, s, to);
  built.clear();
  for (size_t k = 0; k < cs.size(); ++k) cs[k].rounds_us = std::move(rounds_us[k]);
  for (auto& c : cs) {
    if (c.rounds_us.empty()) continue;
    c.median_us = median(c.rounds_us);
    c.fastest_us = *std::min_element(c.rounds_us.begin(), c.rounds_us.end());
    if (c.single && (mr.h2h_best_single.empty() || c.median_us < mr.h2h_best_single_us)) {
      mr.h2h_best_single = c.plan;
      mr.h2h_best_single_us = c.median_us;
    }
    if (c.single && (mr.h2h_fastest_single_us == 0 || c.fastest_us < mr.h2h_fastest_single_us)) mr.h2h_fastest_single_us = c.fastest_us;
    if (c.plan == mr.plan.format) {
      mr.h2h_plan_us = c.median_us;
      mr.h2h_fastest_plan_us = c.fastest_us;
    }
    if (mr.online.ok && c.plan == mr.online.format) {
      mr.h2h_online_us = c.median_us;
      mr.h2h_fastest_online_us = c.fastest_us;
    }
  }
  mr.h2h = std::move(cs);
}

template <typename T>
matrix_results run_one(const aijp::context& ctx, const aijp::context* online_ctx, const std::string& name,
                       const aijp::csr_matrix<double>& a64, const options& o, void* flush_buf, size_t flush_bytes)
{
  const aijp::csr_matrix<T> a = aijp::value_cast<T>(a64);

  matrix_results mr;
  mr.name = name;
  const double vb = sizeof(T);
  mr.min_bytes = a.nnz() * (vb + 4) + (a.rows + 1) * 4.0 + a.cols * vb + a.rows * vb;

  std::vector<T> x(a.cols), yref(a.rows);
  for (aijp::size_type i = 0; i < a.cols; ++i) x[i] = T(1) + T(i % 7) / T(8);
  aijp::reference_spmv(a.view(), T(1), x.data(), T(0), yref.data());
  const auto bound = aijp::spmv_error_bounds(a.view(), T(1), x.data(), T(0), yref.data());
  T *dx = nullptr, *dy = nullptr;
  AIJP_TOOL_CUDA(cudaMalloc(reinterpret_cast<void**>(&dx), std::max<size_t>(1, x.size()) * sizeof(T)));
  AIJP_TOOL_CUDA(cudaMalloc(reinterpret_cast<void**>(&dy), std::max<size_t>(1, yref.size()) * sizeof(T)));
  AIJP_TOOL_CUDA(cudaMemcpy(dx, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
  cudaStream_t s;
  AIJP_TOOL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  AIJP_TOOL_CUDA(cudaEventCreate(&e0));
  AIJP_TOOL_CUDA(cudaEventCreate(&e1));

  // Checks m against the host reference, then times it; fills r (r.ok stays false on an exception).
  const auto check_and_time = [&](aijp::gpu_matrix<T>& m, result& r) {
    r.conversion_ms = m.report().conversion_ms;
    // correctness first
    AIJP_TOOL_CUDA(cudaMemsetAsync(dy, 0xff, yref.size() * sizeof(T), s));  // NaN pattern
    m.apply(T(1), dx, T(0), dy, s);
    std::vector<T> y(yref.size());
    AIJP_TOOL_CUDA(cudaMemcpyAsync(y.data(), dy, y.size() * sizeof(T), cudaMemcpyDeviceToHost, s));
    AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
    for (size_t i = 0; i < y.size(); ++i) {
      if (!(std::abs(double(y[i]) - double(yref[i])) <= bound[i])) {
        throw std::runtime_error("wrong result at row " + std::to_string(i));
      }
    }
    std::vector<double> t;
    if (o.flush_l2) {
      for (int i = 0; i < o.warmup; ++i) m.apply(T(1), dx, T(0), dy, s);
      for (int i = 0; i < o.reps; ++i) {
        flush(flush_buf, flush_bytes, s);
        AIJP_TOOL_CUDA(cudaEventRecord(e0, s));
        m.apply(T(1), dx, T(0), dy, s);
        AIJP_TOOL_CUDA(cudaEventRecord(e1, s));
        AIJP_TOOL_CUDA(cudaEventSynchronize(e1));
        float ms;
        AIJP_TOOL_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1e3);
      }
    } else {
      // Back-to-back batches (as in a Krylov loop), through the project's one timing routine.
      aijp::timing_options to;
      to.warmup = o.warmup;
      to.min_samples = std::max(5, o.reps / 5);
      to.min_sample_ms = 0.2;
      to.max_total_ms = 300;
      const auto tr = aijp::time_spmv(m, dx, dy, s, to);
      t = {tr.median_us};
      r.min_us = tr.min_us;
    }
    r.median_us = median(t);
    if (o.flush_l2) r.min_us = *std::min_element(t.begin(), t.end());
    r.gbs = mr.min_bytes / (r.median_us * 1e-6) / 1e9;
    r.frac_stream = r.gbs / ctx.model_params().stream_read_gbs;
    r.conversion_spmvs = r.conversion_ms * 1e3 / r.median_us;
    r.ok = true;
  };
  const auto run_plan = [&](const aijp::plan_options& po, result& r) {
    r.format = po.forced_plan ? po.forced_plan->to_string() : std::string("auto");
    try {
      aijp::gpu_matrix<T> m(ctx, a.view(), po, s);
      r.format = m.report().plan;
      check_and_time(m, r);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  };

  for (auto f : o.formats) {
    result r;
    r.format = aijp::format_name(f);
    try {
      aijp::plan_options po;
      po.forced = f;
      aijp::gpu_matrix<T> m(ctx, a.view(), po, s);
      if (m.format() != f) throw std::runtime_error("not applicable: " + m.report().decision);
      check_and_time(m, r);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    mr.formats.push_back(r);
  }
  for (const auto& r : mr.formats) {
    if (r.ok && (mr.best_single.empty() || r.median_us < mr.best_single_us)) {
      mr.best_single = r.format;
      mr.best_single_us = r.median_us;
    }
  }

  // The runtime's own plan, built as production builds it.
  try {
    aijp::gpu_matrix<T> automatic(ctx, a.view(), aijp::plan_options{}, s);
    mr.stats = automatic.report().stats;
    mr.x_locality = automatic.report().x_sectors_per_nnz;
    mr.sorted = automatic.report().sorted;
    mr.predicted = automatic.report().plan;
    mr.partitioned = automatic.report().partitioned;
    mr.proposed = automatic.report().proposed;
    mr.plan.format = automatic.report().plan;
    check_and_time(automatic, mr.plan);
  } catch (const std::exception& e) {
    mr.plan.error = e.what();
  }
  if (mr.proposed.split() && !mr.partitioned) {
    aijp::plan_options po;
    po.forced_plan = mr.proposed;
    run_plan(po, mr.proposed_run);
  }
  if (online_ctx != nullptr && o.online_products > 0) {
    try {
      aijp::gpu_matrix<T> m(*online_ctx, a.view(), aijp::plan_options{}, s);
      mr.online_first = m.report().plan;
      for (int i = 0; i < o.online_products; ++i) {
        m.apply(T(1), dx, T(0), dy, s);
        AIJP_TOOL_CUDA(cudaStreamSynchronize(s));  // as a Krylov iteration's dot product does
      }
      m.online_sync();
      m.set_online_timing(false);
      for (const auto& line : m.report().refinement) mr.online_refinement += (mr.online_refinement.empty() ? "" : "; ") + line;
      mr.online.format = m.report().plan;
      check_and_time(m, mr.online);
    } catch (const std::exception& e) {
      mr.online.format = mr.online.format.empty() ? std::string("online") : mr.online.format;
      mr.online.error = e.what();
    }
  }
  if (!o.plan.empty()) {
    aijp::plan_options po;
    po.forced_plan = aijp::parse_partition_plan(o.plan);
    if (po.forced_plan->blocks.back().row_end == a.rows) {
      run_plan(po, mr.forced_plan);
    } else {
      mr.forced_plan.format = o.plan;
      mr.forced_plan.error = "not applicable: the plan covers " + std::to_string(po.forced_plan->blocks.back().row_end) + " rows";
    }
  }

  if (o.rounds > 0 && !o.flush_l2 && mr.plan.ok) head_to_head(ctx, a, o, dx, dy, s, mr);

  double csr_us = 0;
  for (const auto& r : mr.formats) {
    if (r.ok && r.format == "cusparse_csr") csr_us = r.median_us;
  }
  for (auto& r : mr.formats) r.speedup = (r.ok && csr_us > 0) ? csr_us / r.median_us : 0;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(s);
  cudaFree(dx);
  cudaFree(dy);
  return mr;
}

void print_plan_result(const char* label, const result& r, const matrix_results& m)
{
  if (r.format.empty() && r.error.empty()) return;
  if (!r.ok) {
    std::printf("  %-8s %s: %s\n", label, r.format.c_str(), r.error.c_str());
    return;
  }
  std::printf("  %-8s %s: measured %.2f us", label, r.format.c_str(), r.median_us);
  if (m.best_single_us > 0) {
    std::printf(", best single format %s %.2f us (%.3fx)", m.best_single.c_str(), m.best_single_us, m.best_single_us / r.median_us);
  }
  std::printf(", conversion %.3f ms\n", r.conversion_ms);
}

void print_plan(const matrix_results& m)
{
  print_plan_result(m.partitioned ? "plan*" : "plan", m.plan, m);
  if (!m.proposed.blocks.empty()) {
    std::printf("  %-8s %s: predicted %.2f us vs %.2f us for %s alone; %d strips of %lld rows, planned in %.3f ms%s\n", "planner",
                m.proposed.to_string().c_str(), m.proposed.predicted_us, m.proposed.single_us,
                aijp::format_name(m.proposed.single_format), m.proposed.strips, static_cast<long long>(m.proposed.strip_rows),
                m.proposed.planning_ms, m.partitioned ? " (taken)" : (m.proposed.split() ? " (below the margin)" : ""));
  }
  print_plan_result("proposed", m.proposed_run, m);
  print_plan_result("--plan", m.forced_plan, m);
  if (!m.online.format.empty()) {
    print_plan_result("online", m.online, m);
    std::printf("  %-8s started as %s; %s\n", "", m.online_first.c_str(),
                m.online_refinement.empty() ? "no exploration" : m.online_refinement.c_str());
  }
  if (!m.h2h.empty()) {
    std::printf("  %-8s", "h2h");
    if (m.h2h_best_single_us > 0 && m.h2h_plan_us > 0) {
      std::printf(" plan %.2f us", m.h2h_plan_us);
      if (m.h2h_online_us > 0) std::printf(", online %.2f us", m.h2h_online_us);
      std::printf(", best single %s %.2f us: plan %.3fx", m.h2h_best_single.c_str(), m.h2h_best_single_us,
                  m.h2h_best_single_us / m.h2h_plan_us);
      if (m.h2h_online_us > 0) std::printf(", online %.3fx", m.h2h_best_single_us / m.h2h_online_us);
      std::printf("\n");
    } else {
      std::printf(" incomplete\n");
    }
    for (const auto& c : m.h2h) {
      std::printf("  %-8s   %s%s:", "", c.plan.c_str(), c.single ? "" : " (plan)");
      if (!c.error.empty()) {
        std::printf(" not built: %s\n", c.error.c_str());
        continue;
      }
      for (double t : c.rounds_us) std::printf(" %.2f", t);
      std::printf(" -> median %.2f us\n", c.median_us);
    }
  }
}

void json_result(std::ostream& js, const result& r)
{
  js << "{\"plan\": \"" << r.format << "\", \"ok\": " << (r.ok ? "true" : "false");
  if (r.ok) {
    js << ", \"median_us\": " << r.median_us << ", \"min_us\": " << r.min_us << ", \"conversion_ms\": " << r.conversion_ms;
  } else {
    js << ", \"error\": \"";
    for (char c : r.error) {
      if (c == '"' || c == '\\') js << '\\';
      if (static_cast<unsigned char>(c) >= 0x20) js << c;
    }
    js << "\"";
  }
  js << "}";
}

std::string json_escape(const std::string& s)
{
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

// Geometric means over the matrices of best single format's time / plan's time, from the sweep and from the
// head-to-head rounds, and the matrices where the plan split the rows.
void print_summary(const std::vector<matrix_results>& all, const options& o)
{
  struct acc {
    double log_sum = 0;
    int n = 0, within3 = 0;
    void add(double best_us, double plan_us)
    {
      if (best_us <= 0 || plan_us <= 0) return;
      log_sum += std::log(best_us / plan_us);
      ++n;
      within3 += best_us / plan_us >= 0.97;
    }
    void print(const char* what) const
    {
      if (n == 0) return;
      std::printf("#   %-34s geomean %.3f over %d matrices; %d within 3 %% of the best or faster\n", what,
                  std::exp(log_sum / n), n, within3);
    }
  } sweep, sweep_online, h2h, h2h_online, fastest, fastest_online;
  for (const auto& m : all) {
    if (m.plan.ok) sweep.add(m.best_single_us, m.plan.median_us);
    if (m.online.ok) sweep_online.add(m.best_single_us, m.online.median_us);
    h2h.add(m.h2h_best_single_us, m.h2h_plan_us);
    h2h_online.add(m.h2h_best_single_us, m.h2h_online_us);
    fastest.add(m.h2h_fastest_single_us, m.h2h_fastest_plan_us);
    fastest_online.add(m.h2h_fastest_single_us, m.h2h_fastest_online_us);
  }
  std::printf("\n# summary: best single format's time / plan's time (above 1: the plan is faster)\n");
  sweep.print("sweep, plan");
  sweep_online.print("sweep, online plan");
  if (o.rounds > 0) {
    h2h.print("head to head, plan");
    h2h_online.print("head to head, online plan");
    fastest.print("fastest rounds, plan");
    fastest_online.print("fastest rounds, online plan");
  }
  for (const auto& m : all) {
    const bool split = m.plan.format.find('[') != std::string::npos;
    const bool online_split = m.online.ok && m.online.format.find('[') != std::string::npos;
    if (!split && !online_split) continue;
    std::printf("#   split on %s: %s", m.name.c_str(), m.plan.format.c_str());
    if (m.h2h_plan_us > 0) std::printf(" %.3fx head to head", m.h2h_best_single_us / m.h2h_plan_us);
    if (m.plan.ok) std::printf(" (%.3fx in the sweep)", m.best_single_us / m.plan.median_us);
    if (m.online.ok) {
      std::printf("; online %s", m.online.format.c_str());
      if (m.h2h_online_us > 0) std::printf(" %.3fx head to head", m.h2h_best_single_us / m.h2h_online_us);
    }
    std::printf("; best single %s\n", (m.h2h_best_single.empty() ? m.best_single : m.h2h_best_single).c_str());
  }
}

}  // namespace

int main(int argc, char** argv)
{
  const options o = parse(argc, argv);
  std::string why;
  if (!aijp::device_available(&why)) die(why + ": this benchmark needs a GPU");
  std::unique_ptr<aijp::context> ctx, online_ctx;
  try {
    aijp::context_options co;
    co.use_cache = false;  // measure the device constants now; never depend on a stale cache
    ctx = std::make_unique<aijp::context>(co);
    if (o.online_products > 0) {
      co.online = true;  // with the cache disabled the corrections stay in memory
      online_ctx = std::make_unique<aijp::context>(co);
    }
  } catch (const std::exception& e) {
    die(e.what());
  }
  const auto& dev = ctx->device();
  std::printf("# device: %s\n# streaming read %.0f GB/s, empty launch %.2f us, cuSPARSE CSR fixed cost %.2f us\n",
              dev.to_string().c_str(), ctx->model_params().stream_read_gbs, ctx->model_params().launch_us,
              ctx->model_params().cusparse_csr_overhead_us);
  std::printf("# reps %d, warmup %d, %s, %s precision\n", o.reps, o.warmup, o.flush_l2 ? "L2 flushed" : "warm L2",
              o.use_float ? "single" : "double");
  void* flush_buf = nullptr;
  const size_t flush_bytes = 2 * static_cast<size_t>(dev.l2_bytes);
  if (o.flush_l2) AIJP_TOOL_CUDA(cudaMalloc(&flush_buf, flush_bytes));

  std::vector<matrix_results> all;
  int idx = 0;
  for (const auto& in : o.inputs) {
    ++idx;
    const auto t0 = std::chrono::steady_clock::now();
    aijp::bench::input_matrix input;
    try {
      input = aijp::bench::load_input(in);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "aijp_bench: skipping %s: %s\n", in.c_str(), e.what());
      continue;
    }
    const aijp::csr_matrix<double>& a = input.a;
    const std::string& name = input.name;
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[%d/%zu] %s: %lld x %lld, %lld nnz (loaded in %.1f s)\n", idx, o.inputs.size(), name.c_str(),
                 (long long)a.rows, (long long)a.cols, (long long)a.nnz(), load_s);
    matrix_results mr;
    try {
      mr = o.use_float ? run_one<float>(*ctx, online_ctx.get(), name, a, o, flush_buf, flush_bytes)
                       : run_one<double>(*ctx, online_ctx.get(), name, a, o, flush_buf, flush_bytes);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "aijp_bench: %s failed: %s\n", name.c_str(), e.what());
      continue;
    }
    std::printf("\n%s: %lld x %lld, nnz %lld, mean %.2f, sigma %.2f, max %d; runtime's choice: %s\n", name.c_str(),
                (long long)mr.stats.rows, (long long)mr.stats.cols, (long long)mr.stats.nnz, mr.stats.mean,
                mr.stats.stddev, mr.stats.max_len, mr.predicted.c_str());
    std::printf("  locality: x %.3f sectors/nonzero in row order, %.3f length-sorted; y %.3f sectors/row length-sorted\n",
                mr.x_locality, mr.sorted.x_sectors_per_nnz, mr.sorted.y_sectors_per_row);
    std::printf("  %-17s %10s %10s %8s %8s %9s %10s\n", "format", "median_us", "GB/s", "%stream", "vs_csr", "conv_ms",
                "conv/SpMV");
    for (const auto& r : mr.formats) {
      if (!r.ok) {
        std::printf("  %-17s %s\n", r.format.c_str(), r.error.rfind("not applicable", 0) == 0 ? r.error.c_str() : ("FAILED: " + r.error).c_str());
        continue;
      }
      std::printf("  %-17s %10.2f %10.0f %7.1f%% %7.2fx %9.3f %10.1f\n", r.format.c_str(), r.median_us, r.gbs,
                  100 * r.frac_stream, r.speedup, r.conversion_ms, r.conversion_spmvs);
    }
    print_plan(mr);
    std::fflush(stdout);
    all.push_back(std::move(mr));
  }
  if (flush_buf) cudaFree(flush_buf);

  print_summary(all, o);

  bool any_failed = false;
  for (const auto& m : all) {
    for (const auto& r : m.formats) any_failed = any_failed || (!r.ok && r.error.rfind("not applicable", 0) != 0);
    for (const result* r : {&m.plan, &m.proposed_run, &m.forced_plan, &m.online}) {
      any_failed = any_failed || (!r->format.empty() && !r->ok && r->error.rfind("not applicable", 0) != 0);
    }
  }
  if (!o.json.empty()) {
    std::ofstream js(o.json);
    if (!js) die("cannot write " + o.json);
    js.precision(9);
    js << "{\n  \"device\": \"" << json_escape(dev.name) << "\",\n  \"sm_count\": " << dev.sm_count
       << ",\n  \"stream_read_gbs\": " << ctx->model_params().stream_read_gbs
       << ",\n  \"launch_us\": " << ctx->model_params().launch_us << ",\n  \"precision\": \""
       << (o.use_float ? "single" : "double") << "\",\n  \"flush_l2\": " << (o.flush_l2 ? "true" : "false")
       << ",\n  \"reps\": " << o.reps << ",\n  \"matrices\": [\n";
    for (size_t i = 0; i < all.size(); ++i) {
      const auto& m = all[i];
      js << "    {\"name\": \"" << json_escape(m.name) << "\", \"rows\": " << m.stats.rows << ", \"cols\": " << m.stats.cols
         << ", \"nnz\": " << m.stats.nnz << ", \"mean\": " << m.stats.mean << ", \"sigma\": " << m.stats.stddev
         << ", \"max\": " << m.stats.max_len << ", \"x_sectors_per_nnz\": " << m.x_locality
         << ", \"x_sectors_per_nnz_sorted\": " << m.sorted.x_sectors_per_nnz << ", \"y_sectors_per_row_sorted\": "
         << m.sorted.y_sectors_per_row << ", \"min_bytes\": " << m.min_bytes << ", \"runtime_choice\": \""
         << m.predicted << "\", \"formats\": [";
      for (size_t k = 0; k < m.formats.size(); ++k) {
        const auto& r = m.formats[k];
        js << (k ? ", " : "") << "{\"format\": \"" << r.format << "\", \"ok\": " << (r.ok ? "true" : "false");
        if (r.ok) {
          js << ", \"median_us\": " << r.median_us << ", \"min_us\": " << r.min_us << ", \"gbs\": " << r.gbs
             << ", \"frac_stream\": " << r.frac_stream << ", \"speedup_vs_cusparse_csr\": " << r.speedup
             << ", \"conversion_ms\": " << r.conversion_ms << ", \"conversion_spmvs\": " << r.conversion_spmvs;
        } else {
          js << ", \"error\": \"" << json_escape(r.error) << "\"";
        }
        js << "}";
      }
      js << "], \"plan\": ";
      json_result(js, m.plan);
      js << ", \"partitioned\": " << (m.partitioned ? "true" : "false") << ", \"best_single_format\": \"" << m.best_single
         << "\", \"best_single_us\": " << m.best_single_us;
      if (!m.proposed.blocks.empty()) {
        js << ", \"planner\": {\"proposal\": \"" << m.proposed.to_string() << "\", \"predicted_us\": " << m.proposed.predicted_us
           << ", \"single_format\": \"" << aijp::format_name(m.proposed.single_format)
           << "\", \"single_predicted_us\": " << m.proposed.single_us << ", \"strips\": " << m.proposed.strips
           << ", \"strip_rows\": " << m.proposed.strip_rows << ", \"planning_ms\": " << m.proposed.planning_ms << "}";
      }
      if (!m.proposed_run.format.empty()) {
        js << ", \"proposed\": ";
        json_result(js, m.proposed_run);
      }
      if (!m.forced_plan.format.empty()) {
        js << ", \"forced_plan\": ";
        json_result(js, m.forced_plan);
      }
      if (!m.h2h.empty()) {
        js << ", \"head_to_head\": {\"rounds\": " << o.rounds << ", \"best_single\": \"" << m.h2h_best_single
           << "\", \"best_single_us\": " << m.h2h_best_single_us << ", \"plan_us\": " << m.h2h_plan_us
           << ", \"online_us\": " << m.h2h_online_us << ", \"contenders\": [";
        for (size_t k = 0; k < m.h2h.size(); ++k) {
          const auto& c = m.h2h[k];
          js << (k ? ", " : "") << "{\"plan\": \"" << json_escape(c.plan) << "\", \"single\": " << (c.single ? "true" : "false");
          if (!c.error.empty()) js << ", \"error\": \"" << json_escape(c.error) << "\"";
          js << ", \"median_us\": " << c.median_us << ", \"fastest_us\": " << c.fastest_us << ", \"rounds_us\": [";
          for (size_t r = 0; r < c.rounds_us.size(); ++r) js << (r ? ", " : "") << c.rounds_us[r];
          js << "]}";
        }
        js << "]}";
      }
      if (!m.online.format.empty()) {
        js << ", \"online\": ";
        json_result(js, m.online);
        js << ", \"online_first\": \"" << json_escape(m.online_first) << "\", \"online_refinement\": \""
           << json_escape(m.online_refinement) << "\"";
      }
      js << "}" << (i + 1 < all.size() ? "," : "") << "\n";
    }
    js << "  ]\n}\n";
  }
  return any_failed ? 1 : 0;
}
