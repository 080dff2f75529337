// Internal to runtime/src: the small numerical kit behind the performance models (models.hpp).
//
// - least squares on a handful of unknowns (Householder QR, rank-revealing by a diagonal test) and
//   non-negative least squares (Lawson & Hanson 1974, ch. 23) on top of it: used by the "aijp" model;
// - the strip relationships of the published models (Guo & Wang 2012/2014, Wang, Gu & Li 2017): straight
//   lines over the strip count I and the row statistic P_NZ, combined as the papers do (DESIGN.md s. 4);
// - the factories make_model() dispatches to.
//
// Nothing here allocates more than O(samples x unknowns); every routine copes with empty or degenerate input
// by returning "no fit" (nullopt / zeros), never NaN.
#pragma once

#include <aijpredict/models.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aijp::model::detail {

/// Dense row-major m x n matrix, just enough for the fits.
struct dense_matrix {
  std::size_t rows = 0, cols = 0;
  std::vector<double> a;
  dense_matrix(std::size_t m, std::size_t n) : rows(m), cols(n), a(m * n, 0.0) {}
  double& operator()(std::size_t i, std::size_t j) { return a[i * cols + j]; }
  double operator()(std::size_t i, std::size_t j) const { return a[i * cols + j]; }
};

/// min ||A x - b||_2 by Householder QR. Columns whose pivot falls below `rank_tol` x the largest pivot are
/// treated as dependent and get x_j = 0 (no column pivoting: callers pass few, scaled columns).
/// Returns zeros for an empty problem.
inline std::vector<double> least_squares(dense_matrix A, std::vector<double> b, double rank_tol = 1e-10)
{
  const std::size_t m = A.rows, n = A.cols;
  std::vector<double> x(n, 0.0);
  if (m == 0 || n == 0) return x;
  std::vector<double> diag(n, 0.0);
  std::vector<bool> usable(n, false);
  const std::size_t steps = std::min(m, n);
  for (std::size_t k = 0; k < steps; ++k) {
    double norm = 0.0;
    for (std::size_t i = k; i < m; ++i) norm += A(i, k) * A(i, k);
    norm = std::sqrt(norm);
    if (norm == 0.0) continue;
    const double alpha = A(k, k) > 0 ? -norm : norm;
    // v = a_k - alpha e_k stored in place; H = I - 2 v v^T / (v^T v).
    A(k, k) -= alpha;
    double vtv = 0.0;
    for (std::size_t i = k; i < m; ++i) vtv += A(i, k) * A(i, k);
    if (vtv > 0.0) {
      for (std::size_t j = k + 1; j < n; ++j) {
        double dot = 0.0;
        for (std::size_t i = k; i < m; ++i) dot += A(i, k) * A(i, j);
        const double s = 2.0 * dot / vtv;
        for (std::size_t i = k; i < m; ++i) A(i, j) -= s * A(i, k);
      }
      double dot = 0.0;
      for (std::size_t i = k; i < m; ++i) dot += A(i, k) * b[i];
      const double s = 2.0 * dot / vtv;
      for (std::size_t i = k; i < m; ++i) b[i] -= s * A(i, k);
    }
    diag[k] = alpha;
  }
  double largest = 0.0;
  for (std::size_t k = 0; k < steps; ++k) largest = std::max(largest, std::fabs(diag[k]));
  if (largest == 0.0) return x;
  for (std::size_t k = 0; k < steps; ++k) usable[k] = std::fabs(diag[k]) > rank_tol * largest;
  // Back substitution on R (upper triangle above the diagonal is in A, the diagonal in diag).
  for (std::size_t kk = steps; kk-- > 0;) {
    if (!usable[kk]) continue;
    double r = b[kk];
    for (std::size_t j = kk + 1; j < n; ++j) r -= A(kk, j) * x[j];
    x[kk] = r / diag[kk];
  }
  return x;
}

