#include <aijpredict/model_samples.hpp>

#include <aijpredict/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace aijp::model {

namespace {

using json = nlohmann::json;

family family_from(const std::string& s)
{
  for (auto f : {family::constant, family::normal, family::uniform, family::other}) {
    if (s == family_name(f)) return f;
  }
  AIJP_THROW(bad_input, "unknown sample family '" + s + "'");
}

}  // namespace

std::string to_json_line(const sample& s)
{
  const row_stats& t = s.features.stats;
  json j = {{"format", format_name(s.format)},
            {"family", family_name(s.source)},
            {"matrix", s.matrix},
            {"measured_us", s.measured_us},
            {"value_bytes", s.features.value_bytes},
            {"x_sectors_per_nnz", s.features.x_sectors_per_nnz},
            {"x_sectors_per_nnz_sorted", s.features.sorted.x_sectors_per_nnz},
            {"y_sectors_per_row_sorted", s.features.sorted.y_sectors_per_row},
            {"stats",
             {{"rows", t.rows}, {"cols", t.cols}, {"nnz", t.nnz}, {"mean", t.mean}, {"stddev", t.stddev},
              {"min_len", t.min_len}, {"max_len", t.max_len}, {"mode_len", t.mode_len}, {"mode_count", t.mode_count},
              {"empty_rows", t.empty_rows}, {"n_iter_natural", t.n_iter_natural}, {"n_iter_sorted", t.n_iter_sorted},
              {"n_p", t.n_p}, {"hyb_ell_width", t.hyb_ell_width}, {"hyb_coo_nnz", t.hyb_coo_nnz},
              {"chain_warp_nnz", t.chain_warp_nnz}, {"sorted_chain_lanes", t.sorted_chain_lanes}}}};
  if (s.features.x_mixture.known()) {
    json mix = json::array();
    for (int b = 0; b < gather_mixture::bins; ++b) mix.push_back({s.features.x_mixture.share[b], s.features.x_mixture.ratio[b]});
    j["x_mixture"] = mix;
  }
  if (s.features.x_mixture.longest_row_len > 0)
    j["x_longest_row"] = {s.features.x_mixture.longest_row_len, s.features.x_mixture.longest_row_ratio};
  if (s.launch_gap_us > 0) j["launch_gap_us"] = s.launch_gap_us;
  return j.dump();
}

sample from_json_line(const std::string& line)
{
  try {
    const json j = json::parse(line);
    sample s;
    s.format = parse_format(j.at("format").get<std::string>());
    s.source = family_from(j.at("family").get<std::string>());
    s.matrix = j.at("matrix").get<std::string>();
    s.measured_us = j.at("measured_us").get<double>();
    s.features.value_bytes = j.at("value_bytes").get<int>();
    s.features.x_sectors_per_nnz = j.at("x_sectors_per_nnz").get<double>();
    // Optional (samples written before the sorted-order locality was sampled: unknown, 0).
    s.features.sorted.x_sectors_per_nnz = j.value("x_sectors_per_nnz_sorted", 0.0);
    s.features.sorted.y_sectors_per_row = j.value("y_sectors_per_row_sorted", 0.0);
    // Optional (samples written before the gather mixture was sampled: unknown): [share, ratio] per bin.
    if (j.contains("x_mixture")) {
      const json& mix = j.at("x_mixture");
      if (!mix.is_array() || mix.size() != static_cast<std::size_t>(gather_mixture::bins))
        AIJP_THROW(bad_input, "bad sample line: x_mixture must hold " + std::to_string(gather_mixture::bins) + " [share, ratio] pairs");
      for (int b = 0; b < gather_mixture::bins; ++b) {
        s.features.x_mixture.share[b] = mix.at(b).at(0).get<double>();
        s.features.x_mixture.ratio[b] = mix.at(b).at(1).get<double>();
      }
    }
    // Optional (written before it was sampled: unknown): [length, sector changes per entry] of the longest row.
    if (j.contains("x_longest_row")) {
      const json& lr = j.at("x_longest_row");
      if (!lr.is_array() || lr.size() != 2 || !(lr.at(0).get<double>() >= 0) || !(lr.at(1).get<double>() >= 0) ||
          lr.at(1).get<double>() > 1.0)
        AIJP_THROW(bad_input, "bad sample line: x_longest_row must be [length >= 0, sector changes per entry in [0, 1]]");
      s.features.x_mixture.longest_row_len = lr.at(0).get<double>();
      s.features.x_mixture.longest_row_ratio = lr.at(1).get<double>();
    }
    const json& t = j.at("stats");
    row_stats& r = s.features.stats;
    r.rows = t.at("rows").get<size_type>();
    r.cols = t.at("cols").get<size_type>();
    r.nnz = t.at("nnz").get<size_type>();
    r.mean = t.at("mean").get<double>();
    r.stddev = t.at("stddev").get<double>();
    r.min_len = t.at("min_len").get<index_type>();
    r.max_len = t.at("max_len").get<index_type>();
    r.mode_len = t.at("mode_len").get<index_type>();
    r.mode_count = t.at("mode_count").get<size_type>();
    r.empty_rows = t.at("empty_rows").get<size_type>();
    r.n_iter_natural = t.at("n_iter_natural").get<size_type>();
    r.n_iter_sorted = t.at("n_iter_sorted").get<size_type>();
    r.n_p = t.at("n_p").get<size_type>();
    r.hyb_ell_width = t.at("hyb_ell_width").get<index_type>();
    r.hyb_coo_nnz = t.at("hyb_coo_nnz").get<size_type>();
    r.chain_warp_nnz = t.value("chain_warp_nnz", size_type{0});  // optional: older samples lack it (unknown)
    r.sorted_chain_lanes = t.value("sorted_chain_lanes", 0.0);    // likewise
    // Optional (samples written before session 47: not measured, 0).
    s.launch_gap_us = j.value("launch_gap_us", 0.0);
    AIJP_ENSURE(s.measured_us > 0, bad_input, "non-positive measured time");
    AIJP_ENSURE(s.launch_gap_us >= 0 && std::isfinite(s.launch_gap_us), bad_input, "bad sample line: negative launch_gap_us");
    return s;
  } catch (const json::exception& e) {
    AIJP_THROW(bad_input, std::string("bad sample line: ") + e.what());
  }
}

