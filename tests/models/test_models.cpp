// Host unit tests of the performance models (models.hpp): each published model recovers its published
// functional form from synthetic benchmark samples, our model fits a bandwidth + launch + serial ground truth
// under noise, coefficients round-trip, and unfitted, uncovered or degenerate cases are handled.
//
// Samples are synthetic: row statistics built from row-length histograms (stats_from_histogram, the same
// code path the device uses) and times from known formulas; no GPU is needed.
#include <aijpredict/device_geometry.hpp>
#include <aijpredict/error.hpp>
#include <aijpredict/formats.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/model_samples.hpp>
#include <aijpredict/models.hpp>
#include <aijpredict/predict.hpp>
#include <aijpredict/stats.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using aijp::format_id;
using aijp::row_stats;
using aijp::size_type;
using aijp::model::family;
using aijp::model::matrix_features;
using aijp::model::sample;

aijp::device_properties h100_like()
{
  aijp::device_properties d;
  d.name = "H100-like test GPU";
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.max_threads_per_block = 1024;
  d.warp_size = 32;
  d.l2_bytes = 50 * 1024 * 1024;
  d.mem_bus_width_bits = 5120;
  d.mem_clock_khz = 2619000;
  return d;
}

// Strip sizes of the H100-like device: 132 x 64 warps, 132 x 128 half-warps, 132 x 2048 threads.
constexpr size_type s_warp = 132 * 64;
constexpr size_type s_half_warp = 132 * 128;
constexpr size_type s_thread = 132 * 2048;

/// Statistics from a histogram; N_iter natural is the upper bound ceil(rows/32) x max (the published models
/// do not read it).
row_stats stats_of(size_type rows, size_type cols, const std::vector<size_type>& hist)
{
  size_type max_len = 0;
  for (size_type l = 0; l < static_cast<size_type>(hist.size()); ++l)
    if (hist[l] > 0) max_len = l;
  return aijp::stats_from_histogram(rows, cols, hist.data(), static_cast<size_type>(hist.size()),
                                    (rows + 31) / 32 * max_len);
}

row_stats constant_rows(size_type rows, int p)
{
  std::vector<size_type> hist(p + 1, 0);
  hist[p] = rows;
  return stats_of(rows, std::max<size_type>(rows, p + 1), hist);
}

/// Expected-count histogram of a discretised distribution (weights w[l], l = 0..), scaled to `rows` rows.
row_stats distributed_rows(size_type rows, const std::vector<double>& w)
{
  double total = 0;
  for (double v : w) total += v;
  std::vector<size_type> hist(w.size(), 0);
  size_type assigned = 0;
  for (std::size_t l = 0; l < w.size(); ++l) {
    hist[l] = static_cast<size_type>(std::floor(rows * w[l] / total));
    assigned += hist[l];
  }
  // The remainder goes to the most likely length.
  const auto peak = std::max_element(w.begin(), w.end()) - w.begin();
  hist[peak] += rows - assigned;
  return stats_of(rows, std::max<size_type>(rows, static_cast<size_type>(w.size()) + 1), hist);
}

row_stats normal_rows(size_type rows, double mean)
{
  const double sigma = std::max(1.0, 0.25 * mean);
  std::vector<double> w(static_cast<std::size_t>(mean + 5 * sigma) + 1, 0.0);
  for (std::size_t l = 1; l < w.size(); ++l) w[l] = std::exp(-0.5 * std::pow((l - mean) / sigma, 2));
  return distributed_rows(rows, w);
}

row_stats uniform_rows(size_type rows, double mean)
{
  const int lo = 1, hi = static_cast<int>(2 * mean) - 1;
  std::vector<double> w(hi + 1, 0.0);
  for (int l = lo; l <= hi; ++l) w[l] = 1.0;
  return distributed_rows(rows, w);
}

sample make_sample(format_id f, family src, const row_stats& s, double us)
{
  sample x;
  x.format = f;
  x.source = src;
  x.features.stats = s;
  x.measured_us = us;
  return x;
}

double rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

// ---------------------------------------------------------------------------------------------------------
// Ground truths of the published forms.

// ELL / CSR-S / JAD: a saddle (bilinear) surface in the strip count I and P_NZ.
double saddle_truth(double i, double p) { return 6.0 + 0.8 * i + 0.02 * p + 0.004 * i * p; }

// CSR-vector: separable u(P) v(I), u two lines meeting at the 1024 threshold.
double ratio_truth(double i, double p)
{
  const double u = p <= 1024 ? 3.0 + 0.01 * p : 3.0 + 0.01 * 1024 + 0.003 * (p - 1024);
  return u * (1.0 + 0.4 * i);
}

// COO: a line over strips counted in nonzeros.
double coo_truth(double i_coo) { return 5.0 + 0.7 * i_coo; }

double strips_of(size_type n, size_type per_strip) { return static_cast<double>((n + per_strip - 1) / per_strip); }

