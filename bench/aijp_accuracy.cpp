// aijp_accuracy: predicted versus measured SpMV time, per format and per model, on a list of matrices, with
// the selection regret of each model. Coefficients come from this GPU's cache (run aijp_warmup first).
#include <aijpredict/cache.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/matrix_market.hpp>
#include <aijpredict/measure.hpp>
#include <aijpredict/model_samples.hpp>
#include <aijpredict/models.hpp>

#include <cuda_runtime_api.h>

#include "accuracy_summary.hpp"
#include "interleaved_rounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tool_support.hpp"

const char* const aijp::bench::tool_name = "aijp_accuracy";

namespace {

using aijp::bench::die;


const char* usage =
    "Usage: aijp_accuracy [options] MATRIX...\n"
    "\n"
    "For each MATRIX (a Matrix Market file, or gen:SPEC as in aijp_bench --help) measures every format's SpMV\n"
    "time (median of timed batches after warm-up, CUDA events; the median over --rounds interleaved rounds of\n"
    "all its formats) and compares it with each model's prediction,\n"
    "using the coefficients stored in this GPU's cache by aijp_warmup, plus the runtime's placeholder\n"
    "bandwidth model. Prints, per model and format, the mean, median and 95th-percentile relative error\n"
    "|predicted - measured| / measured, and per model the selection regret (measured time of the format the\n"
    "model predicts fastest, over the measured-fastest, among the formats the model covers) as a geometric\n"
    "mean, with the fraction of matrices where the predicted-best is within 5 % of the measured-best; and the\n"
    "same for the runtime's rule, which keeps cuSPARSE CSR unless the predicted-best beats its prediction by\n"
    "the baseline margin.\n"
    "\n"
    "Options:\n"
    "  --cache-dir DIR   cache directory (default: $AIJPREDICT_CACHE_DIR, else $XDG_CACHE_HOME/aijpredict)\n"
    "  --min-nnz N       skip matrices with fewer nonzeros (default 0)\n"
    "  --rounds R        interleaved rounds over a matrix's formats, median per format (default 3)\n"
    "  --csv FILE        one row per (matrix, format): measured and each model's prediction (for plotting with\n"
    "                    bench/plot_accuracy.py)\n"
    "  --json FILE       the summary as JSON\n"
    "  --baseline-margin F  margin of the runtime's rule (default 0.03, as plan_options::baseline_margin)\n"
    "  --samples FILE    also write every measurement with its matrix features as JSON lines (the warm-up's\n"
    "                    samples format), so models can be refitted and compared offline\n"
    "  --gated           time each batch queued behind a gate kernel (the products' device time, without the\n"
    "                    host's issue rate; aijp::timing_options::gated)\n"
    "  --launch-gap      move the models' predictions by each product's kernels times the gap between\n"
    "                    back-to-back empty kernels measured before each matrix minus the warm-up's (off by\n"
    "                    default: on an H100 that gap moved by -0.28 us between a warm-up and its held-out\n"
    "                    matrices while the products' own offsets moved by -0.1 us, and the shift took the\n"
    "                    table from 12 to 7 formats meeting; docs/models.md, Session 49). The gap is measured and\n"
    "                    written to --samples either way (aijp_refit --sample-gaps applies it offline)\n"
    "  --no-launch-gap   the default (kept for scripts that pass it)\n"
    "  --help            this text\n";

}  // namespace

