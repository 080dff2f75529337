// aijp_refit: fits every performance model on measured samples and reports its accuracy on other samples,
// offline (no GPU). The training samples are a warm-up's samples file, the test samples come from
// `aijp_accuracy --samples` on held-out matrices; device properties and constants come from the cache file
// written on the GPU the samples were measured on. Predictions go through the same code as the runtime
// (model, then aijp::at_least_launches), so the report equals what aijp_accuracy would print for the same
// coefficients, and a model change can be evaluated on the committed measurements without a GPU.
#include <aijpredict/cache.hpp>
#include <aijpredict/error.hpp>
#include <aijpredict/model_samples.hpp>
#include <aijpredict/models.hpp>
#include <aijpredict/predict.hpp>

#include "accuracy_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cache_device.hpp"
#include "tool_support.hpp"

const char* const aijp::bench::tool_name = "aijp_refit";

namespace {

using aijp::bench::die;


const char* usage =
    "Usage: aijp_refit --cache FILE --train FILE --test FILE [options]\n"
    "\n"
    "Fits every performance model on the --train samples (a warm-up's <device>.samples.jsonl) and prints,\n"
    "for the --test samples (written by aijp_accuracy --samples on held-out matrices), each model's mean,\n"
    "median and 95th-percentile relative error per format and its selection regret, exactly as aijp_accuracy\n"
    "reports them. No GPU needed: the device properties and measured constants (launch time, streaming\n"
    "bandwidth) come from --cache, the cache file written on the GPU the samples were measured on.\n"
    "\n"
    "Options:\n"
    "  --cache FILE             cache file of the measuring GPU (its device and device_metrics are read)\n"
    "  --train FILE             samples to fit on (JSON lines; FILE.xz is read through xz)\n"
    "  --test FILE              samples to evaluate on (JSON lines; FILE.xz likewise)\n"
    "  --models LIST            comma-separated models to fit (default: all); the placeholder is always shown\n"
    "  --threads-per-sm N       resident threads per SM of that GPU (default 2048: every sm_70..sm_90 GPU)\n"
    "  --threads-per-block N    maximum threads per block (default 1024)\n"
    "  --csv FILE               one row per test sample: measured and each model's prediction\n"
    "  --json FILE              the summary as JSON\n"
    "  --explain FILE           one row per test sample: the placeholder's terms (fixed, floor, stream, chain, l2 and\n"
    "                           the gather mixture's, us), its prediction, the measured time and the row statistics\n"
    "                           and locality behind them\n"
    "  --baseline-margin F      margin of the runtime's rule in the regret table (default 0.03)\n"
    "  --write-cache DIR        write the cache entry with the refitted coefficients to DIR/<device>.json\n"
    "  --no-fit                 the placeholder keeps the corrections --cache holds (its device_metrics) instead of\n"
    "                           refitting them on --train (which then only gives the launch floor): how a shipped\n"
    "                           default predicts --test\n"
    "  --launch-shift US        move every prediction of --test (every model's) by its product's kernels times US: the\n"
    "                           held-out products' offset per kernel minus the warm-up's (default 0: not moved)\n"
    "  --sample-gaps            instead, move each --test prediction by the sample's own launch_gap_us (the gap\n"
    "                           between back-to-back empty kernels aijp_accuracy measured before its matrix) minus\n"
    "                           the fit's, where --test and --train, or --cache, carry one (aijp_accuracy\n"
    "                           --launch-gap's shift; not the default since it overshot on an H100, docs/models.md,\n"
    "                           Session 49)\n"
    "  --help                   this text\n"
    "\n"
    "The --train samples that carry a measured gap (launch_gap_us) are fitted as measured at their median gap, which\n"
    "--write-cache stores as the cache's launch_gap_us.\n";

}  // namespace