std::vector<sample> guo_wang_benchmarks()
{
  std::vector<sample> out;
  for (int i = 1; i <= 10; ++i) {
    for (int p : {4, 16, 64, 256, 1024, 2048, 3072}) {
      const row_stats s = constant_rows(s_warp * i, p);
      out.push_back(make_sample(format_id::csr_vector, family::constant, s, ratio_truth(i, p)));
    }
    for (int p : {4, 16, 64, 256, 1024}) {
      const row_stats s = constant_rows(s_thread * i, p);
      out.push_back(make_sample(format_id::ell, family::constant, s, saddle_truth(i, p)));
    }
  }
  for (int p = 10; p <= 100; p += 10) {
    const row_stats s = constant_rows(s_thread, p);
    out.push_back(make_sample(format_id::coo, family::constant, s, coo_truth(p)));
  }
  return out;
}

/// A few target matrices unlike the benchmarks (irregular rows, more strips than any benchmark).
std::vector<row_stats> targets()
{
  std::vector<row_stats> t;
  t.push_back(normal_rows(500000, 7.0));
  t.push_back(uniform_rows(1200000, 40.0));
  t.push_back(normal_rows(50688, 300.0));  // 3 half-warp strips, 6 warp strips
  t.push_back(uniform_rows(2000000, 3.0));
  std::vector<double> w(2000, 0.0);  // short rows plus a few very long ones
  w[5] = 1.0;
  w[1999] = 1e-4;
  t.push_back(distributed_rows(300000, w));
  return t;
}

TEST(GuoWang, RecoversPublishedForms)
{
  const auto d = h100_like();
  auto m = aijp::model::make_model("guo_wang");
  m->fit(guo_wang_benchmarks(), d);
  for (format_id f : {format_id::csr_vector, format_id::ell, format_id::coo, format_id::hyb}) EXPECT_TRUE(m->covers(f));
  EXPECT_FALSE(m->covers(format_id::pellr));
  EXPECT_FALSE(m->covers(format_id::cusparse_csr));

  for (const row_stats& s : targets()) {
    matrix_features mf;
    mf.stats = s;
    // CSR-vector: warp-per-row strips, P_NZ = mode.
    const auto csr = m->predict_us(format_id::csr_vector, mf, d);
    ASSERT_TRUE(csr.has_value());
    EXPECT_LT(rel(*csr, ratio_truth(strips_of(s.rows, s_warp), s.mode_len)), 0.01) << s.to_string();
    // ELL: thread-per-row strips, P_NZ = max.
    const auto ell = m->predict_us(format_id::ell, mf, d);
    ASSERT_TRUE(ell.has_value());
    EXPECT_LT(rel(*ell, saddle_truth(strips_of(s.rows, s_thread), s.max_len)), 0.01) << s.to_string();
    // COO: strips counted in nonzeros.
    const auto coo = m->predict_us(format_id::coo, mf, d);
    ASSERT_TRUE(coo.has_value());
    EXPECT_LT(rel(*coo, coo_truth(strips_of(s.nnz, s_thread))), 0.01) << s.to_string();
    // HYB: ELL part at the Bell-Garland width K plus COO part of its own nonzeros.
    const auto hyb = m->predict_us(format_id::hyb, mf, d);
    ASSERT_TRUE(hyb.has_value());
    double expected = saddle_truth(strips_of(s.rows, s_thread), s.hyb_ell_width);
    if (s.hyb_coo_nnz > 0) expected += coo_truth(strips_of(s.hyb_coo_nnz, s_thread));
    EXPECT_LT(rel(*hyb, expected), 0.01) << s.to_string();
  }
  // The CSR-V model keeps its strip geometry and threshold as coefficients.
  const auto c = m->coefficients();
  EXPECT_EQ(c.at("csr_vector").at("lanes"), 32.0);
  EXPECT_EQ(c.at("csr_vector").at("threshold"), 1024.0);
  EXPECT_EQ(c.count("hyb"), 0u);  // HYB reuses the ELL and COO relationships
  EXPECT_NEAR(c.at("coo").at("e_per_strip"), 0.7, 1e-9);
  EXPECT_NEAR(c.at("coo").at("e_const"), 5.0, 1e-9);
}

TEST(GuoWang, IgnoresMatricesThatAreNotWholeStripsOfTheFormat)
{
  // A warm-up that measures every format on every matrix hands the ELL fit the warp-strip matrices too
  // (rows = 8448 i: a fraction of one thread strip). They are not ELL benchmarks and must not move the fit.
  const auto d = h100_like();
  auto clean = aijp::model::make_model("guo_wang");
  clean->fit(guo_wang_benchmarks(), d);
  auto samples = guo_wang_benchmarks();
  for (int i : {1, 2, 4, 8}) {
    for (int p : {32, 512, 2048}) {
      samples.push_back(make_sample(format_id::ell, family::constant, constant_rows(s_warp * i, p), 1.0));
    }
  }
  auto mixed = aijp::model::make_model("guo_wang");
  mixed->fit(samples, d);
  EXPECT_EQ(mixed->coefficients(), clean->coefficients());
}

TEST(GuoWang, FitsOnlyConstantFamilyAndIgnoresOtherFormats)
{
  const auto d = h100_like();
  auto samples = guo_wang_benchmarks();
  for (auto& s : samples) s.source = family::normal;
  auto m = aijp::model::make_model("guo_wang");
  m->fit(samples, d);
  matrix_features mf;
  mf.stats = targets().front();
  for (format_id f : aijp::all_formats()) EXPECT_FALSE(m->predict_us(f, mf, d).has_value()) << aijp::format_name(f);
  EXPECT_TRUE(m->coefficients().empty());
}

