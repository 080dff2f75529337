// aijp_plan: the row partition the runtime would plan for a matrix, on the host (no GPU): strip summaries, their x
// locality and column facts by the host references of the device passes, each block priced by the placeholder model
// with a cache's corrections through block_prediction_input, as the runtime's partition costs are.
#include "cache_device.hpp"
#include "tool_support.hpp"

#include <aijpredict/planner.hpp>
#include <aijpredict/predict.hpp>
#include <aijpredict/stats.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>
#include <vector>

namespace aijp::bench {
const char* const tool_name = "aijp_plan";
}

namespace {

using aijp::bench::die;

void usage()
{
  std::printf(
      "Usage: aijp_plan --cache FILE [options] MATRIX...\n"
      "\n"
      "The row partition the runtime would plan for each MATRIX (a Matrix Market file or gen:SPEC), computed on the\n"
      "host: the strip summaries, their x locality and column facts by the host references of the device passes,\n"
      "every block of strips priced by the placeholder model (the runtime's default) with the corrections of --cache,\n"
      "through the same block input as the runtime (a block stays in the L2 only beside the rest of its matrix, and has\n"
      "its strips' gather mixture), and the dynamic program of plan_partition. No GPU needed. Differences from the\n"
      "runtime: the whole matrix's x locality and gather mixture are its strips' (the device samples other windows),\n"
      "all strips are planned (no planning budget), and double precision is assumed.\n"
      "\n"
      "Per matrix it prints the best single format and its predicted time, the plan, its predicted time and ratio, and\n"
      "whether the runtime would take it (a split predicted below (1 - margin) x the best single format), then each\n"
      "block with its format, nonzeros and predicted time.\n"
      "\n"
      "Options:\n"
      "  --cache FILE            cache file of the GPU to plan for (its device and device_metrics are read), e.g.\n"
      "                          cache/defaults/h100.json\n"
      "  --strips N              strips of the dynamic program (default 64)\n"
      "  --blocks N              most blocks of a plan (default 8)\n"
      "  --margin F              fraction a split must beat the best single format by (default 0.03)\n"
      "  --candidates LIST       comma-separated formats (default: all; cusparse_csr is always added)\n"
      "  --free-gib N            free device memory the formats' feasibility is checked against (default 64)\n"
      "  --threads-per-sm N      resident threads per SM of that GPU (default 2048)\n"
      "  --threads-per-block N   maximum threads per block (default 1024)\n"
      "  --help                  this text\n");
}

double parse_fraction(const std::string& flag, const char* v)
{
  char* end = nullptr;
  const double x = v ? std::strtod(v, &end) : -1.0;
  if (!v || *end != '\0' || !(x >= 0.0 && x < 1.0)) die(flag + " needs a fraction in [0, 1)");
  return x;
}

std::vector<aijp::format_id> parse_candidates(const std::string& list)
{
  std::vector<aijp::format_id> out{aijp::format_id::cusparse_csr};
  try {
    for (const auto f : aijp::parse_format_list(list)) {
      if (f != aijp::format_id::cusparse_csr) out.push_back(f);
    }
  } catch (const std::exception& e) {
    die(std::string("--candidates: ") + e.what());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv)
{
  std::string cache_file;
  int strips = 64, blocks = 8, threads_per_sm = 2048, threads_per_block = 1024, free_gib = 64;
  double margin = 0.03;
  std::vector<aijp::format_id> candidates = aijp::all_formats();
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--cache" && v) {
      cache_file = argv[++i];
    } else if (a == "--strips") {
      strips = aijp::bench::parse_int(a, v, 1), ++i;
    } else if (a == "--blocks") {
      blocks = aijp::bench::parse_int(a, v, 1), ++i;
    } else if (a == "--margin") {
      margin = parse_fraction(a, v), ++i;
    } else if (a == "--candidates" && v) {
      candidates = parse_candidates(argv[++i]);
    } else if (a == "--free-gib") {
      free_gib = aijp::bench::parse_int(a, v, 1), ++i;
    } else if (a == "--threads-per-sm") {
      threads_per_sm = aijp::bench::parse_int(a, v, 32), ++i;
    } else if (a == "--threads-per-block") {
      threads_per_block = aijp::bench::parse_int(a, v, 32), ++i;
    } else if (!a.empty() && a[0] == '-') {
      die("unknown or incomplete option '" + a + "' (see --help)");
    } else {
      inputs.push_back(a);
    }
  }
  if (cache_file.empty()) die("--cache is required (see --help)");
  if (inputs.empty()) die("no MATRIX given (see --help)");