/// min ||A x - b||_2 subject to x >= 0 (Lawson-Hanson active set). Columns should be scaled to similar
/// norms by the caller. Always returns finite values.
inline std::vector<double> nnls(const dense_matrix& A, const std::vector<double>& b)
{
  const std::size_t m = A.rows, n = A.cols;
  std::vector<double> x(n, 0.0);
  if (m == 0 || n == 0) return x;
  std::vector<bool> passive(n, false);
  double scale = 0.0;
  for (double v : A.a) scale = std::max(scale, std::fabs(v));
  const double tol = 1e-12 * std::max<double>(1.0, scale) * static_cast<double>(std::max(m, n));

  const auto gradient = [&](std::vector<double>& w) {
    std::vector<double> r(b);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) r[i] -= A(i, j) * x[j];
    for (std::size_t j = 0; j < n; ++j) {
      w[j] = 0.0;
      for (std::size_t i = 0; i < m; ++i) w[j] += A(i, j) * r[i];
    }
  };
  const auto solve_passive = [&]() {
    std::vector<std::size_t> idx;
    for (std::size_t j = 0; j < n; ++j)
      if (passive[j]) idx.push_back(j);
    dense_matrix sub(m, idx.size());
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t k = 0; k < idx.size(); ++k) sub(i, k) = A(i, idx[k]);
    const std::vector<double> z = least_squares(sub, b);
    std::vector<double> s(n, 0.0);
    for (std::size_t k = 0; k < idx.size(); ++k) s[idx[k]] = z[k];
    return s;
  };

  std::vector<double> w(n);
  const int max_outer = static_cast<int>(3 * n + 10);
  for (int outer = 0; outer < max_outer; ++outer) {
    gradient(w);
    std::size_t t = n;
    double best = tol;
    for (std::size_t j = 0; j < n; ++j) {
      if (!passive[j] && w[j] > best) {
        best = w[j];
        t = j;
      }
    }
    if (t == n) break;
    passive[t] = true;
    for (int inner = 0; inner < static_cast<int>(3 * n + 10); ++inner) {
      std::vector<double> s = solve_passive();
      bool feasible = true;
      for (std::size_t j = 0; j < n; ++j)
        if (passive[j] && s[j] <= 0.0) feasible = false;
      if (feasible) {
        x = s;
        break;
      }
      double alpha = 1.0;
      for (std::size_t j = 0; j < n; ++j) {
        if (passive[j] && s[j] <= 0.0) {
          const double d = x[j] - s[j];
          if (d > 0.0) alpha = std::min(alpha, x[j] / d);
        }
      }
      for (std::size_t j = 0; j < n; ++j) x[j] += alpha * (s[j] - x[j]);
      bool moved = false;
      for (std::size_t j = 0; j < n; ++j) {
        if (passive[j] && x[j] <= tol) {
          passive[j] = false;
          x[j] = 0.0;
          moved = true;
        }
      }
      if (!moved) {  // numerical stalemate: keep the clipped solution
        for (std::size_t j = 0; j < n; ++j) x[j] = std::max(0.0, x[j]);
        break;
      }
    }
  }
  for (double& v : x)
    if (!std::isfinite(v) || v < 0.0) v = 0.0;
  return x;
}

/// A straight line y = slope x + intercept.
struct line {
  double slope = 0.0;
  double intercept = 0.0;
  double at(double x) const { return slope * x + intercept; }
};

/// Ordinary least-squares line through (x_i, y_i). nullopt with fewer than two distinct x.
inline std::optional<line> fit_line(const std::vector<double>& x, const std::vector<double>& y)
{
  const std::size_t n = x.size();
  if (n < 2) return std::nullopt;
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  const double spread = *std::max_element(x.begin(), x.end()) - *std::min_element(x.begin(), x.end());
  if (!(spread > 1e-12 * std::max(1.0, std::fabs(mx))) || !(sxx > 0)) return std::nullopt;
  line l;
  l.slope = sxy / sxx;
  l.intercept = my - l.slope * mx;
  if (!std::isfinite(l.slope) || !std::isfinite(l.intercept)) return std::nullopt;
  return l;
}

// ---------------------------------------------------------------------------------------------------------
// Strip relationships of the published models.

/// One benchmark measurement reduced to what the strip models read: strip count I, the row statistic that
/// stands for P_NZ, and the time.
struct strip_point {
  double strips = 0;
  double pnz = 0;
  double us = 0;
};

