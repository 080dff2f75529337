// Our model ("aijp"): for every format,
//   T = c0 + max(c1 phi1 + c2 phi2 + c3 phi3 + c6 phi6,  c4 phi4 + c5 phi5)
// with c_k >= 0: a product is bound either by streaming (bytes, x gathers, slot iterations) or by its
// longest serial chain, whichever is slower (an additive form cannot express that: a matrix with one huge
// row pays for the row, not for the row plus the bytes). Fitted per format on the relative error (weights
// 1 / measured^2) over all samples of that format: start from the additive fit, then alternate between
// assigning each sample to the branch its current prediction takes and one joint non-negative least
// squares fit in which a sample sees only its branch's features (and the shared c0).
//
// Features (aijp_coefficient_names() gives the coefficient of each, in this order):
//   0 launch_us                 1: launches plus library overhead of the format
//   1 us_per_byte_l2            min(W, L2) with W the working set of one SpMV (layout bytes + x once + y)
//   2 us_per_byte_dram          max(W - L2, 0): the part of the working set that must come from DRAM
//   3 us_per_x_gather_byte      x_sectors_per_nnz x nnz x 32: sector traffic of the x gathers (0 if unknown),
//                               plus for the length-sorted layouts what their order adds (sorted_scatter_bytes)
//   4 us_per_serial_entry_l2    longest dependent chain of one thread (max_len; ceil(max_len / lanes) for
//                               csr_vector, more once it stacks 4 rows per lane group on this device:
//                               layout_traffic_of) when W <= L2 ...
//   5 us_per_serial_entry_dram  ... and when W > L2 (a dependent load from DRAM costs ~3x one from L2)
//   6 us_per_slot_iteration     average load iterations of one thread slot of the full device
//                               (S1 = N_SM x threads/SM slots): 32 N_iter / S1 for thread-per-row layouts
//                               (N_iter of PELLR Eq. 1, natural or sorted order as the layout walks rows),
//                               rows x max_len / S1 for ELL, nnz / S1 for COO and the cuSPARSE CSR kernels,
//                               rows x lanes x ceil(mean / lanes) / S1 for csr_vector. It is the wave
//                               quantisation / latency term the strip models capture with I x P_NZ.
// Layout bytes, serial chains and slot work come from aijp::layout_traffic_of (predict.hpp) for the device the
// model predicts for (csr_vector's variant depends on its geometry), shared with the placeholder model.
//
// Calibration: the linear-hinge form leaves a bias that depends on the size regime (on an H100 warm-up,
// launch-bound samples came out 15-20 % high and mid-size ones, 20-200 us, 10-20 % low: the effective
// bandwidth ramps up with the working set). After the fit, each format gets a calibration curve: the
// samples sorted by predicted time are cut into up to 8 bins of equal count, each bin stores the mean log
// of its predictions and the median log of measured / predicted; a prediction is multiplied by exp of the
// curve interpolated linearly at its log (constant beyond the ends). Coefficients "cal_bins", "cal_x<k>",
// "cal_y<k>"; a table without them predicts uncalibrated (older cache files stay valid).
#include "model_fit.hpp"

#include <aijpredict/device_geometry.hpp>
#include <aijpredict/error.hpp>
#include <aijpredict/predict.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

namespace aijp::model {

namespace {

constexpr int feature_count = 7;

const std::array<const char*, feature_count> feature_names = {
    "launch_us",
    "us_per_byte_l2",
    "us_per_byte_dram",
    "us_per_x_gather_byte",
    "us_per_serial_entry_l2",
    "us_per_serial_entry_dram",
    "us_per_slot_iteration",
};

/// Samples per calibration bin (at least) and most bins.
constexpr std::size_t samples_per_bin = 15;
constexpr std::size_t max_bins = 8;

struct calibration {
  std::vector<double> x, y;  // bin centres (log us) and log ratios, x increasing
  double apply(double t) const
  {
    if (x.empty() || !(t > 0)) return t;
    const double lx = std::log(t);
    double ly = y.front();
    if (lx >= x.back()) {
      ly = y.back();
    } else if (lx > x.front()) {
      std::size_t k = 1;
      while (x[k] < lx) ++k;
      const double w = (lx - x[k - 1]) / (x[k] - x[k - 1]);
      ly = y[k - 1] + w * (y[k] - y[k - 1]);
    }
    return t * std::exp(ly);
  }
};

/// Fewest samples per fitted coefficient (and in all) before a format is fitted: a guard against fitting
/// noise with as many unknowns as points.
constexpr std::size_t min_samples = 6;
constexpr std::size_t samples_per_coefficient = 2;

class aijp_model final : public performance_model {
 public:
  std::string name() const override { return "aijp"; }
  bool covers(format_id) const override { return true; }

  std::optional<double> predict_us(format_id f, const matrix_features& m, const device_properties& d) const override
  {
    const auto it = coef_.find(f);
    if (it == coef_.end()) return std::nullopt;
    double t = evaluate(it->second, aijp_features(f, m, d));
    if (const auto c = cal_.find(f); c != cal_.end()) t = c->second.apply(t);
    if (!std::isfinite(t)) return std::nullopt;
    return t;
  }