  const auto cd = aijp::bench::read_cache_device(cache_file, threads_per_sm, threads_per_block);
  const aijp::device_properties& dev = cd.device;
  const aijp::bandwidth_model_params& params = cd.params;
  std::printf("# device: %s (from %s); %d strips, at most %d blocks, margin %.3f, %zu candidates\n", dev.to_string().c_str(),
              cache_file.c_str(), strips, blocks, margin, candidates.size());

  int failures = 0;
  for (const auto& arg : inputs) {
    try {
      const auto m = aijp::bench::load_input(arg);
      const auto a = m.a.view();
      const auto t0 = std::chrono::steady_clock::now();
      const aijp::row_stats whole_stats = aijp::compute_row_stats(a);
      auto summaries = aijp::compute_strip_summaries(a, aijp::strip_rows_for(whole_stats.rows, strips));
      aijp::add_strip_locality_host(a, summaries, 2);
      aijp::add_strip_columns_host(a, summaries);
      aijp::strip_accumulator all;
      for (const auto& s : summaries) all.add(s);
      aijp::prediction_input whole;
      whole.stats = whole_stats;
      whole.device = dev;
      whole.free_memory_bytes = static_cast<aijp::size_type>(free_gib) << 30;
      whole.value_bytes = 8;
      whole.x_sectors_per_nnz = all.x_sectors_per_nnz();
      whole.x_mixture = all.x_mixture();
      whole.max_column_step = all.max_column_step();
      whole.columns_sorted = all.unsorted_steps() == 0;
      const auto cost = [&](const aijp::block_facts& block, std::vector<double>& us) {
        const auto est = aijp::predict_bandwidth_model(aijp::block_prediction_input(whole, block), params, candidates);
        for (std::size_t k = 0; k < est.size(); ++k) us[k] = est[k].feasible ? est[k].predicted_us : std::numeric_limits<double>::infinity();
      };
      aijp::planner_options opts;
      opts.max_strips = strips;
      opts.max_blocks = blocks;
      const auto plan = aijp::plan_partition(summaries, whole_stats.cols, candidates, cost, opts, &whole_stats, whole.x_sectors_per_nnz);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const bool taken = plan.split() && plan.predicted_us < (1 - margin) * plan.single_us;
      std::printf("%s: %lld x %lld, %lld nonzeros, mean %.2f, max %lld; %d strips of %lld rows; %.0f ms on the host\n",
                  m.name.c_str(), static_cast<long long>(whole_stats.rows), static_cast<long long>(whole_stats.cols),
                  static_cast<long long>(whole_stats.nnz), whole_stats.mean, static_cast<long long>(whole_stats.max_len),
                  plan.strips, static_cast<long long>(plan.strip_rows), ms);
      std::printf("  single  %s %.2f us\n", aijp::format_name(plan.single_format), plan.single_us);
      std::printf("  plan    %s %.2f us (%.3fx): %s\n", plan.to_string().c_str(), plan.predicted_us,
                  plan.predicted_us > 0 ? plan.single_us / plan.predicted_us : 0.0,
                  !plan.split() ? "one block" : taken ? "taken" : "below the margin");
      if (plan.split()) {
        for (const auto& b : plan.blocks) {
          std::printf("    %-14s [%lld, %lld) %lld nonzeros %.2f us\n", aijp::format_name(b.format),
                      static_cast<long long>(b.row_begin), static_cast<long long>(b.row_end), static_cast<long long>(b.nnz),
                      b.predicted_us);
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "aijp_plan: %s: %s\n", arg.c_str(), e.what());
      ++failures;
    }
  }
  return failures ? 1 : 0;
}
