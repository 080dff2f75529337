// aijp_online: shows online refinement at work. Starts from a deliberately mis-calibrated coefficient cache
// (scaled device constants, or another GPU's cache file) in a temporary cache directory, then runs a
// sequence of "solves" per matrix — each a freshly assembled plan (upload, analysis with the corrections
// learned so far) and a number of MatMults — and reports how the prediction error of the running format
// and the chosen format evolve, against the best format measured by aijp::time_spmv.
#include <aijpredict/generators.hpp>
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/matrix_market.hpp>
#include <aijpredict/measure.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tool_support.hpp"

const char* const aijp::bench::tool_name = "aijp_online";

namespace {

using aijp::bench::die;
using aijp::bench::parse_int;


const char* usage =
    "Usage: aijp_online [options] MATRIX...\n"
    "\n"
    "Demonstrates online refinement. A temporary coefficient cache is filled with this GPU's calibrated\n"
    "device constants, then deliberately mis-calibrated (--miscalibrate, or --foreign: another GPU's cache\n"
    "file). Each MATRIX (Matrix Market .mtx/.mtx.gz, or gen:SPEC) then goes through --solves solves; a solve\n"
    "builds a fresh plan (as a reassembled matrix does: upload, analysis with the corrections learned so far)\n"
    "and runs --mults MatMults y = A x, each followed by a stream synchronisation like the dot product of a\n"
    "Krylov iteration. The plan times sampled MatMults with CUDA events (read back later), feeds the model's\n"
    "corrections, and tries the runner-up once when the running format measures worse than the runner-up's\n"
    "prediction by 10 %. Printed per solve: the format, its prediction made before it ran, its measured\n"
    "median, the relative error, and any exploration; per matrix, the MatMults until the prediction error\n"
    "stays below 10 % and whether the final format is the best of all formats measured by aijp::time_spmv\n"
    "(back-to-back batches, online timing paused) and the best issued one product at a time between stream\n"
    "synchronisations (as the solves run them, launch latency included). The corrections are saved to the\n"
    "temporary cache at the end and printed.\n"
    "\n"
    "Options:\n"
    "  --solves N          solves per matrix (default 10)\n"
    "  --mults N           MatMults per solve (default 20)\n"
    "  --model NAME        model that ranks the formats (default placeholder; aijp uses the shipped or\n"
    "                      foreign coefficients)\n"
    "  --miscalibrate SPEC scale the cached device constants: bw=F,launch=F,csr=F (stream bandwidth,\n"
    "                      empty-launch time, cuSPARSE CSR fixed cost; default bw=2,launch=0.5,csr=0.5:\n"
    "                      every prediction about 2x too fast); 'none' keeps them\n"
    "  --foreign FILE      instead, take the device constants and the model coefficients from FILE, a cache\n"
    "                      file of another GPU (e.g. cache/defaults/h200.json)\n"
    "  --no-explore        no bounded exploration (corrections only)\n"
    "  --explore-margin F  exploration margin (online::policy::explore_margin, default 0.10): a format is\n"
    "                      compared with the runner-up when it measures above the runner-up's prediction\n"
    "                      by more than this fraction\n"
    "  --explore-confirmations N  observations in a row at which a margin reason must hold before the\n"
    "                      comparison starts (online::policy::explore_confirmations, default 2)\n"
    "  --free-band F       free band (online::policy::free_band, default 0.15; 0: off): where the products\n"
    "                      measure at most 20 us, csr_vector or csr_scalar (on the CSR copy), if never\n"
    "                      measured on the matrix, is also tried when predicted within this fraction of\n"
    "                      the running format's measured time\n"
    "  --first-spacing N   online::policy::sample_first_spacing (default 8; 1: every product): where the\n"
    "                      product takes at most 15 % of the host time between products, a new plan's first\n"
    "                      samples are every N-th product\n"
    "  --no-reference      do not time every format with aijp::time_spmv (no measured best)\n"
    "  --no-iteration-sync MatMults back to back (timed pairs are then read back at the end of the solve)\n"
    "  --cache-dir DIR     use DIR for the cache instead of a temporary directory (kept)\n"
    "  --keep-cache        keep the temporary cache directory and print its path\n"
    "  --per-mult          print one line per MatMult\n"
    "  --partition         allow row-partitioned plans (measured and reported, but not learned from: off by\n"
    "                      default, so every plan is a single format)\n"
    "  --float             single precision values (default double)\n"
    "  --json FILE         write everything as JSON to FILE\n"
    "  --help              this text\n"
    "\n"
    "Generator specs (gen:SPEC):\n";

struct options {
  std::vector<std::string> inputs;
  int solves = 10;
  int mults = 20;
  std::string model = "placeholder";
  double scale_bw = 2, scale_launch = 0.5, scale_csr = 0.5;
  std::string foreign;
  bool explore = true;
  double explore_margin = aijp::online::policy{}.explore_margin;
  int explore_confirmations = aijp::online::policy{}.explore_confirmations;
  double free_band = aijp::online::policy{}.free_band;
  int first_spacing = aijp::online::policy{}.sample_first_spacing;
  bool reference = true;
  bool iteration_sync = true;
  std::string cache_dir;
  bool keep_cache = false;
  bool per_mult = false;
  bool use_float = false;
  bool partition = false;
  std::string json;
};

void parse_miscalibration(const std::string& spec, options& o)
{
  o.scale_bw = o.scale_launch = o.scale_csr = 1;
  if (spec == "none") return;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    char* end = nullptr;
    const double v = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &end);
    if (eq == std::string::npos || !end || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      die("--miscalibrate: '" + item + "' is not KEY=FACTOR with a positive factor");
    }
    const std::string key = item.substr(0, eq);
    if (key == "bw") {
      o.scale_bw = v;
    } else if (key == "launch") {
      o.scale_launch = v;
    } else if (key == "csr") {
      o.scale_csr = v;
    } else {
      die("--miscalibrate: unknown key '" + key + "' (bw, launch, csr)");
    }
  }
}

