#include <aijpredict/online.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace aijp::online {

namespace {

constexpr const char* class_names[size_class_count] = {"in_l2", "beyond_l2"};
constexpr const char* all_formats_key = "all";

bool valid(const correction& k)
{
  return std::isfinite(k.log_ratio) && std::isfinite(k.weight) && std::isfinite(k.count) && k.weight > 0 && k.count >= k.weight &&
         std::abs(k.log_ratio) < 50;
}

}  // namespace

matrix_key key_of(const row_stats& s, int value_bytes, double x_sectors_per_nnz)
{
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  };
  const auto put = [&mix](auto v) { mix(&v, sizeof(v)); };
  put(s.rows);
  put(s.cols);
  put(s.nnz);
  put(s.mean);
  put(s.stddev);
  put(s.min_len);
  put(s.max_len);
  put(s.mode_len);
  put(s.mode_count);
  put(s.empty_rows);
  put(s.n_iter_natural);
  put(s.n_iter_sorted);
  put(s.n_p);
  put(s.hyb_ell_width);
  put(s.hyb_coo_nnz);
  put(value_bytes);
  put(x_sectors_per_nnz);
  return h == 0 ? 1 : h;
}

const char* size_class_name(size_class c) { return class_names[static_cast<int>(c)]; }

size_class classify(double bytes, double l2_bytes)
{
  return l2_bytes > 0 && bytes > l2_bytes ? size_class::beyond_l2 : size_class::in_l2;
}

double median(std::vector<double> v)
{
  if (v.empty()) return 0;
  const std::size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  const double hi = v[h];
  if (v.size() % 2) return hi;
  return 0.5 * (hi + *std::max_element(v.begin(), v.begin() + h));
}

std::string online_model_name(const std::string& model) { return "online_" + model; }

corrections::corrections(const corrections& other)
{
  std::lock_guard<std::mutex> lock(other.mutex_);
  tuning_ = other.tuning_;
  by_format_ = other.by_format_;
  all_ = other.all_;
  by_matrix_ = other.by_matrix_;
}

corrections& corrections::operator=(const corrections& other)
{
  if (this == &other) return *this;
  const corrections copy(other);
  std::lock_guard<std::mutex> lock(mutex_);
  tuning_ = copy.tuning_;
  by_format_ = copy.by_format_;
  all_ = copy.all_;
  by_matrix_ = copy.by_matrix_;
  return *this;
}

double corrections::factor(format_id f, size_class c, matrix_key m) const
{
  std::lock_guard<std::mutex> lock(mutex_);
  const correction& own = by_format_[static_cast<int>(f)][static_cast<int>(c)];
  const correction& all = all_[static_cast<int>(c)];
  const double base = all.weight > 0 ? all.log_ratio : 0.0;
  const double blend = own.weight > 0 ? own.weight / (own.weight + tuning_.prior_weight) : 0.0;
  double log_factor = base + blend * (own.log_ratio - base);
  if (m != 0) {
    const auto it = by_matrix_.find(m);
    if (it != by_matrix_.end()) {
      const correction& mine = it->second[static_cast<int>(f)];
      if (mine.weight > 0) log_factor += mine.weight / (mine.weight + tuning_.matrix_prior_weight) * (mine.log_ratio - log_factor);
    }
  }
  return std::exp(log_factor);
}

void corrections::update(correction& k, double r, const tuning& t)
{
  double step = r - k.log_ratio;
  if (k.weight >= t.clip_after) step = std::clamp(step, -t.clip_log, t.clip_log);
  k.weight = std::min(k.weight + 1, t.max_weight);
  k.count += 1;
  k.log_ratio += step / k.weight;
}