// ---------------------------------------------------------------------------------------------------------
// Wang-Gu-Li: benchmark P_NZ is the distribution mean; targets use the mode (CSR-V) or the max.

std::vector<sample> wang_gu_li_benchmarks(family src)
{
  const auto rows_of = [src](size_type rows, double mean) {
    return src == family::normal ? normal_rows(rows, mean) : uniform_rows(rows, mean);
  };
  std::vector<sample> out;
  std::vector<int> strips_v;
  for (int i = 1; i <= 10; ++i) strips_v.push_back(i);
  for (int i = 15; i <= 50; i += 5) strips_v.push_back(i);
  std::vector<int> p_v, p_s;
  for (int p = 4; p <= 1024; p *= 2) p_v.push_back(p);
  p_s = p_v;
  for (int p : {1536, 2048, 2560, 3072}) p_v.push_back(p);
  for (int i : strips_v) {
    for (int p : p_v) {
      const row_stats s = rows_of(s_half_warp * i, p);
      out.push_back(make_sample(format_id::csr_vector, src, s, ratio_truth(i, s.mean)));
    }
  }
  for (int i = 1; i <= 10; ++i) {
    for (int p : p_s) {
      const row_stats s = rows_of(s_thread * i, p);
      for (format_id f : {format_id::csr_scalar, format_id::ell, format_id::jad}) {
        const double scale = f == format_id::csr_scalar ? 1.0 : f == format_id::ell ? 0.7 : 0.9;
        out.push_back(make_sample(f, src, s, scale * saddle_truth(i, s.mean)));
      }
    }
  }
  return out;
}

class WangGuLi : public ::testing::TestWithParam<family> {};

