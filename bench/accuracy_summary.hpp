// Accuracy summary shared by aijp_accuracy (measures on the GPU) and aijp_refit (refits offline from sample
// files): per model and format the mean, median and 95th-percentile relative error, per model the selection
// regret, and the CSV / JSON outputs. Host C++ only.
#pragma once

#include <aijpredict/formats.hpp>
#include <aijpredict/models.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace aijp::bench {

/// One (matrix, format) measurement and every model's prediction of it.
struct accuracy_row {
  std::string matrix;
  format_id format = format_id::cusparse_csr;
  double measured = 0;
  std::map<std::string, double> predicted;  ///< model -> us
};

inline double quantile(std::vector<double> v, double q)
{
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(q * (v.size() - 1)))];
}

/// Prints the error table and the regret table to stdout in model order `names`; writes them as JSON to
/// `json_path` when it is not empty. The regret table gives, per model, the regret of its predicted-best
/// format (the smallest prediction) and, for the models that predict cuSPARSE CSR, the regret of the
/// runtime's rule (plan_options::baseline_margin): the predicted-best only when predicted faster than cuSPARSE
/// CSR by more than `baseline_margin`, else cuSPARSE CSR.
inline void print_accuracy_summary(const std::vector<accuracy_row>& rows, const std::vector<std::string>& names,
                                   const std::string& device_name, const std::string& json_path, double baseline_margin)
{
  std::printf("\n%-20s %-18s %6s %8s %8s %8s\n", "model", "format", "n", "mean%", "median%", "p95%");
  std::ofstream js;
  if (!json_path.empty()) {
    js.open(json_path);
    js << "{\n  \"device\": \"" << device_name << "\",\n  \"errors\": [\n";
  }
  bool first = true;
  for (const auto& name : names) {
    for (auto f : all_formats()) {
      std::vector<double> err;
      for (const auto& r : rows) {
        const auto it = r.predicted.find(name);
        if (r.format == f && it != r.predicted.end()) err.push_back(model::relative_error(it->second, r.measured));
      }
      if (err.empty()) continue;
      double mean = 0;
      for (double e : err) mean += e;
      mean /= err.size();
      std::printf("%-20s %-18s %6zu %8.1f %8.1f %8.1f\n", name.c_str(), format_name(f), err.size(), 100 * mean,
                  100 * quantile(err, 0.5), 100 * quantile(err, 0.95));
      if (js) {
        js << (first ? "" : ",\n") << "    {\"model\": \"" << name << "\", \"format\": \"" << format_name(f)
           << "\", \"n\": " << err.size() << ", \"mean\": " << mean << ", \"median\": " << quantile(err, 0.5)
           << ", \"p95\": " << quantile(err, 0.95) << "}";
        first = false;
      }
    }
  }
  // Selection regret per model, among the formats it covers.
  std::printf("\n%-20s %10s %12s %8s   %s\n", "model", "matrices", "regret_geo", "within5%", "with the baseline margin: regret_geo within5%");
  if (js) js << "\n  ],\n  \"regret\": [\n";
  first = true;
  for (const auto& name : names) {
    std::map<std::string, std::vector<const accuracy_row*>> by_matrix;
    for (const auto& r : rows) {
      if (r.predicted.count(name)) by_matrix[r.matrix].push_back(&r);
    }
    double log_sum = 0, log_sum_rule = 0;
    int n = 0, within = 0, within_rule = 0;
    bool rule = true;  // every matrix has a cuSPARSE CSR prediction
    for (const auto& [mname, rs] : by_matrix) {
      if (rs.size() < 2) continue;
      const accuracy_row* best = rs[0];
      const accuracy_row* pick = rs[0];
      const accuracy_row* csr = nullptr;
      for (const accuracy_row* r : rs) {
        if (r->measured < best->measured) best = r;
        if (r->predicted.at(name) < pick->predicted.at(name)) pick = r;
        if (r->format == format_id::cusparse_csr) csr = r;
      }
      const double regret = pick->measured / best->measured;
      log_sum += std::log(regret);
      ++n;
      within += regret <= 1.05;
      rule = rule && csr != nullptr;
      if (csr) {
        const bool keep = pick->predicted.at(name) <= (1 - baseline_margin) * csr->predicted.at(name);
        const double r = (keep ? pick : csr)->measured / best->measured;
        log_sum_rule += std::log(r);
        within_rule += r <= 1.05;
      }
    }
    if (n == 0) continue;
    std::printf("%-20s %10d %12.3f %7.0f%%", name.c_str(), n, std::exp(log_sum / n), 100.0 * within / n);
    if (rule) std::printf("   %10.3f %7.0f%%", std::exp(log_sum_rule / n), 100.0 * within_rule / n);
    std::printf("\n");
    if (js) {
      js << (first ? "" : ",\n") << "    {\"model\": \"" << name << "\", \"matrices\": " << n
         << ", \"regret_geomean\": " << std::exp(log_sum / n) << ", \"within_5pct\": " << double(within) / n;
      if (rule) {
        js << ", \"baseline_margin\": " << baseline_margin << ", \"margin_regret_geomean\": " << std::exp(log_sum_rule / n)
           << ", \"margin_within_5pct\": " << double(within_rule) / n;
      }
      js << "}";
      first = false;
    }
  }
  if (js) js << "\n  ]\n}\n";
}

/// One CSV row per (matrix, format): measured and each model's prediction (bench/plot_accuracy.py reads it).
inline void write_accuracy_csv(const std::vector<accuracy_row>& rows, const std::vector<std::string>& names, const std::string& path)
{
  std::ofstream c(path);
  c << "matrix,format,measured_us";
  for (const auto& n : names) c << "," << n;
  c << "\n";
  for (const auto& r : rows) {
    c << '"' << r.matrix << "\"," << format_name(r.format) << "," << r.measured;
    for (const auto& n : names) {
      const auto it = r.predicted.find(n);
      c << ",";
      if (it != r.predicted.end()) c << it->second;
    }
    c << "\n";
  }
}

}  // namespace aijp::bench