bool corrections::observe(format_id f, size_class c, double predicted_us, double measured_us, matrix_key m)
{
  if (!(predicted_us > 0) || !(measured_us > 0) || !std::isfinite(predicted_us) || !std::isfinite(measured_us)) return false;
  const double r = std::log(measured_us / predicted_us);
  if (!(std::abs(r) <= tuning_.max_abs_log)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  update(by_format_[static_cast<int>(f)][static_cast<int>(c)], r, tuning_);
  update(all_[static_cast<int>(c)], r, tuning_);
  if (m != 0) {
    if (by_matrix_.size() >= tuning_.max_matrices && by_matrix_.find(m) == by_matrix_.end()) by_matrix_.clear();
    update(by_matrix_[m][static_cast<int>(f)], r, tuning_);
  }
  return true;
}

correction corrections::of_matrix(format_id f, matrix_key m) const
{
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = by_matrix_.find(m);
  return it == by_matrix_.end() ? correction{} : it->second[static_cast<int>(f)];
}

correction corrections::of(format_id f, size_class c) const
{
  std::lock_guard<std::mutex> lock(mutex_);
  return by_format_[static_cast<int>(f)][static_cast<int>(c)];
}

correction corrections::of_class(size_class c) const
{
  std::lock_guard<std::mutex> lock(mutex_);
  return all_[static_cast<int>(c)];
}

double corrections::observations() const
{
  std::lock_guard<std::mutex> lock(mutex_);
  double n = 0;
  for (const auto& k : all_) n += k.count;
  return n;
}

std::map<std::string, std::map<std::string, double>> corrections::to_table() const
{
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, std::map<std::string, double>> t;
  const auto put = [&t](const std::string& key, const cells& cs) {
    for (int c = 0; c < size_class_count; ++c) {
      if (!(cs[c].count > 0)) continue;
      auto& row = t[key];
      row[std::string("log_ratio_") + class_names[c]] = cs[c].log_ratio;
      row[std::string("weight_") + class_names[c]] = cs[c].weight;
      row[std::string("count_") + class_names[c]] = cs[c].count;
    }
  };
  for (int f = 0; f < format_count; ++f) put(format_name(static_cast<format_id>(f)), by_format_[f]);
  put(all_formats_key, all_);
  return t;
}

corrections corrections::from_table(const std::map<std::string, std::map<std::string, double>>& table, const tuning& t)
{
  corrections out(t);
  const auto get = [](const std::map<std::string, double>& row, cells& cs) {
    for (int c = 0; c < size_class_count; ++c) {
      const auto lr = row.find(std::string("log_ratio_") + class_names[c]);
      const auto w = row.find(std::string("weight_") + class_names[c]);
      const auto n = row.find(std::string("count_") + class_names[c]);
      if (lr == row.end() || w == row.end() || n == row.end()) continue;
      const correction k{lr->second, w->second, n->second};
      if (valid(k)) cs[c] = k;
    }
  };
  for (const auto& [name, row] : table) {
    if (name == all_formats_key) {
      get(row, out.all_);
      continue;
    }
    for (int f = 0; f < format_count; ++f) {
      if (name == format_name(static_cast<format_id>(f))) get(row, out.by_format_[f]);
    }
  }
  for (auto& k : out.all_) k.weight = std::min(k.weight, t.max_weight);
  for (auto& cs : out.by_format_) {
    for (auto& k : cs) k.weight = std::min(k.weight, t.max_weight);
  }
  return out;
}

void corrections::merge(const corrections& other)
{
  if (this == &other) return;
  const corrections copy(other);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto take = [](cells& mine, const cells& theirs) {
    for (int c = 0; c < size_class_count; ++c) {
      if (theirs[c].count > mine[c].count) mine[c] = theirs[c];
    }
  };
  for (int f = 0; f < format_count; ++f) take(by_format_[f], copy.by_format_[f]);
  take(all_, copy.all_);
}

std::string corrections::to_string() const
{
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream os;
  char line[160];
  const auto put = [&](const char* name, const cells& cs) {
    for (int c = 0; c < size_class_count; ++c) {
      if (!(cs[c].count > 0)) continue;
      std::snprintf(line, sizeof(line), "%s/%s: x%.3f (%.0f obs)\n", name, class_names[c], std::exp(cs[c].log_ratio), cs[c].count);
      os << line;
    }
  };
  for (int f = 0; f < format_count; ++f) put(format_name(static_cast<format_id>(f)), by_format_[f]);
  put(all_formats_key, all_);
  return os.str();
}

explore_reason explore_reason_for(const explore_case& c)
{
  if (c.partitioned) return explore_reason::split;
  if (c.baseline_always) return explore_reason::after_split;
  if (c.measured_us > c.candidate_predicted_us * (1 + c.margin)) return explore_reason::beats_candidate;
  if (c.running_predicted_us > 0 && c.measured_us > c.running_predicted_us * (1 + c.margin)) {
    const bool pair = (c.running == format_id::cusparse_csr && c.candidate == format_id::cusparse_csr_alg2) ||
                      (c.running == format_id::cusparse_csr_alg2 && c.candidate == format_id::cusparse_csr);
    if (pair || c.candidate_predicted_us < c.measured_us) return explore_reason::own_miss;
  }
  if (c.candidate_free && c.free_band > 0 && c.measured_us > 0 && c.measured_us <= c.free_max_us &&
      c.candidate_predicted_us < c.measured_us * (1 + c.free_band)) {
    return explore_reason::free_band;
  }
  return explore_reason::none;
}

}  // namespace aijp::online