TEST_P(WangGuLi, RecoversPublishedForms)
{
  const auto d = h100_like();
  const family src = GetParam();
  const std::string name = src == family::normal ? "wang_gu_li_normal" : "wang_gu_li_uniform";
  auto m = aijp::model::make_model(name);
  EXPECT_EQ(m->name(), name);
  auto samples = wang_gu_li_benchmarks(src);
  // Samples of the other family are not this model's benchmarks: they must be ignored.
  for (auto s : wang_gu_li_benchmarks(src == family::normal ? family::uniform : family::normal)) {
    s.measured_us *= 3.0;
    samples.push_back(s);
  }
  m->fit(samples, d);
  EXPECT_FALSE(m->covers(format_id::coo));
  EXPECT_FALSE(m->covers(format_id::hyb));
  EXPECT_EQ(m->coefficients().at("csr_vector").at("lanes"), 16.0);  // half-warp CSR-V strips

  for (const row_stats& s : targets()) {
    matrix_features mf;
    mf.stats = s;
    const auto csr = m->predict_us(format_id::csr_vector, mf, d);
    ASSERT_TRUE(csr.has_value());
    EXPECT_LT(rel(*csr, ratio_truth(strips_of(s.rows, s_half_warp), s.mode_len)), 0.01) << s.to_string();
    const double i = strips_of(s.rows, s_thread);
    for (format_id f : {format_id::csr_scalar, format_id::ell, format_id::jad}) {
      const double scale = f == format_id::csr_scalar ? 1.0 : f == format_id::ell ? 0.7 : 0.9;
      const auto t = m->predict_us(f, mf, d);
      ASSERT_TRUE(t.has_value());
      EXPECT_LT(rel(*t, scale * saddle_truth(i, s.max_len)), 0.01) << aijp::format_name(f) << " " << s.to_string();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, WangGuLi, ::testing::Values(family::normal, family::uniform),
                         [](const ::testing::TestParamInfo<family>& p) {
                           return std::string(aijp::model::family_name(p.param));
                         });

// ---------------------------------------------------------------------------------------------------------
// Our model.

TEST(Aijp, FeaturesOfEllByHand)
{
  const auto d = h100_like();
  matrix_features mf;
  mf.stats = constant_rows(1000, 5);  // cols = 1000
  mf.x_sectors_per_nnz = 0.25;
  const auto phi = aijp::model::aijp_features(format_id::ell, mf, d);
  ASSERT_EQ(phi.size(), aijp::model::aijp_coefficient_names().size());
  const double ws = 1000.0 * 5 * 12 + 1000.0 * 8 + 1000.0 * 8;  // padded entries + x once + y
  EXPECT_DOUBLE_EQ(phi[0], 1.0);
  EXPECT_DOUBLE_EQ(phi[1], ws);
  EXPECT_DOUBLE_EQ(phi[2], 0.0);
  EXPECT_DOUBLE_EQ(phi[3], 0.25 * 5000 * 32);
  EXPECT_DOUBLE_EQ(phi[4], 8.0);  // in L2: rows of 5 walked in 2 chunks of 4
  EXPECT_DOUBLE_EQ(phi[5], 0.0);
  EXPECT_DOUBLE_EQ(phi[6], 5000.0 / s_thread);

  // A working set beyond L2 moves the excess bytes and the serial chain to the DRAM features.
  mf.stats = constant_rows(4000000, 5);
  const auto big = aijp::model::aijp_features(format_id::ell, mf, d);
  EXPECT_DOUBLE_EQ(big[1], d.l2_bytes);
  EXPECT_DOUBLE_EQ(big[2], 4e6 * 5 * 12 + 4e6 * 8 * 2 - d.l2_bytes);
  EXPECT_DOUBLE_EQ(big[4], 0.0);
  EXPECT_DOUBLE_EQ(big[5], 8.0);

  // csr_vector: lanes = 8 for mean 5, ceil(max / lanes) = 5 steps, walked in chunks of 4: 2 rounds, the one
  // beyond the first counted (4 steps).
  std::vector<size_type> hist(41, 0);
  hist[4] = 999;
  hist[40] = 1;
  mf.stats = stats_of(1000, 1000, hist);
  const auto v = aijp::model::aijp_features(format_id::csr_vector, mf, d);
  EXPECT_DOUBLE_EQ(v[4], 4.0);
  EXPECT_DOUBLE_EQ(v[6], 1000.0 * 8 * 1 / s_thread);
}

TEST(Aijp, CsrVectorChainOfStackedRows)
{
  const auto d = h100_like();
  matrix_features mf;
  // 8 lanes (mean 5): one wave holds 132 x 8 blocks x 32 rows = 33792 rows with one row per lane group.
  const auto skewed = [](size_type rows) {
    std::vector<size_type> hist(41, 0);
    hist[4] = rows - 1;
    hist[40] = 1;
    return stats_of(rows, rows, hist);
  };
  mf.stats = skewed(33792);
  EXPECT_EQ(aijp::csr_vector_slots(mf.stats, &d), 1);
  auto v = aijp::model::aijp_features(format_id::csr_vector, mf, d);
  EXPECT_DOUBLE_EQ(v[4], 4.0);  // ceil(40 / 8) = 5 steps in chunks of 4: 2 rounds, 1 beyond the first
  // One more row: 4 rows per lane group. Every step issues the loads of all four rows together, so the
  // chain is the longest row's (5 steps), at 2 steps per round where the one-row loop does 4:
  // 1 + 4 / 2 x (5 - 1) steps of the one-row loop.
  mf.stats = skewed(33793);
  EXPECT_EQ(aijp::csr_vector_slots(mf.stats, &d), 4);
  v = aijp::model::aijp_features(format_id::csr_vector, mf, d);
  EXPECT_DOUBLE_EQ(v[4], 9.0);
  // Lanes still load the same entries: the slot work does not change.
  EXPECT_DOUBLE_EQ(v[6], 33793.0 * 8 * 1 / s_thread);
  // Constant rows of 40 (32 lanes, 2 steps each; the working set exceeds the L2): one round with one row
  // per group (nothing beyond the first), 1 + 2 x (2 - 1) = 3 stacked.
  mf.stats = constant_rows(300000, 40);
  EXPECT_EQ(aijp::csr_vector_slots(mf.stats, &d), 4);
  EXPECT_DOUBLE_EQ(aijp::model::aijp_features(format_id::csr_vector, mf, d)[5], 3.0);
  // Without a device geometry the one-row variant is assumed (the layout facts as before).
  EXPECT_EQ(aijp::csr_vector_slots(mf.stats, nullptr), 1);
  EXPECT_DOUBLE_EQ(aijp::layout_traffic_of(format_id::csr_vector, mf.stats, 8).serial_entries, 0.0);
  EXPECT_DOUBLE_EQ(aijp::layout_traffic_of(format_id::csr_vector, mf.stats, 8, &d).serial_entries, 3.0);
  aijp::device_properties unknown;
  EXPECT_DOUBLE_EQ(aijp::layout_traffic_of(format_id::csr_vector, mf.stats, 8, &unknown).serial_entries, 0.0);
}

/// Random matrices of all shapes: constant, normal, uniform and skewed rows, 10^3..3x10^7 rows.
std::vector<matrix_features> random_matrices(int count, std::uint64_t seed)
{
  aijp::gen::prng g(seed);
  std::vector<matrix_features> out;
  for (int k = 0; k < count; ++k) {
    const size_type rows = static_cast<size_type>(std::exp(g.uniform(std::log(1e3), std::log(3e7))));
    const double mean = std::exp(g.uniform(std::log(2.0), std::log(120.0)));
    const size_type rows_capped =
        std::max<size_type>(1000, std::min<size_type>(rows, static_cast<size_type>(4e8 / mean)));
    row_stats s;
    switch (g.below(4)) {
      case 0: s = constant_rows(rows_capped, static_cast<int>(std::lround(mean))); break;
      case 1: s = normal_rows(rows_capped, mean); break;
      case 2: s = uniform_rows(rows_capped, std::max(2.0, mean)); break;
      default: {
        const int longest = static_cast<int>(mean * std::exp(g.uniform(std::log(5.0), std::log(500.0))));
        std::vector<double> w(longest + 1, 0.0);
        for (int l = 1; l <= longest; ++l) w[l] = std::pow(l, -2.2);
        w[longest] = std::max(w[longest], 2.0 / rows_capped);
        s = distributed_rows(rows_capped, w);
      }
    }
    // Natural order lies between the sorted order and every warp holding a longest row.
    const double warps = static_cast<double>((s.rows + 31) / 32);
    const double worst = warps * s.max_len;
    s.n_iter_natural = static_cast<size_type>(s.n_iter_sorted + g.uniform(0.0, 0.3) * (worst - s.n_iter_sorted));
    matrix_features mf;
    mf.stats = s;
    mf.x_sectors_per_nnz = g.uniform(0.125, 1.0);
    out.push_back(mf);
  }
  return out;
}

/// Bandwidth + launch + serial-row ground truth: bytes at 8 TB/s in L2 and 3 TB/s beyond, gathers at
/// 5 TB/s, 90 / 270 ns per dependent entry of the longest row, 4.5 us launch (+5 us for cuSPARSE).
double aijp_truth(format_id f, const matrix_features& mf, const aijp::device_properties& d)
{
  const auto phi = aijp::model::aijp_features(f, mf, d);
  const double launch = 4.5 + (f == format_id::cusparse_csr || f == format_id::cusparse_csr_alg2 ? 5.0 : 0.0) +
                        (f == format_id::coo || f == format_id::hyb ? 3.0 : 0.0);
  return launch + phi[1] / 8e6 + phi[2] / 3e6 + phi[3] / 5e6 + phi[4] * 0.09 + phi[5] * 0.27;
}

/// Mean relative error on 100 held-out matrices x all formats of the aijp model fitted on 150 matrices x all
/// formats; training and held-out times carry `noise` (relative standard deviation). With
/// `against_truth`, the held-out predictions are compared with the noiseless truth instead.
double held_out_error(const std::function<double(format_id, const matrix_features&)>& truth, double noise,
                      bool against_truth = false)
{
  const auto d = h100_like();
  aijp::gen::prng g(42);
  std::vector<sample> train;
  for (const auto& mf : random_matrices(150, 1)) {
    for (format_id f : aijp::all_formats()) {
      train.push_back(make_sample(f, family::other, mf.stats, truth(f, mf) * (1.0 + noise * g.normal())));
      train.back().features = mf;
    }
  }
  auto m = aijp::model::make_model("aijp");
  m->fit(train, d);
  double sum = 0;
  int n = 0;
  for (const auto& mf : random_matrices(100, 2)) {
    for (format_id f : aijp::all_formats()) {
      const auto p = m->predict_us(f, mf, d);
      EXPECT_TRUE(p.has_value()) << aijp::format_name(f);
      if (!p) continue;
      const double measured = truth(f, mf) * (against_truth ? 1.0 : 1.0 + noise * g.normal());
      sum += aijp::model::relative_error(*p, measured);
      ++n;
    }
  }
  return n ? sum / n : 1.0;
}

TEST(Aijp, FitsRooflineTruthUnderNoise)
{
  // The kernel waits for the slower of streaming and its longest row: the model's own form.
  const auto d = h100_like();
  const auto truth = [&d](format_id f, const matrix_features& mf) {
    const auto phi = aijp::model::aijp_features(f, mf, d);
    return 4.5 + std::max(phi[1] / 8e6 + phi[2] / 3e6 + phi[3] / 5e6, phi[4] * 0.09 + phi[5] * 0.27);
  };
  // Against noisy held-out measurements (what a held-out benchmark sees): the noise alone gives
  // E|N(0, 0.03)| = 2.4 %.
  const double err = held_out_error(truth, 0.03);
  EXPECT_LT(err, 0.05);
  RecordProperty("mean_relative_error", std::to_string(err));
  // Against the noiseless truth: what the fit itself loses.
  const double fit_err = held_out_error(truth, 0.03, true);
  EXPECT_LT(fit_err, 0.015);
  RecordProperty("mean_relative_error_vs_truth", std::to_string(fit_err));
}

TEST(Aijp, AdditiveTruthStillUsable)
{
  // Streaming and serial costs that add up instead: outside the model's max() span, so only a looser bound.
  const auto d = h100_like();
  const auto truth = [&d](format_id f, const matrix_features& mf) { return aijp_truth(f, mf, d); };
  const double err = held_out_error(truth, 0.03);
  EXPECT_LT(err, 0.15);
  RecordProperty("mean_relative_error", std::to_string(err));
}

// ---------------------------------------------------------------------------------------------------------
// Interface behaviour shared by all models.

std::vector<sample> all_training_samples()
{
  const auto d = h100_like();
  auto samples = guo_wang_benchmarks();
  for (family src : {family::normal, family::uniform}) {
    const auto w = wang_gu_li_benchmarks(src);
    samples.insert(samples.end(), w.begin(), w.end());
  }
  aijp::gen::prng g(7);
  for (const auto& mf : random_matrices(40, 3)) {
    for (format_id f : aijp::all_formats()) {
      samples.push_back(make_sample(f, family::other, mf.stats, aijp_truth(f, mf, d) * (1.0 + 0.03 * g.normal())));
      samples.back().features = mf;
    }
  }
  return samples;
}

TEST(Models, CoefficientsRoundTripExactly)
{
  const auto d = h100_like();
  const auto samples = all_training_samples();
  const auto probes = targets();
  for (const auto& name : aijp::model::model_names()) {
    auto fitted = aijp::model::make_model(name);
    fitted->fit(samples, d);
    const auto table = fitted->coefficients();
    EXPECT_FALSE(table.empty()) << name;
    auto restored = aijp::model::make_model(name);
    restored->set_coefficients(table);
    EXPECT_EQ(restored->coefficients(), table) << name;
    for (const auto& s : probes) {
      matrix_features mf;
      mf.stats = s;
      mf.x_sectors_per_nnz = 0.5;
      for (format_id f : aijp::all_formats()) {
        const auto a = fitted->predict_us(f, mf, d);
        const auto b = restored->predict_us(f, mf, d);
        ASSERT_EQ(a.has_value(), b.has_value()) << name << " " << aijp::format_name(f);
        if (a) {
          EXPECT_EQ(*a, *b) << name << " " << aijp::format_name(f);
        }
        EXPECT_EQ(a.has_value(), fitted->covers(f)) << name << " " << aijp::format_name(f);
      }
    }
  }
}

TEST(Models, MissingOrUnknownCoefficientsLeaveFormatUnfitted)
{
  const auto d = h100_like();
  matrix_features mf;
  mf.stats = targets().front();
  for (const auto& name : aijp::model::model_names()) {
    auto m = aijp::model::make_model(name);
    m->fit(all_training_samples(), d);
    auto table = m->coefficients();
    ASSERT_TRUE(table.count("ell")) << name;
    // Drop one required name (the aijp calibration keys "cal_*" are optional: see the next test).
    auto required = table["ell"].begin();
    while (required != table["ell"].end() && required->first.rfind("cal_", 0) == 0) ++required;
    ASSERT_NE(required, table["ell"].end()) << name;
    table["ell"].erase(required);
    table["no_such_format"]["x"] = 1.0;         // ignored
    table["csr_vector"]["no_such_name"] = 2.0;  // ignored
    auto r = aijp::model::make_model(name);
    r->set_coefficients(table);
    EXPECT_FALSE(r->predict_us(format_id::ell, mf, d).has_value()) << name;
    EXPECT_TRUE(r->predict_us(format_id::csr_vector, mf, d).has_value()) << name;
    if (name == "guo_wang") {
      EXPECT_FALSE(r->predict_us(format_id::hyb, mf, d).has_value());  // HYB needs the ELL relationship
    }
  }
}

TEST(Models, AijpCalibrationRoundTripsAndIsOptional)
{
  const auto d = h100_like();
  auto m = aijp::model::make_model("aijp");
  m->fit(all_training_samples(), d);
  const auto table = m->coefficients();
  ASSERT_TRUE(table.at("ell").count("cal_bins"));
  auto same = aijp::model::make_model("aijp");
  same->set_coefficients(table);
  auto bare_table = table;
  for (auto& [format, row] : bare_table) {
    for (auto it = row.begin(); it != row.end();) it = it->first.rfind("cal_", 0) == 0 ? row.erase(it) : std::next(it);
  }
  auto bare = aijp::model::make_model("aijp");
  bare->set_coefficients(bare_table);
  for (const auto& t : targets()) {
    matrix_features mf;
    mf.stats = t;
    const auto a = m->predict_us(format_id::ell, mf, d), b = same->predict_us(format_id::ell, mf, d);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(*a, *b);  // restored exactly
    EXPECT_TRUE(bare->predict_us(format_id::ell, mf, d).has_value());  // uncalibrated, still fitted
  }
}

TEST(Models, UnfittedModelsPredictNothing)
{
  const auto d = h100_like();
  matrix_features mf;
  mf.stats = targets().front();
  for (const auto& name : aijp::model::model_names()) {
    auto m = aijp::model::make_model(name);
    EXPECT_EQ(m->name(), name);
    for (format_id f : aijp::all_formats()) EXPECT_FALSE(m->predict_us(f, mf, d).has_value()) << name;
    EXPECT_TRUE(m->coefficients().empty());
    m->fit({}, d);  // zero samples
    for (format_id f : aijp::all_formats()) EXPECT_FALSE(m->predict_us(f, mf, d).has_value()) << name;
    EXPECT_TRUE(m->coefficients().empty());
  }
  auto aijp_model = aijp::model::make_model("aijp");
  for (format_id f : aijp::all_formats()) EXPECT_TRUE(aijp_model->covers(f));
}

TEST(Models, DegenerateSamplesGiveNoNaN)
{
  const auto d = h100_like();
  matrix_features probe;
  probe.stats = targets().front();
  const row_stats one = constant_rows(s_thread, 16);
  for (const auto& name : aijp::model::model_names()) {
    for (int copies : {1, 3, 50}) {
      std::vector<sample> samples;
      for (int k = 0; k < copies; ++k) {
        for (format_id f : aijp::all_formats()) {
          for (family src : {family::constant, family::normal, family::uniform, family::other}) {
            samples.push_back(make_sample(f, src, one, 12.5));
          }
        }
      }
      // Zero, negative and non-finite times are not measurements.
      samples.push_back(make_sample(format_id::ell, family::constant, constant_rows(2 * s_thread, 4), 0.0));
      samples.push_back(make_sample(format_id::ell, family::constant, constant_rows(3 * s_thread, 8), -1.0));
      samples.push_back(make_sample(format_id::ell, family::constant, constant_rows(4 * s_thread, 8), NAN));
      auto m = aijp::model::make_model(name);
      ASSERT_NO_THROW(m->fit(samples, d)) << name;
      for (const auto& [fmt, row] : m->coefficients())
        for (const auto& [k, v] : row) EXPECT_TRUE(std::isfinite(v)) << name << " " << fmt << " " << k;
      for (format_id f : aijp::all_formats()) {
        const auto p = m->predict_us(f, probe, d);
        if (p) {
          EXPECT_TRUE(std::isfinite(*p)) << name << " " << aijp::format_name(f);
          EXPECT_GE(*p, 0.0);
        }
      }
      // All-identical samples carry no slope: the published models stay unfitted, ours fits a constant.
      if (name != "aijp") {
        EXPECT_TRUE(m->coefficients().empty()) << name;
      }
      if (name == "aijp" && copies >= 6) {
        const auto p = m->predict_us(format_id::ell, probe, d);
        ASSERT_TRUE(p.has_value());
        EXPECT_NEAR(*p, 12.5, 1e-9);
      }
    }
  }
}

TEST(Models, EmptyTargetMatrix)
{
  const auto d = h100_like();
  matrix_features empty;  // no rows
  for (const auto& name : aijp::model::model_names()) {
    auto m = aijp::model::make_model(name);
    m->fit(all_training_samples(), d);
    for (format_id f : aijp::all_formats()) {
      const auto p = m->predict_us(f, empty, d);
      if (p) {
        EXPECT_TRUE(std::isfinite(*p)) << name << " " << aijp::format_name(f);
      }
    }
  }
}

TEST(Models, MakeModelRejectsUnknownNames)
{
  try {
    aijp::model::make_model("roofline");
    FAIL() << "expected bad_input";
  } catch (const aijp::bad_input& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("roofline"), std::string::npos);
    for (const auto& n : aijp::model::model_names()) EXPECT_NE(what.find(n), std::string::npos) << n;
  }
  EXPECT_EQ(aijp::model::model_names().size(), 4u);
  EXPECT_STREQ(aijp::model::family_name(family::constant), "constant");
  EXPECT_STREQ(aijp::model::family_name(family::other), "other");
}

// A sample of `format` on a square matrix of `rows` rows and `nnz` nonzeros, measured at `us`.
aijp::model::sample sample_of(aijp::format_id format, const std::string& matrix, double us, aijp::size_type rows, aijp::size_type nnz)
{
  aijp::model::sample s;
  s.format = format;
  s.matrix = matrix;
  s.measured_us = us;
  s.features.stats.rows = s.features.stats.cols = rows;
  s.features.stats.nnz = nnz;
  return s;
}

}  // namespace