  void fit(const std::vector<sample>& samples, const device_properties& d) override
  {
    coef_.clear();
    cal_.clear();
    for (format_id f : all_formats()) {
      std::vector<std::vector<double>> phi;
      std::vector<double> t;
      for (const auto& s : samples) {
        if (s.format != f || !(s.measured_us > 0) || !std::isfinite(s.measured_us)) continue;
        auto x = aijp_features(f, s.features, d);
        bool finite = true;
        for (double v : x) finite = finite && std::isfinite(v);
        if (!finite) continue;
        phi.push_back(std::move(x));
        t.push_back(s.measured_us);
      }
      if (phi.size() < min_samples) continue;
      // Keep the constant and every feature that varies; a constant feature is the launch term again.
      std::vector<int> active{0};
      for (int k = 1; k < feature_count; ++k) {
        double lo = phi[0][k], hi = phi[0][k];
        for (const auto& x : phi) {
          lo = std::min(lo, x[k]);
          hi = std::max(hi, x[k]);
        }
        if (hi - lo > 1e-9 * std::max(std::fabs(hi), std::fabs(lo))) active.push_back(k);
      }
      if (phi.size() < samples_per_coefficient * active.size()) continue;
      std::array<double, feature_count> c = solve(phi, t, active, std::vector<int>(phi.size(), -1));
      // Hinge iterations: branch of each sample under the current coefficients, refit, until stable.
      std::vector<int> branch(phi.size(), -1);
      for (int iter = 0; iter < 8; ++iter) {
        std::vector<int> next(phi.size());
        for (std::size_t i = 0; i < phi.size(); ++i) next[i] = stream_part(c, phi[i]) >= serial_part(c, phi[i]) ? 0 : 1;
        if (next == branch) break;
        branch = next;
        const auto trial = solve(phi, t, active, branch);
        if (relative_error_sum(trial, phi, t) <= relative_error_sum(c, phi, t)) c = trial;
      }
      coef_[f] = c;
      if (auto cal = fit_calibration(c, phi, t)) cal_[f] = std::move(*cal);
    }
  }

  static std::optional<calibration> fit_calibration(const std::array<double, feature_count>& c,
                                                    const std::vector<std::vector<double>>& phi, const std::vector<double>& t)
  {
    std::vector<std::pair<double, double>> pts;  // (log predicted, log measured / predicted)
    for (std::size_t i = 0; i < phi.size(); ++i) {
      const double p = evaluate(c, phi[i]);
      if (p > 0 && std::isfinite(p)) pts.emplace_back(std::log(p), std::log(t[i] / p));
    }
    const std::size_t bins = std::min(max_bins, pts.size() / samples_per_bin);
    if (bins < 2) return std::nullopt;
    std::sort(pts.begin(), pts.end());
    calibration cal;
    for (std::size_t b = 0; b < bins; ++b) {
      const std::size_t lo = b * pts.size() / bins, hi = (b + 1) * pts.size() / bins;
      double mx = 0;
      std::vector<double> ys;
      for (std::size_t i = lo; i < hi; ++i) {
        mx += pts[i].first;
        ys.push_back(pts[i].second);
      }
      std::sort(ys.begin(), ys.end());
      const double my = ys.size() % 2 ? ys[ys.size() / 2] : 0.5 * (ys[ys.size() / 2 - 1] + ys[ys.size() / 2]);
      mx /= static_cast<double>(hi - lo);
      if (!cal.x.empty() && mx <= cal.x.back()) continue;  // equal predictions: keep the first bin
      cal.x.push_back(mx);
      cal.y.push_back(my);
    }
    if (cal.x.size() < 2) return std::nullopt;
    return cal;
  }

  static double stream_part(const std::array<double, feature_count>& c, const std::vector<double>& phi)
  {
    return c[1] * phi[1] + c[2] * phi[2] + c[3] * phi[3] + c[6] * phi[6];
  }
  static double serial_part(const std::array<double, feature_count>& c, const std::vector<double>& phi)
  {
    return c[4] * phi[4] + c[5] * phi[5];
  }
  static double evaluate(const std::array<double, feature_count>& c, const std::vector<double>& phi)
  {
    return c[0] * phi[0] + std::max(stream_part(c, phi), serial_part(c, phi));
  }
  static double relative_error_sum(const std::array<double, feature_count>& c, const std::vector<std::vector<double>>& phi,
                                   const std::vector<double>& t)
  {
    double e = 0;
    for (std::size_t i = 0; i < phi.size(); ++i) e += std::pow(evaluate(c, phi[i]) / t[i] - 1.0, 2);
    return e;
  }