int main(int argc, char** argv)
{
  double baseline_margin = aijp::default_baseline_margin;
  std::string cache_file, train_file, test_file, csv, json, write_dir, model_list, explain;
  int threads_per_sm = 2048, threads_per_block = 1024;
  bool no_fit = false;
  double launch_shift = 0;
  bool launch_shift_given = false, sample_gaps = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    } else if (a == "--cache" && has_value) {
      cache_file = argv[++i];
    } else if (a == "--train" && has_value) {
      train_file = argv[++i];
    } else if (a == "--test" && has_value) {
      test_file = argv[++i];
    } else if (a == "--models" && has_value) {
      model_list = argv[++i];
    } else if (a == "--threads-per-sm" && has_value) {
      threads_per_sm = std::atoi(argv[++i]);
    } else if (a == "--threads-per-block" && has_value) {
      threads_per_block = std::atoi(argv[++i]);
    } else if (a == "--csv" && has_value) {
      csv = argv[++i];
    } else if (a == "--explain" && has_value) {
      explain = argv[++i];
    } else if (a == "--json" && has_value) {
      json = argv[++i];
    } else if (a == "--baseline-margin" && has_value) {
      baseline_margin = std::atof(argv[++i]);
      if (!(baseline_margin >= 0 && baseline_margin < 1)) die("--baseline-margin must be in [0, 1)");
    } else if (a == "--launch-shift" && has_value) {
      char* end = nullptr;
      launch_shift = std::strtod(argv[++i], &end);
      if (end == argv[i] || *end != '\0' || !std::isfinite(launch_shift) || std::abs(launch_shift) > 100)
        die(std::string("--launch-shift takes microseconds in [-100, 100], not '") + argv[i] + "'");
      launch_shift_given = true;
    } else if (a == "--sample-gaps") {
      sample_gaps = true;
    } else if (a == "--no-fit") {
      no_fit = true;
    } else if (a == "--write-cache" && has_value) {
      write_dir = argv[++i];
    } else {
      die("unknown or incomplete option '" + a + "' (see --help)");
    }
  }
  if (cache_file.empty() || train_file.empty() || test_file.empty()) die("--cache, --train and --test are required (see --help)");
  if (threads_per_sm <= 0 || threads_per_block <= 0) die("--threads-per-sm and --threads-per-block must be positive");
  if (sample_gaps && launch_shift_given) die("--launch-shift and --sample-gaps each choose the shift: give one");

  try {
    auto cd = aijp::bench::read_cache_device(cache_file, threads_per_sm, threads_per_block);
    aijp::cache::cache_entry& entry = cd.entry;
    const aijp::device_properties& dev = cd.device;
    aijp::bandwidth_model_params& params = cd.params;

    auto train = aijp::model::read_samples(train_file);
    const auto test = aijp::model::read_samples(test_file);
    if (train.samples.empty()) die("no samples in " + train_file);
    if (test.samples.empty()) die("no samples in " + test_file);
    // The training samples as measured at their median gap (the warm-up fits them so), the gap the fit describes.
    const double train_gap = no_fit ? 0.0 : aijp::model::median_launch_gap_us(train.samples);
    if (train_gap > 0) {
      train.samples = aijp::model::at_launch_gap(std::move(train.samples), train_gap);
      params.launch_gap_us = train_gap;
    }
    // As the warm-up stores it: the launch floor is never above the fastest measured SpMV.
    const double fastest = aijp::model::fastest_spmv_us(train.samples);
    if (fastest > 0 && fastest < params.launch_us) params.launch_us = fastest;
    // As the warm-up fits them: the placeholder's per-format fixed costs from the training samples.
    const auto fitted = no_fit ? aijp::format_fit{} : aijp::model::fit_format_corrections(train.samples, dev, params);
    std::printf("# device: %s (from %s)\n# train: %zu samples (%d bad lines) from %s\n# test: %zu samples (%d bad lines) from %s\n",
                dev.to_string().c_str(), cache_file.c_str(), train.samples.size(), train.bad_lines, train_file.c_str(),
                test.samples.size(), test.bad_lines, test_file.c_str());
    std::printf("# placeholder fixed costs beyond its launches (us, from the training samples dominated by them):");
    for (int f = 0; f < aijp::format_count; ++f) {
      if (fitted.fixed[f] > 0) std::printf(" %s %+.2f (%d)", aijp::format_name(static_cast<aijp::format_id>(f)), params.format_fixed_us[f], fitted.fixed[f]);
    }
    std::printf("\n# placeholder floors (us, median of the training samples whose variable terms are below a quarter launch):");
    for (int f = 0; f < aijp::format_count; ++f) {
      if (fitted.floor[f] > 0)
        std::printf(" %s %.2f%s (%d)", aijp::format_name(static_cast<aijp::format_id>(f)), params.format_floor_us[f],
                    params.format_floor_adds_l2[f] > 0 ? " + L2 term" : "", fitted.floor[f]);
    }
    if (params.cusparse_csr_floor_us_per_doubling > 0 || params.cusparse_csr_floor_us_per_row_share > 0)
      std::printf("; cusparse_csr + %.3f per doubling of the rows + %.2f x rows / nnz", params.cusparse_csr_floor_us_per_doubling,
                  params.cusparse_csr_floor_us_per_row_share);
    std::printf("\n# placeholder floors where y fits in %.0f bytes (us, the same samples of such a y):", aijp::small_y_bytes);
    for (int f = 0; f < aijp::format_count; ++f) {
      if (fitted.floor_small_y[f] > 0)
        std::printf(" %s %.2f (%d)", aijp::format_name(static_cast<aijp::format_id>(f)), params.format_floor_small_y_us[f],
                    fitted.floor_small_y[f]);
    }
    std::printf("\n# placeholder chain factors (from the training samples a chain dominates):");
    for (int f = 0; f < aijp::format_count; ++f) {
      if (fitted.chain[f] > 0) {
        std::printf(" %s %.2f", aijp::format_name(static_cast<aijp::format_id>(f)), params.format_chain_scale[f]);
        if (fitted.lanes[f] > 0) std::printf(" (+%.2f at 32 lanes)", params.format_chain_lanes[f]);
        if (fitted.chain_dram[f] > 0) std::printf(" (DRAM %.2f, +%.2f at 32 lanes, %d)", params.format_chain_scale_dram[f], params.format_chain_lanes_dram[f] >= 0 ? params.format_chain_lanes_dram[f] : params.format_chain_lanes[f], fitted.chain_dram[f]);
        if (fitted.scatter_dram[f] > 0)
          std::printf(" (DRAM x %.2f along contiguous rows: scatter kappa %.2f, %d)", 1.0 - params.format_chain_scatter_dram[f],
                      params.format_chain_scatter_dram[f], fitted.scatter_dram[f]);
        std::printf(" (%d)", fitted.chain[f]);
        if (params.format_overlap[f] > 0) std::printf(" (+%.2f of the traffic term)", params.format_overlap[f]);
        if (params.format_chain_x_doubling[f] > 0)
          std::printf(" (in the L2 +%.2f per doubling of x, %d)", params.format_chain_x_doubling[f], fitted.chain_x[f]);
      }
    }
    if (fitted.cusparse_sell_wide > 0) {
      std::printf("\n# placeholder cusparse_sell chains in the L2 above %.0f stored entries: %.2f (%d)", params.cusparse_sell_wide_padded,
                  params.cusparse_sell_wide_chain_scale, fitted.cusparse_sell_wide);
    }
    // One line listing the formats a per-format choice applies to (`counts` > 0), each followed by value(f).
    const auto list_formats = [](const char* header, const std::array<int, aijp::format_count>& counts, const auto& value) {
      bool any = false;
      for (int f = 0; f < aijp::format_count; ++f) {
        if (counts[f] <= 0) continue;
        std::printf("%s %s%s", any ? "," : header, aijp::format_name(static_cast<aijp::format_id>(f)), value(f).c_str());
        any = true;
      }
    };
    // A per-format field's value of format f, printed with `format`.
    const auto value_of = [&](std::array<double, aijp::format_count> aijp::bandwidth_model_params::*field, const char* format) {
      return [&params, field, format](int f) {
        char v[32];
        std::snprintf(v, sizeof v, format, (params.*field)[f]);
        return std::string(v);
      };
    };
    list_formats("\n# placeholder matrix bytes in the L2 term beyond the L2 (share):", fitted.l2_matrix_share,
                 value_of(&aijp::bandwidth_model_params::format_l2_matrix_share, " %.2f"));
    list_formats("\n# placeholder layouts in the L2 read at the L2 term's pace:", fitted.l2_stream, [](int) { return std::string(); });
    list_formats("\n# placeholder idle lanes' offset on the streaming rate (0.04 elsewhere):", fitted.idle_lane,
                 value_of(&aijp::bandwidth_model_params::format_idle_lane_offset, " %.2f"));
    list_formats("\n# placeholder streaming rate per doubling of the mean row above 8:", fitted.stream_row,
                 value_of(&aijp::bandwidth_model_params::format_stream_row_doubling, " %+.2f"));
    if (fitted.coo_efficiency > 0) std::printf("\n# placeholder COO streaming efficiency: %.3f (%d)", params.coo_efficiency, fitted.coo_efficiency);
    if (fitted.csr_scalar_x_reread > 0)
      std::printf("\n# placeholder csr_scalar x re-reads: L2 share %.2f (%d)", params.csr_scalar_x_reread_l2_share, fitted.csr_scalar_x_reread);
    for (int f = 0; f < aijp::format_count; ++f) {
      if (fitted.l2_gather[f] > 0)
        std::printf("\n# placeholder %s L2 rate: %.0f GB/s (%d; calibrated for every format: %.0f)", aijp::format_name(static_cast<aijp::format_id>(f)),
                    params.format_l2_gather_gbs[f], fitted.l2_gather[f], params.l2_gather_gbs);
    }
    if (fitted.l2_resident > 0)
      std::printf("\n# placeholder layouts in the L2 below %.2f of it (training mean error %.1f %%, %.1f %% with the whole L2; %d samples)",
                  params.l2_resident_share, 100 * fitted.l2_resident_error, 100 * fitted.l2_resident_error_whole, fitted.l2_resident);
    if (fitted.hyb_empty_ell > 0) std::printf("\n# placeholder HYB without an ELL part: %+.2f us beyond HYB's fixed cost (%d)", params.hyb_empty_ell_us, fitted.hyb_empty_ell);
    std::printf("\n");

    std::vector<std::string> names = aijp::model::model_names();
    if (!model_list.empty()) {
      names.clear();
      size_t pos = 0;
      while (pos <= model_list.size()) {
        const size_t comma = std::min(model_list.find(',', pos), model_list.size());
        if (comma > pos) names.push_back(model_list.substr(pos, comma - pos));
        pos = comma + 1;
      }
    }
    std::vector<std::unique_ptr<aijp::model::performance_model>> models;
    for (const auto& n : names) {
      auto m = aijp::model::make_model(n);
      m->fit(train.samples, dev);
      entry.coefficients[n] = m->coefficients();
      models.push_back(std::move(m));
    }

    std::vector<aijp::bench::accuracy_row> rows;
    std::FILE* ex = nullptr;
    if (!explain.empty()) {
      ex = std::fopen(explain.c_str(), "w");
      if (ex == nullptr) die("cannot write " + explain);
      std::fprintf(ex, "matrix,format,measured_us,predicted_us,fixed_us,floor_us,stream_us,chain_us,l2_us,rows,nnz,mean,mode_len,max_len,stddev,"
                       "n_iter_natural,n_iter_sorted,x_sectors_per_nnz,cols,raw_chain_us,lanes,in_l2,moved_bytes,x_sectors_sorted,"
                       "min_len,hyb_ell_width,hyb_coo_nnz,chain_warp_nnz,mixture_us,x_mixture_mean,longest_row_len,longest_row_ratio\n");
    }
    int shifted = 0;
    std::vector<double> shifts;
    for (const auto& s : test.samples) {
      aijp::bench::accuracy_row r{s.matrix, s.format, s.measured_us, {}};
      const aijp::prediction_input pin = aijp::model::prediction_input_of(s, dev);
      // The gap at this sample against the fit's, as aijp_accuracy predicts (context::measure_launch_gap).
      aijp::bandwidth_model_params at = params;
      at.launch_shift_us = launch_shift_given ? launch_shift
                           : sample_gaps && s.launch_gap_us > 0 && params.launch_gap_us > 0 ? s.launch_gap_us - params.launch_gap_us
                                                                                              : 0.0;
      if (at.launch_shift_us != 0) {
        ++shifted;
        shifts.push_back(at.launch_shift_us);
      }
      for (const auto& e : aijp::predict_bandwidth_model(pin, at, {s.format})) r.predicted["placeholder"] = e.predicted_us;
      if (ex != nullptr) {
        const auto b = aijp::explain_bandwidth_model(s.format, pin, at);
        const auto& st = s.features.stats;
        std::fprintf(ex, "\"%s\",%s,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%lld,%lld,%.4g,%lld,%lld,%.4g,%lld,%lld,%.4g,%lld,%.4g,%.4g,%d,%.4g,%.4g,%lld,%lld,%lld,%lld,%.4g,%.4g,%.0f,%.4g\n", s.matrix.c_str(),
                     aijp::format_name(s.format), s.measured_us, b.predicted_us, b.fixed_us, b.floor_us, b.stream_us, b.chain_us, b.l2_us,
                     (long long)st.rows, (long long)st.nnz, st.mean, (long long)st.mode_len, (long long)st.max_len, st.stddev,
                     (long long)st.n_iter_natural, (long long)st.n_iter_sorted, s.features.x_sectors_per_nnz,
                     (long long)st.cols, b.raw_chain_us, b.lanes, b.in_l2 ? 1 : 0, b.moved_bytes,
                     pin.sorted.x_sectors_per_nnz, (long long)st.min_len, (long long)st.hyb_ell_width, (long long)st.hyb_coo_nnz,
                     (long long)st.chain_warp_nnz, b.mixture_us, pin.x_mixture.mean(), pin.x_mixture.longest_row_len,
                     pin.x_mixture.longest_row_ratio);
      }
      for (const auto& m : models) {
        if (const auto p = m->predict_us(s.format, s.features, dev)) {
          // Moved by the same gap as the placeholder's (every model is fitted on the training samples at their gap).
          r.predicted[m->name()] = aijp::at_launch_shift(s.format, s.features.stats, at,
                                                         aijp::at_least_launches(s.format, s.features.stats, s.features.value_bytes, params, *p, &dev));
        }
      }
      rows.push_back(std::move(r));
    }
    if (ex != nullptr && std::fclose(ex) != 0) die("error writing " + explain);
    if (train_gap > 0) std::printf("# training samples fitted at their median gap between back-to-back kernels: %.3f us\n", train_gap);
    if (shifted > 0) {
      std::sort(shifts.begin(), shifts.end());
      std::printf("# predictions (every model's) of %d test samples moved by their kernels x the gap's shift (%s; median %+.3f us)\n", shifted,
                  launch_shift_given ? "--launch-shift" : "the samples' gaps against the fit's", shifts[shifts.size() / 2]);
    }
    std::vector<std::string> shown{"placeholder"};
    for (const auto& m : models) shown.push_back(m->name());
    aijp::bench::print_accuracy_summary(rows, shown, dev.name, json, baseline_margin);
    if (!csv.empty()) aijp::bench::write_accuracy_csv(rows, shown, csv);
    if (!write_dir.empty()) {
      aijp::params_to_metrics(params, entry.device_metrics);
      entry.provenance["refit"] = "aijp_refit on " + std::filesystem::path(train_file).filename().string() + ", " +
                                  aijp::cache::iso8601_utc_now();
      const aijp::cache::store out(write_dir);
      out.save(entry);
      std::fprintf(stderr, "aijp_refit: wrote %s\n", out.path_for(entry.device).c_str());
    }
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