// Sample files: appended line by line, read back whole; an xz-compressed file (bench/results keeps older sample
// files so) reads the same; a missing file gives no samples, a file that is not xz an error naming it.
TEST(Models, SampleFilesPlainAndXz)
{
  const auto dir = std::filesystem::temp_directory_path() / ("aijp_samples_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string plain = (dir / "s.jsonl").string();
  aijp::model::sample s = sample_of(aijp::format_id::ell, "m's \"name\"", 12.5, 100, 700);
  for (int i = 0; i < 3; ++i) {
    s.measured_us += 1;
    aijp::model::append_sample(plain, s);
  }
  {
    std::ofstream(plain, std::ios::app) << "{\"cut short";  // an interrupted write
  }
  const auto a = aijp::model::read_samples(plain);
  ASSERT_EQ(a.samples.size(), 3u);
  EXPECT_EQ(a.bad_lines, 1);
  EXPECT_EQ(a.samples[2].measured_us, 15.5);
  EXPECT_EQ(a.samples[0].matrix, s.matrix);
  if (std::system(("xz -k -- '" + plain + "'").c_str()) != 0) GTEST_SKIP() << "no xz tool";
  const auto b = aijp::model::read_samples(plain + ".xz");
  ASSERT_EQ(b.samples.size(), 3u);
  EXPECT_EQ(b.bad_lines, 1);
  EXPECT_EQ(b.samples[1].measured_us, a.samples[1].measured_us);
  EXPECT_EQ(b.samples[1].format, aijp::format_id::ell);
  EXPECT_TRUE(aijp::model::read_samples((dir / "missing.jsonl.xz").string()).samples.empty());
  std::ofstream(dir / "bad.jsonl.xz") << "not xz";
  try {
    aijp::model::read_samples((dir / "bad.jsonl.xz").string());
    FAIL() << "no exception";
  } catch (const aijp::bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl.xz"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// The gather mixture travels through a sample line as 8 [share, ratio] pairs and into the prediction input; a
// line without it reads as unknown (the samples written before it), one with a wrong number of pairs is a bad line.
TEST(Models, SampleLineCarriesTheGatherMixture)
{
  aijp::model::sample s = sample_of(aijp::format_id::coo, "gen:circuit", 120.0, 1000, 6000);
  s.features.x_mixture.share = {0.5, 0.125, 0, 0, 0, 0, 0, 0.375};
  s.features.x_mixture.ratio = {0.0625, 0.2, 0, 0, 0, 0, 0, 0.96875};
  s.features.x_mixture.longest_row_len = 2000;
  s.features.x_mixture.longest_row_ratio = 0.875;
  const std::string line = aijp::model::to_json_line(s);
  EXPECT_NE(line.find("\"x_mixture\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"x_longest_row\":[2000.0,0.875]"), std::string::npos) << line;
  const auto back = aijp::model::from_json_line(line);
  EXPECT_EQ(back.features.x_mixture.share, s.features.x_mixture.share);
  EXPECT_EQ(back.features.x_mixture.ratio, s.features.x_mixture.ratio);
  EXPECT_EQ(back.features.x_mixture.longest_row_len, 2000);
  EXPECT_EQ(back.features.x_mixture.longest_row_ratio, 0.875);
  const auto in = aijp::model::prediction_input_of(back, aijp::device_properties{});
  EXPECT_TRUE(in.x_mixture.known());
  EXPECT_DOUBLE_EQ(in.x_mixture.mean(), 0.5 * 0.0625 + 0.125 * 0.2 + 0.375 * 0.96875);
  // Unknown: not written, read back empty.
  aijp::model::sample old = s;
  old.features.x_mixture = {};
  const std::string old_line = aijp::model::to_json_line(old);
  EXPECT_EQ(old_line.find("x_mixture"), std::string::npos) << old_line;
  EXPECT_EQ(old_line.find("x_longest_row"), std::string::npos) << old_line;
  EXPECT_FALSE(aijp::model::from_json_line(old_line).features.x_mixture.known());
  EXPECT_EQ(aijp::model::from_json_line(old_line).features.x_mixture.longest_row_len, 0);
  // A ratio above 1 or a pair that is not one: bad lines.
  for (const char* wrong : {"[2000.0,1.5]", "[2000.0]"}) {
    std::string bad_row = line;
    bad_row.replace(bad_row.find("[2000.0,0.875]"), std::string("[2000.0,0.875]").size(), wrong);
    EXPECT_THROW(aijp::model::from_json_line(bad_row), aijp::bad_input) << wrong;
  }
  // Seven pairs: a bad line.
  std::string bad = line;
  const auto at = bad.find("[0.5,0.0625],");
  ASSERT_NE(at, std::string::npos) << line;
  bad.erase(at, std::string("[0.5,0.0625],").size());
  EXPECT_THROW(aijp::model::from_json_line(bad), aijp::bad_input);
}

// The gap between back-to-back kernels travels through a sample line (absent when not measured, as in samples
// written before it; a negative one is a bad line), and at_launch_gap moves each sample that has one to the
// given gap by its product's kernels: one for csr_vector, two for COO and cuSPARSE CSR, 3.5 for ALG2, HYB's two
// only with a COO part. Samples without a gap, and every sample for gap 0, stay as measured.
TEST(Models, SamplesMovedToOneLaunchGap)
{
  using aijp::format_id;
  aijp::model::sample s = sample_of(format_id::coo, "gen:band", 10.0, 1000, 6000);
  EXPECT_EQ(aijp::model::to_json_line(s).find("launch_gap_us"), std::string::npos);
  EXPECT_EQ(aijp::model::from_json_line(aijp::model::to_json_line(s)).launch_gap_us, 0.0);
  s.launch_gap_us = 2.25;
  const std::string line = aijp::model::to_json_line(s);
  EXPECT_NE(line.find("\"launch_gap_us\":2.25"), std::string::npos) << line;
  EXPECT_EQ(aijp::model::from_json_line(line).launch_gap_us, 2.25);
  std::string bad = line;
  bad.replace(bad.find("\"launch_gap_us\":2.25"), std::string("\"launch_gap_us\":2.25").size(), "\"launch_gap_us\":-1");
  EXPECT_THROW(aijp::model::from_json_line(bad), aijp::bad_input);

  std::vector<aijp::model::sample> v;
  for (auto [f, gap] : std::vector<std::pair<format_id, double>>{{format_id::csr_vector, 2.0},
                                                                 {format_id::coo, 2.0},
                                                                 {format_id::cusparse_csr, 2.2},
                                                                 {format_id::cusparse_csr_alg2, 2.0},
                                                                 {format_id::hyb, 2.0},
                                                                 {format_id::ell, 0.0}}) {
    v.push_back(sample_of(f, "m", 10.0, 1000, 6000));
    v.back().launch_gap_us = gap;
  }
  v[4].features.stats.hyb_coo_nnz = 0;  // HYB without a COO part: one kernel
  EXPECT_DOUBLE_EQ(aijp::model::median_launch_gap_us(v), 2.0);
  EXPECT_EQ(aijp::model::median_launch_gap_us({v.back()}), 0.0);
  const auto moved = aijp::model::at_launch_gap(v, 2.2);
  EXPECT_NEAR(moved[0].measured_us, 10.2, 1e-12);
  EXPECT_NEAR(moved[1].measured_us, 10.4, 1e-12);
  EXPECT_NEAR(moved[2].measured_us, 10.0, 1e-12);  // already at 2.2
  EXPECT_NEAR(moved[3].measured_us, 10.7, 1e-12);
  EXPECT_NEAR(moved[4].measured_us, 10.2, 1e-12);
  EXPECT_EQ(moved[5].measured_us, 10.0);  // no gap of its own
  for (int k = 0; k < 5; ++k) EXPECT_EQ(moved[k].launch_gap_us, 2.2);
  EXPECT_EQ(moved[5].launch_gap_us, 0.0);
  v[4].features.stats.hyb_coo_nnz = 10;
  EXPECT_NEAR(aijp::model::at_launch_gap(v, 1.9)[4].measured_us, 9.8, 1e-12);
  for (const auto& s0 : aijp::model::at_launch_gap(v, 0.0)) EXPECT_EQ(s0.measured_us, 10.0);
}