  // Weighted NNLS over the active features. branch[i] = -1: sample i sees every feature (additive start);
  // 0: only the constant and the streaming features; 1: only the constant and the serial features.
  static std::array<double, feature_count> solve(const std::vector<std::vector<double>>& phi, const std::vector<double>& t,
                                                 const std::vector<int>& active, const std::vector<int>& branch)
  {
    const auto in_branch = [](int k, int b) {
      if (b < 0 || k == 0) return true;
      const bool serial = k == 4 || k == 5;
      return b == 1 ? serial : !serial;
    };
    // Relative residuals: row i is phi_i / t_i against 1. Columns scaled to unit norm for the solver.
    detail::dense_matrix A(phi.size(), active.size());
    std::vector<double> b(phi.size(), 1.0);
    for (std::size_t i = 0; i < phi.size(); ++i)
      for (std::size_t j = 0; j < active.size(); ++j) A(i, j) = in_branch(active[j], branch[i]) ? phi[i][active[j]] / t[i] : 0.0;
    std::vector<double> scale(active.size(), 0.0);
    for (std::size_t j = 0; j < active.size(); ++j) {
      for (std::size_t i = 0; i < phi.size(); ++i) scale[j] += A(i, j) * A(i, j);
      scale[j] = std::sqrt(scale[j]);
      if (!(scale[j] > 0)) scale[j] = 1.0;
      for (std::size_t i = 0; i < phi.size(); ++i) A(i, j) /= scale[j];
    }
    const std::vector<double> y = detail::nnls(A, b);
    std::array<double, feature_count> c{};
    for (std::size_t j = 0; j < active.size(); ++j) c[active[j]] = y[j] / scale[j];
    return c;
  }

  coefficient_table coefficients() const override
  {
    coefficient_table table;
    for (const auto& [f, c] : coef_) {
      auto& row = table[format_name(f)];
      for (int k = 0; k < feature_count; ++k) row[feature_names[k]] = c[k];
      if (const auto cal = cal_.find(f); cal != cal_.end()) {
        row["cal_bins"] = static_cast<double>(cal->second.x.size());
        for (std::size_t b = 0; b < cal->second.x.size(); ++b) {
          row["cal_x" + std::to_string(b)] = cal->second.x[b];
          row["cal_y" + std::to_string(b)] = cal->second.y[b];
        }
      }
    }
    return table;
  }

  void set_coefficients(const coefficient_table& table) override
  {
    coef_.clear();
    for (format_id f : all_formats()) {
      const auto row = table.find(format_name(f));
      if (row == table.end()) continue;
      std::array<double, feature_count> c{};
      bool complete = true;
      for (int k = 0; k < feature_count && complete; ++k) {
        const auto it = row->second.find(feature_names[k]);
        complete = it != row->second.end() && std::isfinite(it->second);
        if (complete) c[k] = it->second;
      }
      if (!complete) continue;
      coef_[f] = c;
      const auto bins = row->second.find("cal_bins");
      if (bins == row->second.end() || !(bins->second >= 2) || bins->second > max_bins) continue;
      calibration cal;
      for (int b = 0; b < static_cast<int>(bins->second); ++b) {
        const auto x = row->second.find("cal_x" + std::to_string(b));
        const auto y = row->second.find("cal_y" + std::to_string(b));
        if (x == row->second.end() || y == row->second.end() || !std::isfinite(x->second) || !std::isfinite(y->second) ||
            (!cal.x.empty() && x->second <= cal.x.back())) {
          cal.x.clear();
          break;
        }
        cal.x.push_back(x->second);
        cal.y.push_back(y->second);
      }
      if (!cal.x.empty()) cal_[f] = std::move(cal);
    }
  }

 private:
  std::map<format_id, std::array<double, feature_count>> coef_;
  std::map<format_id, calibration> cal_;
};

}  // namespace

std::vector<std::string> aijp_coefficient_names() { return {feature_names.begin(), feature_names.end()}; }

std::vector<double> aijp_features(format_id f, const matrix_features& m, const device_properties& d)
{
  const row_stats& s = m.stats;
  const int vb = m.value_bytes;
  const layout_traffic c = layout_traffic_of(f, s, vb, &d);
  // x is read at least once, y written once (as predict.cpp).
  const double vectors =
      static_cast<double>(std::min<size_type>(s.cols, s.nnz)) * vb + static_cast<double>(s.rows) * vb;
  const double working_set = c.moved_bytes + vectors;
  const double l2 = std::max(0, d.l2_bytes);
  const bool in_l2 = working_set <= l2;
  const double slots = static_cast<double>(strips_for_lanes(d, 1, 0).rows_per_strip);
  std::vector<double> phi(feature_count, 0.0);
  phi[0] = 1.0;
  phi[1] = std::min(working_set, l2);
  phi[2] = std::max(working_set - l2, 0.0);
  phi[3] = m.x_sectors_per_nnz > 0 ? m.x_sectors_per_nnz * static_cast<double>(s.nnz) * 32.0 : 0.0;
  phi[3] += sorted_scatter_bytes(f, s, vb, m.x_sectors_per_nnz, m.sorted);
  phi[in_l2 ? 4 : 5] = c.serial_entries;
  phi[6] = c.slot_work / slots;
  return phi;
}

namespace detail {
std::unique_ptr<performance_model> make_aijp_model() { return std::make_unique<aijp_model>(); }
}  // namespace detail

}  // namespace aijp::model