/// Benchmark matrices are generated at a few nominal P_NZ; with the distributions of Wang-Gu-Li the realised
/// mean scatters slightly around the nominal one. Points whose P_NZ lies within 5 % + 0.5 of the first
/// (smallest) value of a group belong to that group. Returns groups of point indices, by increasing P_NZ.
std::vector<std::vector<std::size_t>> group_by_pnz(const std::vector<strip_point>& pts);

/// Thread-per-row saddle surface (Guo-Wang ELL; Wang-Gu-Li CSR-S, ELL, JAD):
///   Rel-1 T = f(I1) P + g(I1) at each measured strip count; Rel-2 f(I) = A I + B;
///   Rel-3 e(I) = E1 I + E0 at a fixed P1; g(I) = e(I) - f(I) P1;
///   T0 = f(I0) P0 + g(I0) = (A I0 + B)(P0 - P1) + E1 I0 + E0.
struct saddle_relation {
  double f_per_strip = 0;  ///< A
  double f_const = 0;      ///< B
  double e_per_strip = 0;  ///< E1
  double e_const = 0;      ///< E0
  double p1 = 0;           ///< P_NZ of the Rel-3 series
  double predict(double strips, double pnz) const
  {
    return (f_per_strip * strips + f_const) * (pnz - p1) + e_per_strip * strips + e_const;
  }
};
/// nullopt unless some strip count carries at least two distinct P_NZ groups.
std::optional<saddle_relation> fit_saddle(const std::vector<strip_point>& pts);

/// One regime (P_NZ below or above the max-threads-per-block threshold) of the CSR-vector ratio model
/// (Guo-Wang CSR; Wang-Gu-Li CSR-V): Rel-1 T = a x + b over P_NZ at strips i1; Rel-2 T' = c y + d over
/// strips at P_NZ = z; t2 = measured time of the benchmark (z, i1); T0 = (a x0 + b) / t2 * (c y0 + d).
struct ratio_regime {
  double rel1_slope = 0, rel1_intercept = 0;
  double rel2_slope = 0, rel2_intercept = 0;
  double t2_us = 0;
  double i1 = 0, z = 0;  ///< provenance: the strip count of Rel-1 and the P_NZ of Rel-2
  double predict(double strips, double pnz) const
  {
    return (rel1_slope * pnz + rel1_intercept) / t2_us * (rel2_slope * strips + rel2_intercept);
  }
};
struct ratio_relation {
  double threshold = 0;  ///< max threads per block at fitting time (1024)
  std::optional<ratio_regime> low;   ///< P_NZ <= threshold
  std::optional<ratio_regime> high;  ///< P_NZ >= threshold
  /// The regime of pnz; the other one when that one is not fitted.
  std::optional<double> predict(double strips, double pnz) const;
};
/// Regimes that lack two P_NZ groups at one strip count stay empty; nullopt when both are empty.
std::optional<ratio_relation> fit_ratio(const std::vector<strip_point>& pts, double threshold);

/// COO: T = E(I_COO) = slope I_COO + intercept; nullopt with fewer than two distinct strip counts.
std::optional<line> fit_strip_line(const std::vector<strip_point>& pts);

// ---------------------------------------------------------------------------------------------------------
// Published models: one class, configured per paper.

enum class row_statistic { mode, max, mean };

enum class strip_relation_kind { ratio, saddle, coo_line, hyb_sum };

/// How one format is modelled by a published strip model.
struct strip_format_spec {
  format_id format;
  strip_relation_kind kind;
  /// Lanes per row for the strip size: 1 = thread per row, 0 = a warp, -2 = half a warp (resolved from
  /// device_properties::warp_size when fitting; the value used is stored in the coefficients).
  int lanes = 1;
  row_statistic fit_stat = row_statistic::max;      ///< P_NZ of a benchmark sample
  row_statistic predict_stat = row_statistic::max;  ///< P_NZ of a target matrix
};

std::unique_ptr<performance_model> make_strip_model(std::string name, family source,
                                                    std::vector<strip_format_spec> specs);

std::unique_ptr<performance_model> make_guo_wang_model();
/// source = family::normal or family::uniform.
std::unique_ptr<performance_model> make_wang_gu_li_model(family source);
std::unique_ptr<performance_model> make_aijp_model();

}  // namespace aijp::model::detail