void append_sample(const std::string& path, const sample& s)
{
  const std::string line = to_json_line(s) + "\n";
  FILE* f = std::fopen(path.c_str(), "a");
  AIJP_ENSURE(f != nullptr, error, "cannot append to " + path);
  const bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size() && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  std::fclose(f);
  AIJP_ENSURE(ok, error, "write to " + path + " failed");
}

namespace {
// The text of an xz-compressed sample file (bench/results keeps older sample files compressed), through the
// xz tool; throws aijp::bad_input when it cannot be read.
std::string read_xz(const std::string& path)
{
  std::string quoted = "'";
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  FILE* p = ::popen(("xz -dc -- " + quoted + " 2>/dev/null").c_str(), "r");
  AIJP_ENSURE(p != nullptr, bad_input, "cannot run xz to read " + path);
  std::string text;
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  const int rc = ::pclose(p);
  AIJP_ENSURE(rc == 0, bad_input, "cannot decompress " + path + " (is xz installed, and is it an .xz file?)");
  return text;
}
}  // namespace

sample_file read_samples(const std::string& path)
{
  sample_file out;
  const bool xz = path.size() > 3 && path.compare(path.size() - 3, 3, ".xz") == 0;
  if (xz && !std::filesystem::exists(path)) return out;
  std::istringstream text(xz ? read_xz(path) : std::string());
  std::ifstream file;
  if (!xz) {
    file.open(path);
    if (!file) return out;
  }
  std::istream& in = xz ? static_cast<std::istream&>(text) : file;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      out.samples.push_back(from_json_line(line));
    } catch (const bad_input&) {
      ++out.bad_lines;
    }
  }
  return out;
}

double fastest_spmv_us(const std::vector<sample>& samples)
{
  double best = 0;
  for (const auto& s : samples) {
    if (s.measured_us > 0 && (best == 0 || s.measured_us < best)) best = s.measured_us;
  }
  return best;
}

double median_launch_gap_us(const std::vector<sample>& samples)
{
  std::vector<double> gaps;
  for (const auto& s : samples) {
    if (s.launch_gap_us > 0) gaps.push_back(s.launch_gap_us);
  }
  if (gaps.empty()) return 0.0;
  std::sort(gaps.begin(), gaps.end());
  const std::size_t n = gaps.size();
  return n % 2 ? gaps[n / 2] : 0.5 * (gaps[n / 2 - 1] + gaps[n / 2]);
}

std::vector<sample> at_launch_gap(std::vector<sample> samples, double gap_us)
{
  if (!(gap_us > 0)) return samples;
  for (auto& s : samples) {
    if (!(s.launch_gap_us > 0)) continue;
    const double moved = s.measured_us + launch_gaps_of(s.format, s.features.stats) * (gap_us - s.launch_gap_us);
    // A gap never moves a product below a tenth of itself (a gap of the wrong magnitude: keep the sample as is).
    if (moved > 0.1 * s.measured_us) {
      s.measured_us = moved;
      s.launch_gap_us = gap_us;
    }
  }
  return samples;
}

prediction_input prediction_input_of(const sample& s, const device_properties& device)
{
  prediction_input in;
  in.stats = s.features.stats;
  in.device = device;
  in.value_bytes = s.features.value_bytes;
  in.x_sectors_per_nnz = s.features.x_sectors_per_nnz;
  in.sorted = s.features.sorted;
  in.x_mixture = s.features.x_mixture;
  return in;
}

format_fit fit_format_corrections(const std::vector<sample>& samples, const device_properties& device, bandwidth_model_params& p)
{
  std::vector<fixed_cost_observation> obs;
  obs.reserve(samples.size());
  for (const auto& s : samples) obs.push_back({s.format, prediction_input_of(s, device), s.measured_us});
  return aijp::fit_format_corrections(obs, p);
}

}  // namespace aijp::model