int main(int argc, char** argv)
{
  double baseline_margin = aijp::default_baseline_margin;
  std::string cache_dir, csv, json, samples_path;
  long long min_nnz = 0;
  int rounds = 3;
  bool gated = false, launch_gap = false;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    } else if (a == "--cache-dir" && i + 1 < argc) {
      cache_dir = argv[++i];
    } else if (a == "--csv" && i + 1 < argc) {
      csv = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else if (a == "--baseline-margin" && i + 1 < argc) {
      baseline_margin = std::atof(argv[++i]);
      if (!(baseline_margin >= 0 && baseline_margin < 1)) die("--baseline-margin must be in [0, 1)");
    } else if (a == "--samples" && i + 1 < argc) {
      samples_path = argv[++i];
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
      if (rounds < 1) die("--rounds must be at least 1");
    } else if (a == "--gated") {
      gated = true;
    } else if (a == "--launch-gap") {
      launch_gap = true;
    } else if (a == "--no-launch-gap") {
      launch_gap = false;
    } else if (a == "--min-nnz" && i + 1 < argc) {
      min_nnz = std::atoll(argv[++i]);
    } else if (!a.empty() && a[0] == '-') {
      die("unknown or incomplete option '" + a + "' (see --help)");
    } else {
      inputs.push_back(a);
    }
  }
  if (inputs.empty()) die("no matrix given (see --help)");
  std::string why;
  if (!aijp::device_available(&why)) die(why + ": this tool needs a GPU");

  try {
    aijp::context_options co;
    co.cache_dir = cache_dir;
    aijp::context ctx(co);
    const auto& dev = ctx.device();
    const aijp::cache::store store(cache_dir.empty() ? aijp::cache::default_directory() : std::filesystem::path(cache_dir));
    const auto loaded = store.load(aijp::make_fingerprint(dev));
    if (loaded.status != aijp::cache::load_status::ok) die("no usable cache for this GPU (" + loaded.message + "); run aijp_warmup first");
    std::vector<std::unique_ptr<aijp::model::performance_model>> models;
    for (const auto& name : aijp::model::model_names()) {
      const auto it = loaded.entry->coefficients.find(name);
      if (it == loaded.entry->coefficients.end()) {
        std::fprintf(stderr, "aijp_accuracy: model %s has no coefficients in %s; skipped\n", name.c_str(), loaded.path.c_str());
        continue;
      }
      auto m = aijp::model::make_model(name);
      m->set_coefficients(it->second);
      models.push_back(std::move(m));
    }
    std::printf("# device: %s\n# coefficients: %s\n# timing: %s\n", dev.to_string().c_str(), loaded.path.c_str(),
                gated ? "gated (device time: each batch queued behind a gate kernel)" : "back to back (host issue included)");
    // The gap between back-to-back kernels, measured before each matrix as its products are timed: where the
    // cache recorded its warm-up's, timed the same way, every model's predictions move by each product's
    // kernels times the difference (context::measure_launch_gap).
    const aijp::bandwidth_model_params& cached = ctx.model_params();
    const bool same_timing = (cached.launch_gap_gated > 0) == gated;
    const bool shift = launch_gap && cached.launch_gap_us > 0 && same_timing;
    if (cached.launch_gap_us > 0) {
      std::printf("# launch gap of the warm-up: %.3f us (%s)%s\n", cached.launch_gap_us, cached.launch_gap_gated > 0 ? "gated" : "back to back",
                  shift ? "; predictions moved by the gap measured before each matrix"
                        : !launch_gap ? "; predictions not moved (--launch-gap moves them)" : "; predictions not moved: timed otherwise than the products here");
    } else {
      std::printf("# launch gap of the warm-up: not recorded (cache written before session 47); predictions not moved\n");
    }
    std::vector<double> gaps;

    std::ofstream samples_out;
    if (!samples_path.empty()) {
      samples_out.open(samples_path);
      if (!samples_out) die("cannot write " + samples_path);
    }
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) die("cannot create a stream");
    std::vector<aijp::bench::accuracy_row> rows;
    int idx = 0;
    for (const auto& in : inputs) {
      ++idx;
      aijp::bench::input_matrix input;
      try {
        input = aijp::bench::load_input(in);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "aijp_accuracy: skipping %s: %s\n", in.c_str(), e.what());
        continue;
      }
      const aijp::csr_matrix<double>& a = input.a;
      const std::string& name = input.name;
      if (a.nnz() < min_nnz) continue;
      std::fprintf(stderr, "[%d/%zu] %s (%lld nnz)\n", idx, inputs.size(), name.c_str(), (long long)a.nnz());
      // Only the statistics are needed: forcing cuSPARSE CSR skips a conversion the report never times.
      aijp::plan_options stats_only;
      stats_only.forced = aijp::format_id::cusparse_csr;
      aijp::gpu_matrix<double> probe(ctx, a.view(), stats_only, stream);
      aijp::model::matrix_features feat;
      feat.stats = probe.report().stats;
      feat.value_bytes = 8;
      feat.x_sectors_per_nnz = probe.report().x_sectors_per_nnz;
      feat.sorted = probe.report().sorted;
      feat.x_mixture = probe.report().x_mixture;
      // The placeholder's own estimates (the probe's report holds the fitted model's where there is one).
      aijp::prediction_input pin;
      pin.stats = feat.stats;
      pin.device = dev;
      pin.value_bytes = 8;
      pin.x_sectors_per_nnz = feat.x_sectors_per_nnz;
      pin.sorted = feat.sorted;
      pin.x_mixture = feat.x_mixture;
      double *x = nullptr, *y = nullptr;
      if (cudaMalloc(reinterpret_cast<void**>(&x), std::max<size_t>(1, a.cols) * sizeof(double)) != cudaSuccess ||
          cudaMalloc(reinterpret_cast<void**>(&y), std::max<size_t>(1, a.rows) * sizeof(double)) != cudaSuccess) {
        die("out of device memory");
      }
      cudaMemsetAsync(x, 0, a.cols * sizeof(double), stream);
      // Every format built first, then timed in `rounds` interleaved rounds (each round in a rotated order);
      // a format's time is the median over rounds of its per-round medians. A disturbance of the GPU or the
      // host then moves one round of every format, not one format's only measurement: launch-bound
      // products differ by tenths of a microsecond between formats.
      std::vector<std::unique_ptr<aijp::gpu_matrix<double>>> built;
      for (auto f : aijp::all_formats()) {
        aijp::plan_options po;
        po.forced = f;
        try {
          auto g = std::make_unique<aijp::gpu_matrix<double>>(ctx, a.view(), po, stream);
          if (g->format() == f) built.push_back(std::move(g));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "aijp_accuracy: %s: %s not measured: %s\n", name.c_str(), aijp::format_name(f), e.what());
        }
      }
      aijp::timing_options to;
      to.gated = gated;
      const double gap = shift ? ctx.measure_launch_gap(stream) : aijp::measure_launch_gap(stream, dev, to).median_us;
      gaps.push_back(gap);
      const auto placeholder = aijp::predict_bandwidth_model(pin, ctx.model_params(), aijp::all_formats());
      auto per_round = aijp::bench::interleaved_rounds(built, rounds, x, y, stream, to);
      for (std::size_t j = 0; j < built.size(); ++j) {
        const aijp::format_id f = built[j]->format();
        std::sort(per_round[j].begin(), per_round[j].end());
        aijp::bench::accuracy_row r{name, f, per_round[j][per_round[j].size() / 2], {}};
        for (const auto& m : models) {
          if (const auto p = m->predict_us(f, feat, dev)) {
            // As the runtime; moved by the same gap as the placeholder (every model was fitted on the warm-up's samples
            // at its gap), so that the side-by-side stays fair.
            r.predicted[m->name()] = aijp::at_launch_shift(f, feat.stats, ctx.model_params(),
                                                           aijp::at_least_launches(f, feat.stats, 8, ctx.model_params(), *p, &dev));
          }
        }
        for (const auto& e : placeholder) {
          if (e.format == f) r.predicted["placeholder"] = e.predicted_us;
        }
        if (samples_out) {
          aijp::model::sample smp;
          smp.format = f;
          smp.source = aijp::model::family::other;
          smp.features = feat;
          smp.measured_us = r.measured;
          smp.matrix = name;
          smp.launch_gap_us = gap;
          samples_out << aijp::model::to_json_line(smp) << "\n";
        }
        rows.push_back(r);
      }
      cudaFree(x);
      cudaFree(y);
    }
    cudaStreamDestroy(stream);
    if (!gaps.empty()) {
      std::sort(gaps.begin(), gaps.end());
      std::printf("# launch gap before the %zu matrices: min %.3f, median %.3f, max %.3f us", gaps.size(), gaps.front(), gaps[gaps.size() / 2],
                  gaps.back());
      if (cached.launch_gap_us > 0) std::printf(" (median %+.3f us from the warm-up's)", gaps[gaps.size() / 2] - cached.launch_gap_us);
      std::printf("\n");
    }

    std::vector<std::string> names{"placeholder"};
    for (const auto& m : models) names.push_back(m->name());
    aijp::bench::print_accuracy_summary(rows, names, dev.name, json, baseline_margin);
    if (!csv.empty()) aijp::bench::write_accuracy_csv(rows, names, csv);
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