options parse(int argc, char** argv)
{
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    const auto need = [&](const char* what) {
      if (!next) die(a + " needs " + what);
      ++i;
      return std::string(next);
    };
    // A fraction in [0, most]; anything else ends the program with a message naming the option.
    const auto fraction = [&](const std::string& v, double most) {
      char* end = nullptr;
      const double f = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(f >= 0) || f > most) {
        std::fprintf(stderr, "aijp_online: %s takes a fraction in [0, %g], not '%s'\n", a.c_str(), most, v.c_str());
        std::exit(2);
      }
      return f;
    };
    if (a == "--help" || a == "-h") {
      std::cout << usage << aijp::gen::spec_help() << "\n";
      std::exit(0);
    } else if (a == "--solves") {
      o.solves = parse_int(a, next, 1);
      ++i;
    } else if (a == "--mults") {
      o.mults = parse_int(a, next, 1);
      ++i;
    } else if (a == "--model") {
      o.model = need("a model name");
    } else if (a == "--miscalibrate") {
      parse_miscalibration(need("a spec"), o);
    } else if (a == "--foreign") {
      o.foreign = need("a cache file");
    } else if (a == "--cache-dir") {
      o.cache_dir = need("a directory");
    } else if (a == "--json") {
      o.json = need("a file name");
    } else if (a == "--no-explore") {
      o.explore = false;
    } else if (a == "--explore-margin") {
      o.explore_margin = fraction(need("a fraction"), 10);
    } else if (a == "--explore-confirmations") {
      o.explore_confirmations = parse_int(a, next, 1);
    } else if (a == "--free-band") {
      o.free_band = fraction(need("a fraction"), 1);
    } else if (a == "--first-spacing") {
      o.first_spacing = parse_int(a, next, 1);
      ++i;
    } else if (a == "--no-reference") {
      o.reference = false;
    } else if (a == "--no-iteration-sync") {
      o.iteration_sync = false;
    } else if (a == "--keep-cache") {
      o.keep_cache = true;
    } else if (a == "--per-mult") {
      o.per_mult = true;
    } else if (a == "--partition") {
      o.partition = true;
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

struct mult_record {
  int solve = 0, mult = 0;
  std::string format;
  double predicted_us = 0, measured_us = 0, error = -1;
};

struct solve_record {
  int solve = 0;
  std::string analysed;  // the format the analysis chose
  std::string final_format;
  double predicted_us = 0, measured_us = 0, error = -1;
  int samples = 0;
  std::string exploration;  // one line, empty if none
};

struct matrix_record {
  std::string name;
  aijp::size_type rows = 0, cols = 0, nnz = 0;
  std::vector<std::pair<std::string, double>> reference;  // format, time_spmv median (us)
  std::vector<std::pair<std::string, double>> in_situ;    // format, median of single synchronised products (us)
  std::string best, best_in_situ;
  double best_us = 0, best_in_situ_us = 0;
  double final_vs_best_in_situ = 0;
  std::vector<solve_record> solves;
  std::vector<mult_record> mults;
  int mults_until_good = -1;  // MatMults of refinement after which every later solve's error is < 10 %
  double final_vs_best = 0;   // time_spmv of the final format / best
};

template <typename T>
matrix_record run_matrix(const aijp::context& ctx, const std::string& name, const aijp::csr_matrix<double>& a64, const options& o)
{
  const aijp::csr_matrix<T> a = aijp::value_cast<T>(a64);
  matrix_record mr;
  mr.name = name;
  mr.rows = a.rows;
  mr.cols = a.cols;
  mr.nnz = a.nnz();

  std::vector<T> x(a.cols);
  for (aijp::size_type i = 0; i < a.cols; ++i) x[i] = T(1) + T(i % 7) / T(8);
  T *dx = nullptr, *dy = nullptr;
  AIJP_TOOL_CUDA(cudaMalloc(reinterpret_cast<void**>(&dx), std::max<size_t>(1, x.size()) * sizeof(T)));
  AIJP_TOOL_CUDA(cudaMalloc(reinterpret_cast<void**>(&dy), std::max<size_t>(1, a.rows) * sizeof(T)));
  AIJP_TOOL_CUDA(cudaMemcpy(dx, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
  cudaStream_t s;
  AIJP_TOOL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  AIJP_TOOL_CUDA(cudaEventCreate(&e0));
  AIJP_TOOL_CUDA(cudaEventCreate(&e1));

  if (o.reference) {
    for (auto f : aijp::all_formats()) {
      try {
        aijp::plan_options po;
        po.forced = f;
        po.online = false;
        aijp::gpu_matrix<T> m(ctx, a.view(), po, s);
        if (m.format() != f) continue;
        aijp::timing_options to;
        to.max_total_ms = 200;
        const double us = aijp::time_spmv(m, dx, dy, s, to).median_us;
        mr.reference.emplace_back(aijp::format_name(f), us);
        if (mr.best.empty() || us < mr.best_us) {
          mr.best = aijp::format_name(f);
          mr.best_us = us;
        }
        // As the solves issue them: one product between stream synchronisations, timed by an event pair
        // (what online timing sees, launch latency included on an idle GPU).
        std::vector<double> t;
        for (int i = 0; i < 15 && (i < 3 || std::accumulate(t.begin(), t.end(), 0.0) < 200e3); ++i) {
          AIJP_TOOL_CUDA(cudaEventRecord(e0, s));
          m.apply(T(1), dx, T(0), dy, s);
          AIJP_TOOL_CUDA(cudaEventRecord(e1, s));
          AIJP_TOOL_CUDA(cudaEventSynchronize(e1));
          float ms = 0;
          AIJP_TOOL_CUDA(cudaEventElapsedTime(&ms, e0, e1));
          t.push_back(ms * 1e3);
        }
        std::sort(t.begin(), t.end());
        const double one = t[t.size() / 2];
        mr.in_situ.emplace_back(aijp::format_name(f), one);
        if (mr.best_in_situ.empty() || one < mr.best_in_situ_us) {
          mr.best_in_situ = aijp::format_name(f);
          mr.best_in_situ_us = one;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "  reference %s: %s\n", aijp::format_name(f), e.what());
      }
    }
    std::printf("  measured best: %s %.2f us back to back (aijp::time_spmv); %s %.2f us issued one at a time\n",
                mr.best.c_str(), mr.best_us, mr.best_in_situ.c_str(), mr.best_in_situ_us);
  }

  std::printf("  %5s %6s %-14s %-14s %11s %11s %8s  %s\n", "solve", "mults", "analysed", "running", "predicted", "measured",
              "error", "exploration");
  aijp::plan_options po;
  po.online_policy.explore = o.explore;
  po.online_policy.explore_margin = o.explore_margin;
  po.online_policy.explore_confirmations = o.explore_confirmations;
  po.online_policy.free_band = o.free_band;
  po.online_policy.sample_first_spacing = o.first_spacing;
  po.partition = o.partition;
  for (int sv = 0; sv < o.solves; ++sv) {
    aijp::gpu_matrix<T> m(ctx, a.view(), po, s);
    solve_record sr;
    sr.solve = sv + 1;
    sr.analysed = aijp::format_name(m.format());
    for (int k = 0; k < o.mults; ++k) {
      m.apply(T(1), dx, T(0), dy, s);
      if (o.iteration_sync) AIJP_TOOL_CUDA(cudaStreamSynchronize(s));
      const auto& r = m.report();
      mr.mults.push_back({sv + 1, sv * o.mults + k + 1, aijp::format_name(r.chosen), r.predicted_us, r.measured_us, r.model_error});
      if (o.per_mult) {
        std::printf("    mult %4d  %-14s predicted %9.2f us  measured %9.2f us  error %s\n", sv * o.mults + k + 1,
                    aijp::format_name(r.chosen), r.predicted_us, r.measured_us,
                    r.model_error >= 0 ? (std::to_string(100 * r.model_error).substr(0, 6) + " %").c_str() : "-");
      }
    }
    m.online_sync();
    const auto& r = m.report();
    sr.final_format = aijp::format_name(r.chosen);
    sr.predicted_us = r.predicted_us;
    sr.measured_us = r.measured_us;
    sr.error = r.model_error;
    sr.samples = r.measured_samples;
    for (const auto& line : r.refinement) sr.exploration += (sr.exploration.empty() ? "" : "; ") + line;
    char err[32] = "-";
    if (sr.error >= 0) std::snprintf(err, sizeof(err), "%.1f %%", 100 * sr.error);
    std::printf("  %5d %6d %-14s %-14s %11.2f %11.2f %8s  %s\n", sr.solve, (sv + 1) * o.mults, sr.analysed.c_str(),
                sr.final_format.c_str(), sr.predicted_us, sr.measured_us, err, sr.exploration.c_str());
    std::fflush(stdout);
    mr.solves.push_back(sr);
  }
  // The first solve from which on every prediction (made before the solve ran) is within 10 %.
  for (int sv = static_cast<int>(mr.solves.size()) - 1; sv >= 0; --sv) {
    const double e = mr.solves[sv].error;
    if (!(e >= 0 && e < 0.10)) break;
    mr.mults_until_good = sv * o.mults;
  }
  if (!mr.best.empty() && !mr.solves.empty()) {
    for (const auto& [f, us] : mr.reference) {
      if (f == mr.solves.back().final_format) mr.final_vs_best = us / mr.best_us;
    }
    for (const auto& [f, us] : mr.in_situ) {
      if (f == mr.solves.back().final_format) mr.final_vs_best_in_situ = us / mr.best_in_situ_us;
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(s);
  cudaFree(dx);
  cudaFree(dy);
  return mr;
}

// Fills `dir` with this GPU's calibrated constants (a first context), then mis-calibrates them.
void prepare_cache(const std::filesystem::path& dir, const options& o)
{
  aijp::context_options co;
  co.cache_dir = dir.string();
  const aijp::context calibrated(co);
  const auto fp = aijp::make_fingerprint(calibrated.device());
  const aijp::cache::store store(dir);
  aijp::cache::cache_entry initial;
  initial.device = fp;
  if (!o.foreign.empty()) {
    const auto foreign = aijp::cache::read_file_any_device(o.foreign);
    if (foreign.status != aijp::cache::load_status::ok) die(foreign.message);
    store.update(
        fp,
        [&](aijp::cache::cache_entry& e) {
          e.device_metrics = foreign.entry->device_metrics;
          for (const auto& [model, table] : foreign.entry->coefficients) {
            if (model.rfind("online_", 0) != 0) e.coefficients[model] = table;
          }
          e.provenance["aijp_online"] = "device constants and coefficients of " + foreign.entry->device.name + " from " + o.foreign;
        },
        initial);
    std::printf("# mis-calibration: device constants and coefficients of %s (%s)\n", foreign.entry->device.name.c_str(),
                o.foreign.c_str());
    return;
  }
  store.update(
      fp,
      [&](aijp::cache::cache_entry& e) {
        e.device_metrics["stream_read_gbs"] *= o.scale_bw;
        e.device_metrics["launch_overhead_us"] *= o.scale_launch;
        e.device_metrics["cusparse_csr_overhead_us"] *= o.scale_csr;
        if (e.device_metrics.count("cusparse_csr_alg2_overhead_us")) e.device_metrics["cusparse_csr_alg2_overhead_us"] *= o.scale_csr;
        e.provenance["aijp_online"] = "device constants deliberately mis-calibrated";
      },
      initial);
  std::printf("# mis-calibration: streaming bandwidth x%g, launch time x%g, cuSPARSE CSR fixed cost x%g\n", o.scale_bw,
              o.scale_launch, o.scale_csr);
}

}  // namespace

int main(int argc, char** argv)
{
  const options o = parse(argc, argv);
  std::string why;
  if (!aijp::device_available(&why)) die(why + ": this tool needs a GPU");

  std::filesystem::path dir = o.cache_dir;
  const bool temporary = dir.empty();
  if (temporary) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "aijp_online-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) die("cannot create a temporary cache directory");
    dir = tmpl;
  }
  std::unique_ptr<aijp::context> ctx;
  try {
    prepare_cache(dir, o);
    aijp::context_options co;
    co.cache_dir = dir.string();
    co.model = o.model;
    co.online = true;
    ctx = std::make_unique<aijp::context>(co);
  } catch (const std::exception& e) {
    die(e.what());
  }
  const auto& p = ctx->model_params();
  std::printf("# device: %s\n# cached (mis-calibrated) constants: streaming read %.0f GB/s, empty launch %.2f us, cuSPARSE CSR %.2f us\n",
              ctx->device().to_string().c_str(), p.stream_read_gbs, p.launch_us, p.cusparse_csr_overhead_us);
  std::printf("# %s\n# %s\n# %d solves x %d MatMults per matrix, exploration %s (margin %.0f %% at %d observations in a row, free band %.0f %%), %s\n",
              ctx->model_source().c_str(), ctx->online_source().c_str(), o.solves, o.mults, o.explore ? "on" : "off", 100 * o.explore_margin,
              o.explore_confirmations, 100 * o.free_band,
              o.iteration_sync ? "stream synchronised after each MatMult" : "MatMults back to back");
  for (const auto& w : ctx->warnings()) std::fprintf(stderr, "warning: %s\n", w.c_str());

  std::vector<matrix_record> all;
  int idx = 0;
  for (const auto& in : o.inputs) {
    ++idx;
    aijp::bench::input_matrix input;
    try {
      input = aijp::bench::load_input(in);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "aijp_online: skipping %s: %s\n", in.c_str(), e.what());
      continue;
    }
    const aijp::csr_matrix<double>& a = input.a;
    const std::string& name = input.name;
    std::printf("\n[%d/%zu] %s: %lld x %lld, %lld nnz\n", idx, o.inputs.size(), name.c_str(), (long long)a.rows,
                (long long)a.cols, (long long)a.nnz());
    try {
      all.push_back(o.use_float ? run_matrix<float>(*ctx, name, a, o) : run_matrix<double>(*ctx, name, a, o));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "aijp_online: %s failed: %s\n", name.c_str(), e.what());
      continue;
    }
    const auto& mr = all.back();
    std::printf("  -> prediction error below 10 %% %s", mr.mults_until_good < 0 ? "never reached for good" : "");
    if (mr.mults_until_good >= 0) std::printf("after %d MatMults of refinement", mr.mults_until_good);
    if (!mr.best.empty()) {
      const std::string& fin = mr.solves.back().final_format;
      std::printf("; final format %s: %.3fx the back-to-back best %s, %.3fx the one-at-a-time best %s", fin.c_str(),
                  mr.final_vs_best, mr.best.c_str(), mr.final_vs_best_in_situ, mr.best_in_situ.c_str());
    }
    std::printf("\n");
  }

  // Summary: mean error over the matrices, solve by solve.
  std::printf("\n# summary over %zu matrices\n# %5s %8s %12s %12s\n", all.size(), "solve", "mults", "mean error", "max error");
  int first_good_solve = -1;
  for (int sv = 0; sv < o.solves; ++sv) {
    double sum = 0, mx = 0;
    int n = 0;
    for (const auto& mr : all) {
      if (sv < static_cast<int>(mr.solves.size()) && mr.solves[sv].error >= 0) {
        sum += mr.solves[sv].error;
        mx = std::max(mx, mr.solves[sv].error);
        ++n;
      }
    }
    if (n == 0) continue;
    std::printf("  %5d %8d %11.1f%% %11.1f%%\n", sv + 1, sv * o.mults, 100 * sum / n, 100 * mx);
    if (sum / n >= 0.10) {
      first_good_solve = -1;  // from this solve on for good, not once
    } else if (first_good_solve < 0) {
      first_good_solve = sv;
    }
  }
  int best_hits = 0, with_best = 0, within5 = 0, situ_hits = 0, situ_within5 = 0;
  for (const auto& mr : all) {
    if (mr.best.empty() || mr.solves.empty()) continue;
    ++with_best;
    best_hits += mr.solves.back().final_format == mr.best;
    within5 += mr.final_vs_best > 0 && mr.final_vs_best <= 1.05;
    situ_hits += mr.solves.back().final_format == mr.best_in_situ;
    situ_within5 += mr.final_vs_best_in_situ > 0 && mr.final_vs_best_in_situ <= 1.05;
  }
  if (first_good_solve >= 0) {
    std::printf("# mean prediction error < 10 %% from solve %d on, i.e. after %d MatMults of refinement\n", first_good_solve + 1,
                first_good_solve * o.mults);
  } else {
    std::printf("# mean prediction error never below 10 %%\n");
  }
  if (with_best > 0) {
    std::printf("# final format = back-to-back best (aijp::time_spmv) on %d of %d matrices, within 5 %% of it on %d\n",
                best_hits, with_best, within5);
    std::printf("# final format = one-at-a-time best (as the solves run) on %d of %d matrices, within 5 %% of it on %d\n",
                situ_hits, with_best, situ_within5);
  }
  try {
    const auto saved = ctx->save_online();
    std::printf("# corrections learned (%s):\n", saved.empty() ? "not saved" : ("saved to " + saved.string()).c_str());
    std::istringstream lines(ctx->online_corrections()->to_string());
    for (std::string l; std::getline(lines, l);) std::printf("#   %s\n", l.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aijp_online: could not save the corrections: %s\n", e.what());
  }

  if (!o.json.empty()) {
    std::ofstream js(o.json);
    if (!js) die("cannot write " + o.json);
    js << "{\n  \"device\": \"" << json_escape(ctx->device().name) << "\", \"model\": \"" << json_escape(o.model)
       << "\", \"miscalibration\": \""
       << json_escape(o.foreign.empty() ? "bw=" + std::to_string(o.scale_bw) + ",launch=" + std::to_string(o.scale_launch) +
                                              ",csr=" + std::to_string(o.scale_csr)
                                        : "foreign:" + o.foreign)
       << "\", \"solves\": " << o.solves << ", \"mults\": " << o.mults << ", \"explore\": " << (o.explore ? "true" : "false")
       << ",\n  \"first_good_solve\": " << (first_good_solve < 0 ? -1 : first_good_solve + 1)
       << ", \"best_hits\": " << best_hits << ", \"within5\": " << within5 << ", \"in_situ_hits\": " << situ_hits
       << ", \"in_situ_within5\": " << situ_within5 << ", \"with_best\": " << with_best << ",\n  \"matrices\": [\n";
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto& mr = all[i];
      js << "    {\"name\": \"" << json_escape(mr.name) << "\", \"rows\": " << mr.rows << ", \"cols\": " << mr.cols
         << ", \"nnz\": " << mr.nnz << ", \"best\": \"" << mr.best << "\", \"best_us\": " << mr.best_us
         << ", \"final_vs_best\": " << mr.final_vs_best << ", \"best_in_situ\": \"" << mr.best_in_situ
         << "\", \"best_in_situ_us\": " << mr.best_in_situ_us << ", \"final_vs_best_in_situ\": " << mr.final_vs_best_in_situ
         << ", \"mults_until_good\": " << mr.mults_until_good << ",\n     \"reference\": {";
      for (std::size_t k = 0; k < mr.reference.size(); ++k) {
        js << (k ? ", " : "") << "\"" << mr.reference[k].first << "\": " << mr.reference[k].second;
      }
      js << "},\n     \"in_situ\": {";
      for (std::size_t k = 0; k < mr.in_situ.size(); ++k) {
        js << (k ? ", " : "") << "\"" << mr.in_situ[k].first << "\": " << mr.in_situ[k].second;
      }
      js << "},\n     \"solves\": [";
      for (std::size_t k = 0; k < mr.solves.size(); ++k) {
        const auto& sr = mr.solves[k];
        js << (k ? ",\n       " : "\n       ") << "{\"solve\": " << sr.solve << ", \"analysed\": \"" << sr.analysed
           << "\", \"final\": \"" << sr.final_format << "\", \"predicted_us\": " << sr.predicted_us
           << ", \"measured_us\": " << sr.measured_us << ", \"error\": " << sr.error << ", \"samples\": " << sr.samples
           << ", \"exploration\": \"" << json_escape(sr.exploration) << "\"}";
      }
      js << "],\n     \"mults\": [";
      for (std::size_t k = 0; k < mr.mults.size(); ++k) {
        const auto& m = mr.mults[k];
        js << (k ? ", " : "") << "[" << m.mult << ", \"" << m.format << "\", " << m.predicted_us << ", " << m.measured_us << ", "
           << m.error << "]";
      }
      js << "]}" << (i + 1 < all.size() ? ",\n" : "\n");
    }
    js << "  ]\n}\n";
  }
  ctx.reset();
  if (temporary && !o.keep_cache) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    std::printf("# cache directory: %s\n", dir.string().c_str());
  }
  return all.empty() ? 1 : 0;
}
