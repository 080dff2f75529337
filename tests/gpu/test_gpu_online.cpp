// Device tests of online refinement: event timing read back without waiting, results unchanged, timing
// paused by aijp::time_spmv, the legacy default stream, bounded exploration, and the corrections saved to
// and loaded from a cache directory. Skipped (not failed) on a machine without a CUDA device.
#include <aijpredict/cache.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/measure.hpp>
#include <aijpredict/reference.hpp>

#include "gpu_test_support.hpp"
#include "test_checks.hpp"
#include "test_matrices.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <chrono>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using aijp::format_id;

class GpuOnline : public ::testing::Test {
 protected:
  void SetUp() override
  {
    std::string why;
    if (!aijp::device_available(&why)) GTEST_SKIP() << why;
    a_ = aijp::gen::laplacian_2d_5pt(200, 200);
    x_.resize(a_.cols);
    for (std::size_t i = 0; i < x_.size(); ++i) x_[i] = 1.0 + static_cast<double>(i % 5) / 4;
    yref_.resize(a_.rows);
    aijp::reference_spmv(a_.view(), 1.0, x_.data(), 0.0, yref_.data());
    bound_ = aijp::spmv_error_bounds(a_.view(), 1.0, x_.data(), 0.0, yref_.data());
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx_), x_.size() * sizeof(double)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dy_), yref_.size() * sizeof(double)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx_, x_.data(), x_.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override
  {
    if (!aijp::device_available()) return;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // an asynchronous error fails the test that caused it
    cudaStreamDestroy(s_);
    cudaFree(dx_);
    cudaFree(dy_);
  }
  static std::unique_ptr<aijp::context> online_context(const std::string& cache_dir = {})
  {
    aijp::context_options o;
    o.use_cache = !cache_dir.empty();
    o.cache_dir = cache_dir;
    o.online = true;
    return std::make_unique<aijp::context>(o);
  }
  // Single-format plans that may explore after 4 samples, observed every 4.
  static aijp::plan_options quick_exploration()
  {
    aijp::plan_options po = single();
    po.online_policy.explore_after = 4;
    po.online_policy.observe_every = 4;
    return po;
  }
  // An online context whose corrections say cuSPARSE CSR measures `csr_factor` times its prediction and every
  // other feasible format 100 times its own (5 observations each, in the size class of this matrix's layout).
  std::unique_ptr<aijp::context> skewed_context(double csr_factor, const aijp::plan_options& po)
  {
    auto ctx = online_context();
    std::vector<aijp::format_estimate> est;
    {
      aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
      est = probe.report().estimates;
    }
    const double l2 = static_cast<double>(ctx->device().l2_bytes);
    for (const auto& e : est) {
      const auto cls = aijp::online::classify(e.bytes, l2);
      for (int k = 0; k < 5; ++k) {
        if (e.format == format_id::cusparse_csr) {
          ctx->online_corrections()->observe(e.format, cls, 1.0, csr_factor);
        } else if (e.feasible) {
          ctx->online_corrections()->observe(e.format, cls, 1.0, 100.0);
        }
      }
    }
    return ctx;
  }
  // Finds what the analysis picks under `po`, then makes the model believe that format is 100x faster than
  // it is: its measured time will exceed the runner-up's prediction, which triggers exploration.
  format_id mispredict_choice(aijp::context& ctx, const aijp::plan_options& po)
  {
    format_id first;
    double bytes = 0;
    {
      aijp::gpu_matrix<double> probe(ctx, a_.view(), po, s_);
      first = probe.format();
      for (const auto& e : probe.report().estimates) {
        if (e.format == first) bytes = e.bytes;
      }
    }
    const auto cls = aijp::online::classify(bytes, static_cast<double>(ctx.device().l2_bytes));
    ctx.online_corrections()->observe(first, cls, 100.0, 1.0);
    return first;
  }
  // A plan under `po` whose choice (`first`) the model believes 100x faster than it is (mispredict_choice), after
  // `n` products, its timed products read back.
  std::unique_ptr<aijp::gpu_matrix<double>> mispredicted_run(aijp::context& ctx, const aijp::plan_options& po, int n, format_id& first)
  {
    first = mispredict_choice(ctx, po);
    auto m = std::make_unique<aijp::gpu_matrix<double>>(ctx, a_.view(), po, s_);
    EXPECT_EQ(m->format(), first);
    run(*m, n, s_);
    m->online_sync();
    return m;
  }
  // Single-format plans: a row-partitioned plan is measured but not learned from (docs/models.md). The
  // tests count the runner-up's and the baseline's comparisons, so no free candidate (policy::free_band)
  // follows them: FreeCandidateIsTriedWithinTheBandAfterTheOthers tests those.
  static aijp::plan_options single()
  {
    aijp::plan_options po;
    po.partition = false;
    po.online_policy.free_band = 0;
    po.online_policy.sample_first_spacing = 1;  // counts below assume every first product timed (spacing: its own test)
    // and an exploration at the first observation that qualifies (confirmations: their own test)
    po.online_policy.explore_confirmations = 1;
    return po;
  }
  // A csr_vector plan that never explores, with the sampling constants the counting tests spell out: the first
  // 16 products timed, then one in 8, an observation every 8 samples.
  static aijp::plan_options counted_sampling()
  {
    aijp::plan_options po = single();
    po.forced = format_id::csr_vector;
    po.online_policy.explore = false;
    po.online_policy.sample_first = 16;
    po.online_policy.sample_every = 8;
    po.online_policy.observe_every = 8;
    return po;
  }
  void run(aijp::gpu_matrix<double>& m, int n, cudaStream_t s)
  {
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(cudaMemsetAsync(dy_, 0xff, yref_.size() * sizeof(double), s), cudaSuccess);  // NaN planted
      m.apply(1.0, dx_, 0.0, dy_, s);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    }
    std::vector<double> y(yref_.size());
    ASSERT_EQ(cudaMemcpy(y.data(), dy_, y.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
    aijp::test::expect_close(y, yref_, bound_, std::string("online ") + aijp::format_name(m.format()));
  }
  // Runs `m` through its two comparisons and checks them: two "explored" lines, the second with `second`;
  // the last exploration finished with `second` and kept the faster of the two measured.
  void expect_two_comparisons_ending_with(aijp::gpu_matrix<double>& m, aijp::format_id second, cudaStream_t s)
  {
    const auto& r = m.report();
    run(m, 120, s);
    m.online_sync();
    std::cout << r.to_string();
    std::vector<std::string> explored;
    for (const auto& l : r.refinement) {
      if (l.rfind("explored ", 0) == 0) explored.push_back(l);
    }
    ASSERT_EQ(explored.size(), 2u) << r.to_string();
    EXPECT_EQ(explored[1].rfind(std::string("explored ") + aijp::format_name(second) + ": ", 0), 0u) << explored[1];
    ASSERT_TRUE(r.exploration.has_value()) << r.to_string();
    EXPECT_TRUE(r.exploration->finished) << r.to_string();
    EXPECT_EQ(r.exploration->to, second);
    const auto& x = *r.exploration;
    EXPECT_EQ(r.chosen, x.to_measured_us < x.from_measured_us ? second : x.from) << r.to_string();
    run(m, 2, s);  // still correct after the switches
  }

  aijp::csr_matrix<double> a_;
  std::vector<double> x_, yref_, bound_;
  double *dx_ = nullptr, *dy_ = nullptr;
  cudaStream_t s_ = nullptr;
};

TEST_F(GpuOnline, MeasuresAndRefinesWithoutChangingResults)
{
  auto ctx = online_context();
  // Measuring only: an exploration (its own tests below) would begin a new epoch and restart the count.
  // (It did once on an H100 with a freshly calibrated context: 3 samples left of 40 products.)
  aijp::plan_options po = single();
  po.online_policy.explore = false;
  aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
  EXPECT_EQ(m.report().online_factor.size(), m.report().estimates.size());
  EXPECT_GT(m.report().predicted_us, 0);
  run(m, 40, s_);
  m.online_sync();
  const auto& r = m.report();
  EXPECT_GE(r.measured_samples, 16) << r.to_string();
  EXPECT_GT(r.measured_us, 0);
  EXPECT_GE(r.model_error, 0);
  EXPECT_GT(ctx->online_corrections()->observations(), 0);
  EXPECT_NE(r.to_string().find("model error"), std::string::npos);
  // A second plan of the same matrix is analysed with the corrections: its prediction is near the measurement.
  aijp::gpu_matrix<double> again(*ctx, a_.view(), single(), s_);
  if (again.format() == r.chosen) {
    EXPECT_NEAR(again.report().predicted_us, r.measured_us, 0.5 * r.measured_us);
  }
}

// A settled plan times fewer and fewer of its products (policy::sample_every_max): after the first 16, one
// in 8 until an observation, then one in 16, 32, 64; a timed product costs the host ~7 us. Counted exactly:
// the products are synchronised one by one, so every timed pair is read back at the next product.
TEST_F(GpuOnline, SettledPlanTimesFewerProducts)
{
  auto ctx = online_context();
  aijp::plan_options po = counted_sampling();
  for (int max : {8, 64}) {
    SCOPED_TRACE("sample_every_max " + std::to_string(max));
    po.online_policy.sample_every_max = max;
    aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
    run(m, 2000, s_);
    m.online_sync();
    const int n = m.report().measured_samples;
    if (max == 8) {
      // 16, then products 16, 24, ..., 1992 (k % 8 == 0 with k counted from 0): 248.
      EXPECT_EQ(n, 16 + 248) << m.report().to_string();
    } else {
      // 16 first; then 8 each at intervals 8, 16, 32 (the 8 samples of a window double the interval once
      // they are read back, which is at the next product); the rest at 64: far fewer than 264.
      EXPECT_GE(n, 16 + 8 * 3) << m.report().to_string();
      EXPECT_LE(n, 16 + 8 * 3 + 2000 / 64 + 2) << m.report().to_string();
    }
    EXPECT_GT(m.report().measured_us, 0);
  }
}

// A plan whose product is a small share of the wall time between products (a solve bound by the host) takes
// its first samples every sample_first_spacing-th product (policy::host_bound_share): here at least 300 us
// of host work (20 times a product's wall time) separate products of a few us. Counted exactly: products
// are synchronised one by one. The gaps are known after gap_window products, so products 0-8 are timed one by one, then 16, 24, ..., 56 (the first
// phase, 15 in all), where every product would give 0-15 and then 16, 24, ..., 56 (22 in all).
TEST_F(GpuOnline, HostBoundSolveSpacesTheFirstSamples)
{
  auto ctx = online_context();
  aijp::plan_options po = counted_sampling();
  po.online_policy.sample_every_max = 8;
  struct variant {
    int spacing;
    double share;
    int expected_samples;
    int expected_spacing;
    bool wait_for_pace = false;
  };
  // The solver's other work between products: at least 20 times a synchronised product's wall time, so the
  // product is a small share of the gap on any machine (also under compute-sanitizer, which slows kernels).
  double product_wall_us = 0;
  {
    aijp::plan_options off = po;
    off.online = false;
    aijp::gpu_matrix<double> probe(*ctx, a_.view(), off, s_);
    for (int k = 0; k < 5; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      probe.apply(1.0, dx_, 0.0, dy_, s_);
      ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
      product_wall_us = std::max(product_wall_us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  const auto spin = std::chrono::duration<double, std::micro>(std::max(300.0, 20 * product_wall_us));
  // Spaced: products 0-7 every one (the pace is not known yet), then 8, 16, ..., 56: 15. Waiting for the pace:
  // only 8, 16, ..., 56: 7.
  for (const variant v : {variant{8, 0.15, 15, 8}, variant{1, 0.15, 22, 1}, variant{8, 0.0, 22, 1}, variant{8, 0.15, 7, 8, true}}) {
    SCOPED_TRACE("spacing " + std::to_string(v.spacing) + ", host-bound share " + std::to_string(v.share) + (v.wait_for_pace ? ", waiting for the pace" : ""));
    po.online_policy.sample_first_spacing = v.spacing;
    po.online_policy.host_bound_share = v.share;
    po.online_policy.first_samples_wait_for_pace = v.wait_for_pace;
    aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
    for (int k = 0; k < 64; ++k) {
      ASSERT_EQ(cudaMemsetAsync(dy_, 0xff, yref_.size() * sizeof(double), s_), cudaSuccess);
      m.apply(1.0, dx_, 0.0, dy_, s_);
      ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
      const auto t0 = std::chrono::steady_clock::now();  // the solver's other work
      while (std::chrono::steady_clock::now() - t0 < spin) {
      }
    }
    std::vector<double> y(yref_.size());
    ASSERT_EQ(cudaMemcpy(y.data(), dy_, y.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
    aijp::test::expect_close(y, yref_, bound_, "spaced samples");
    m.online_sync();
    const auto& r = m.report();
    ASSERT_LT(r.measured_us, 0.15 * spin.count()) << "the product is not a small share of the gap here: " << r.to_string();
    EXPECT_EQ(r.measured_samples, v.expected_samples) << r.to_string();
    EXPECT_EQ(r.first_sample_spacing, v.expected_spacing) << r.to_string();
    EXPECT_EQ(r.to_string().find("the first one in") != std::string::npos, v.expected_spacing > 1) << r.to_string();
  }
}

TEST_F(GpuOnline, LegacyDefaultStream)
{
  auto ctx = online_context();
  aijp::gpu_matrix<double> m(*ctx, a_.view(), single(), nullptr);
  run(m, 20, nullptr);
  m.online_sync();
  EXPECT_GT(m.report().measured_samples, 0);
}

// A GPU without a warm-up of its own: the calibrated constants get the per-format fixed costs and chain
// factors of the nearest shipped default (cache/defaults), fitted there by a warm-up; an empty defaults
// directory leaves them neutral. The cache file the calibration writes then carries them.
TEST_F(GpuOnline, CalibratedContextTakesTheShippedDefaultsCorrections)
{
  const aijp::bandwidth_model_params neutral;
  aijp::context_options o;
  o.use_cache = false;
  {
    const aijp::context ctx(o);
    EXPECT_NE(ctx.params_source().find("from the shipped default"), std::string::npos) << ctx.params_source();
    EXPECT_NE(ctx.model_params().format_fixed_us, neutral.format_fixed_us);
    EXPECT_NE(ctx.model_params().format_chain_scale, neutral.format_chain_scale);
  }
  const auto tmp = std::filesystem::temp_directory_path() / ("aijp_defaults_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp / "defaults");
  std::filesystem::create_directories(tmp / "cache");
  const char* old = std::getenv("AIJPREDICT_DEFAULTS_DIR");
  const std::string saved = old ? old : "";
  {
    const aijp::context with_cache([&] {
      aijp::context_options c;
      c.cache_dir = (tmp / "cache").string();
      return c;
    }());
    EXPECT_NE(with_cache.model_params().format_fixed_us, neutral.format_fixed_us);
  }
  // The file it wrote now carries the corrections: a second context reads them back.
  {
    aijp::context_options c;
    c.cache_dir = (tmp / "cache").string();
    const aijp::context again(c);
    EXPECT_NE(again.params_source().find("cache file"), std::string::npos) << again.params_source();
    EXPECT_NE(again.model_params().format_chain_scale, neutral.format_chain_scale);
  }
  ASSERT_EQ(::setenv("AIJPREDICT_DEFAULTS_DIR", (tmp / "defaults").c_str(), 1), 0);
  {
    const aijp::context none(o);
    EXPECT_EQ(none.params_source().find("shipped default"), std::string::npos) << none.params_source();
    EXPECT_EQ(none.model_params().format_fixed_us, neutral.format_fixed_us);
    EXPECT_EQ(none.model_params().format_chain_scale, neutral.format_chain_scale);
  }
  if (old) ::setenv("AIJPREDICT_DEFAULTS_DIR", saved.c_str(), 1);
  else ::unsetenv("AIJPREDICT_DEFAULTS_DIR");
  std::filesystem::remove_all(tmp);
}

TEST_F(GpuOnline, OffWithoutOnlineContextAndPausedByTimeSpmv)
{
  aijp::context_options o;
  o.use_cache = false;
  const aijp::context plain(o);
  aijp::gpu_matrix<double> m(plain, a_.view(), single(), s_);
  run(m, 20, s_);
  m.online_sync();
  EXPECT_EQ(m.report().measured_samples, 0);
  EXPECT_TRUE(m.report().online_factor.empty());
  EXPECT_EQ(plain.online_corrections(), nullptr);

  auto ctx = online_context();
  aijp::gpu_matrix<double> t(*ctx, a_.view(), single(), s_);
  aijp::timing_options to;
  to.max_total_ms = 20;
  (void)aijp::time_spmv(t, dx_, dy_, s_, to);
  EXPECT_TRUE(t.online_timing());
  t.online_sync();
  EXPECT_EQ(t.report().measured_samples, 0);
  EXPECT_EQ(ctx->online_corrections()->observations(), 0);
}

TEST_F(GpuOnline, ExploresTheRunnerUpOnceAndKeepsTheFaster)
{
  auto ctx = online_context();
  format_id first;
  const auto plan = mispredicted_run(*ctx, quick_exploration(), 60, first);
  aijp::gpu_matrix<double>& m = *plan;
  const auto& r = m.report();
  ASSERT_TRUE(r.exploration.has_value()) << r.to_string();
  // The first comparison is the runner-up's, against the mis-predicted choice. cuSPARSE CSR may follow (the
  // second candidate) when the kept format measures above cuSPARSE CSR's prediction, as products issued one
  // by one from an idle stream often do: r.exploration is then that second comparison.
  const std::string* line = nullptr;
  for (const auto& l : r.refinement) {
    if (l.rfind("explored ", 0) == 0 && line == nullptr) line = &l;
  }
  ASSERT_NE(line, nullptr) << r.to_string();
  EXPECT_NE(line->find(std::string(" of ") + aijp::format_name(first) + ": kept "), std::string::npos) << *line;
  EXPECT_NE(line->rfind(std::string("explored ") + aijp::format_name(first) + ":", 0), 0u) << *line;
  if (r.exploration->to == format_id::cusparse_csr && r.exploration->from != first) {
    EXPECT_EQ(r.refinement.back().rfind("explored cusparse_csr: ", 0), 0u) << r.to_string();
  } else {
    EXPECT_EQ(r.exploration->from, first);
    EXPECT_NE(r.exploration->to, first);
  }
  EXPECT_TRUE(r.exploration->finished) << r.to_string();
  EXPECT_GT(r.exploration->to_measured_us, 0);
  EXPECT_EQ(r.chosen, r.exploration->kept_runner_up ? r.exploration->to : r.exploration->from);
  EXPECT_FALSE(r.refinement.empty());
  run(m, 2, s_);  // still correct after the switch (or the switch back)
}

// A margin reason starts an exploration only when it holds at policy::explore_confirmations observations in a row:
// the mis-predicted choice measures far above the runner-up's prediction at every observation, so with two it is
// still compared (one observation later), while with more observations than the run has it never is.
TEST_F(GpuOnline, MarginReasonMustHoldAtConsecutiveObservations)
{
  for (const int confirmations : {2, 1000}) {
    SCOPED_TRACE("explore_confirmations " + std::to_string(confirmations));
    auto ctx = online_context();
    aijp::plan_options po = quick_exploration();
    po.online_policy.explore_confirmations = confirmations;
    format_id first;
    const auto m = mispredicted_run(*ctx, po, 60, first);
    const auto& r = m->report();
    const auto explored = std::find_if(r.refinement.begin(), r.refinement.end(), [](const std::string& l) { return l.rfind("explored ", 0) == 0; });
    if (confirmations == 2) {
      EXPECT_NE(explored, r.refinement.end()) << r.to_string();
      ASSERT_TRUE(r.exploration.has_value()) << r.to_string();
      EXPECT_NE(r.exploration->to, first);
    } else {
      EXPECT_FALSE(r.exploration.has_value()) << r.to_string();
      EXPECT_TRUE(r.refinement.empty()) << r.to_string();
      EXPECT_EQ(m->format(), first);
    }
  }
}

// A cache whose streaming bandwidth is twice the device's, on a 3D 7-point Laplacian beyond the L2 (2.1M rows): the
// products measure about twice their predictions, which per-format corrections absorb without re-ranking. Once two
// formats are measured on the matrix (the first comparison's: since session 49 before the baseline's), the bandwidth
// that explains them is fitted (within 35 % of the one measured at calibration) and the formats ranked again at it
// (rerank_by_stream_scale). Every product right.
TEST_F(GpuOnline, WrongCachedBandwidthIsFittedAndTheFormatsRankedAgain)
{
  const auto a = aijp::gen::from_spec("lap7:128x128x128");
  const auto tmp = std::filesystem::temp_directory_path() / ("aijp_rerank_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  aijp::context_options co;
  co.cache_dir = tmp.string();
  double true_gbs = 0;
  {
    const aijp::context calibrated(co);  // calibrates this device and writes the file
    true_gbs = calibrated.model_params().stream_read_gbs;
    aijp::test::edit_cache(tmp, calibrated.device(),
                           [](aijp::cache::cache_entry& e) { e.device_metrics["stream_read_gbs"] *= 2; });
  }
  co.online = true;
  aijp::context ctx(co);
  ASSERT_NEAR(ctx.model_params().stream_read_gbs, 2 * true_gbs, 1e-6 * true_gbs);
  const auto x = aijp::test::random_vector(a.cols, 17);
  aijp::test::device_vec<double> dx(x), dy(std::vector<double>(a.rows, 0.0));
  aijp::gpu_matrix<double> m(ctx, a.view(), quick_exploration(), s_);
  for (int i = 0; i < 400; ++i) {
    m.apply(1.0, dx.p, 0.0, dy.p, s_);
    ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  }
  m.online_sync();
  aijp::test::check_product(m, a, x, dx, "after the comparisons", s_);
  const auto& r = m.report();
  std::cout << r.to_string();
  const auto fitted = std::find_if(r.refinement.begin(), r.refinement.end(),
                                   [](const std::string& l) { return l.find(" fit a streaming bandwidth of ") != std::string::npos; });
  ASSERT_NE(fitted, r.refinement.end()) << r.to_string();
  double gbs = 0;
  ASSERT_EQ(std::sscanf(fitted->c_str() + fitted->find(" fit a streaming bandwidth of ") + 30, "%lf", &gbs), 1) << *fitted;
  EXPECT_NEAR(gbs / true_gbs, 1.0, 0.35) << *fitted;
  std::filesystem::remove_all(tmp);
}

// An exploration converts inside a product, so it must pay like the analysis's conversion. The choice is
// made to look 100x faster than it is (it will measure above the runner-up's prediction, a reason to
// explore) and cuSPARSE CSR 3x slower, so that the choice is predicted to save more per product than the
// runner-up can: with just enough expected products for the choice's conversion to pay, the runner-up's
// cannot, and it is not tried (the report says why); with 1e9 it is. Only formats with a layout of their own
// are candidates besides cuSPARSE CSR: one on the CSR copy (csr_scalar, the H100 session-32 default's choice
// here) installs without a conversion, so nothing would be deferred.
TEST_F(GpuOnline, ExplorationThatCannotPayIsNotTried)
{
  for (const bool enough : {false, true}) {
    auto ctx = online_context();
    aijp::plan_options po = quick_exploration();
    aijp::test::drop_csr_copy_formats(po.candidates);
    const format_id first = mispredict_choice(*ctx, po);
    ASSERT_NE(first, format_id::cusparse_csr);
    // Every other format's own cell says its model is right, cuSPARSE CSR's that it is 3x slower: the
    // class-wide correction, which covers what has no cell of its own, stays near 1.
    {
      aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
      for (const auto& e : probe.report().estimates) {
        if (!e.feasible || e.format == first) continue;
        const auto cls = aijp::online::classify(e.bytes, static_cast<double>(ctx->device().l2_bytes));
        for (int k = 0; k < 5; ++k) ctx->online_corrections()->observe(e.format, cls, 1.0, e.format == format_id::cusparse_csr ? 3.0 : 1.0);
      }
    }
    // One expected product defers the choice, and the report then says what it saves and costs.
    po.expected_mults = 1;
    double saving_us = 0, cost_us = 0;
    {
      aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
      ASSERT_TRUE(probe.report().deferred.has_value()) << probe.report().to_string();
      saving_us = probe.report().saving_us;
      cost_us = probe.report().conversion_estimate_us;
    }
    ASSERT_GT(saving_us, 0);
    po.expected_mults = enough ? 1e9 : 1.02 * cost_us / saving_us;
    aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
    ASSERT_EQ(m.format(), first) << m.report().to_string();
    run(m, 60, s_);
    m.online_sync();
    const auto& r = m.report();
    const auto not_tried = std::find_if(r.refinement.begin(), r.refinement.end(),
                                        [](const std::string& l) { return l.find(": not tried, it would save at most ") != std::string::npos; });
    if (!enough) {
      EXPECT_FALSE(r.exploration.has_value()) << r.to_string();
      EXPECT_EQ(m.format(), first);
      EXPECT_NE(not_tried, r.refinement.end()) << r.to_string();
      for (const auto& l : r.refinement) EXPECT_NE(l.rfind("explored ", 0), 0u) << l;
    } else {  // (r.exploration is reset for the second candidate once the first comparison is done)
      const auto explored = std::find_if(r.refinement.begin(), r.refinement.end(), [](const std::string& l) { return l.rfind("explored ", 0) == 0; });
      EXPECT_NE(explored, r.refinement.end()) << r.to_string();
      EXPECT_EQ(not_tried, r.refinement.end()) << r.to_string();
    }
  }
}

// Amortization with an interim format: the best-predicted format (sell_sigma, made to look 5x faster) does not
// pay within the expected products, but csr_vector, which converts for the price of its install, does (cuSPARSE
// CSR made to look 3x slower): csr_vector runs meanwhile, sell_sigma waits with its saving over csr_vector, and
// converts once that pays. Every product right throughout.
TEST_F(GpuOnline, FormatThatPaysRunsWhileTheBestWaitsForItsConversionToPay)
{
  auto ctx = online_context();
  aijp::plan_options po = single();
  po.candidates = {format_id::cusparse_csr, format_id::csr_vector, format_id::sell_sigma};
  po.expected_mults = 1e9;
  {
    aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
    for (const auto& e : probe.report().estimates) {
      const auto cls = aijp::online::classify(e.bytes, static_cast<double>(ctx->device().l2_bytes));
      const double measured = e.format == format_id::cusparse_csr ? 3.0 : e.format == format_id::sell_sigma ? 0.2 : 1.0;
      for (int k = 0; k < 5; ++k) ctx->online_corrections()->observe(e.format, cls, 1.0, measured);
    }
  }
  double t_csr = 0, t_vec = 0, t_sig = 0;
  {
    aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
    ASSERT_EQ(probe.format(), format_id::sell_sigma) << probe.report().to_string();
    for (const auto& e : probe.report().estimates) {
      (e.format == format_id::cusparse_csr ? t_csr : e.format == format_id::csr_vector ? t_vec : t_sig) = e.predicted_us;
    }
  }
  ASSERT_TRUE(t_sig < t_vec && t_vec < t_csr) << t_sig << " " << t_vec << " " << t_csr;
  // One expected product: sell_sigma is deferred; its conversion estimate sets how many products it needs.
  po.expected_mults = 1;
  double cost_sig = 0;
  {
    aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
    ASSERT_EQ(probe.report().deferred, format_id::sell_sigma) << probe.report().to_string();
    cost_sig = probe.report().conversion_estimate_us;
  }
  po.expected_mults = 0.5 * cost_sig / (t_csr - t_sig);  // sell_sigma pays only over twice as many
  ASSERT_GT((t_csr - t_vec) * po.expected_mults, 2 * aijp::csr_copy_install_us) << "csr_vector would not pay either: the test's premise";
  aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
  const auto& r = m.report();
  std::cout << r.to_string();
  EXPECT_EQ(m.format(), format_id::csr_vector) << r.decision;
  ASSERT_EQ(r.deferred, format_id::sell_sigma) << r.decision;
  EXPECT_NE(r.decision.find("; meanwhile csr_vector"), std::string::npos) << r.decision;
  EXPECT_NEAR(r.saving_us, t_vec - t_sig, 1e-9 * t_csr) << "the deferred format's saving is over the interim one";
  run(m, 20, s_);
  EXPECT_FALSE(m.convert_deferred(po.expected_mults, s_)) << "its saving over csr_vector pays over fewer products still";
  EXPECT_TRUE(m.convert_deferred(1e9, s_));
  EXPECT_EQ(m.format(), format_id::sell_sigma) << r.decision;
  EXPECT_FALSE(r.deferred.has_value());
  run(m, 20, s_);
}

// While the runner-up is measured, runs of products alternate between it and the parked running plan, both
// timed (policy.interleave_block): every product stays right, the record holds both interleaved medians, and
// with interleaving off the running plan's figure is the one measured before.
TEST_F(GpuOnline, ExplorationInterleavesTheRunningPlanAndEveryProductIsRight)
{
  for (const int block : {4, 0}) {
    SCOPED_TRACE("interleave_block " + std::to_string(block));
    auto ctx = online_context();
    aijp::plan_options po = single();
    po.online_policy.explore_after = 4;
    po.online_policy.observe_every = 4;
    po.online_policy.interleave_block = block;
    const format_id first = mispredict_choice(*ctx, po);
    aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
    ASSERT_EQ(m.format(), first);
    for (int i = 0; i < 60; ++i) {
      run(m, 1, s_);  // checks every product, whichever plan ran it
      if (HasFatalFailure()) return;
    }
    m.online_sync();
    const auto& r = m.report();
    std::cout << r.to_string();
    const auto line = std::find_if(r.refinement.begin(), r.refinement.end(), [](const std::string& l) { return l.rfind("explored ", 0) == 0; });
    ASSERT_NE(line, r.refinement.end()) << r.to_string();
    ASSERT_TRUE(r.exploration.has_value());
    const auto& x = *r.exploration;
    EXPECT_TRUE(x.finished);
    EXPECT_GT(x.from_before_us, 0);
    EXPECT_GT(x.to_measured_us, 0);
    if (block > 1) {
      EXPECT_GE(x.interleaved, 3) << r.to_string();
      EXPECT_NE(line->find("interleaved"), std::string::npos) << *line;
    } else {
      EXPECT_EQ(x.interleaved, 0);
      EXPECT_EQ(x.from_measured_us, x.from_before_us);
      EXPECT_EQ(line->find("interleaved"), std::string::npos) << *line;
    }
    EXPECT_EQ(r.chosen, x.kept_runner_up ? x.to : x.from);
    EXPECT_EQ(x.kept_runner_up, x.to_measured_us < x.from_measured_us);
  }
}

// A plan installed by a staged step converts its exploration's candidate in parts after the products (a
// format with a builder: here the sell formats), the running format serving every product meanwhile; the
// exploration begins once the last part is issued. Every product is checked.
TEST_F(GpuOnline, StagedPlanConvertsTheExploredCandidateInParts)
{
  std::shared_ptr<aijp::context> ctx = online_context();
  aijp::plan_options po = single();
  po.candidates = {format_id::cusparse_csr, format_id::sell_delta16, format_id::sell_sigma, format_id::sell_c_sigma};
  po.online_policy.explore_after = 4;
  po.online_policy.observe_every = 4;
  po.stage_fraction = 0.02;  // ~10-20 parts of this matrix's conversions
  po.stage_duty = 0;          // a part after every product
  const format_id first = mispredict_choice(*ctx, po);
  ASSERT_NE(first, format_id::cusparse_csr);
  aijp::plan_options upload = po;
  upload.analyze = false;
  aijp::gpu_matrix<double> m(*ctx, a_.view(), upload, s_);
  ASSERT_TRUE(m.start_background(ctx, aijp::background_step::analyze, po, s_, aijp::background_mode::staged));
  bool installed = false;
  // The step's own conversion takes parts of 2 % of the running format's *predicted* time, which the
  // mis-prediction above shrinks: hundreds of parts.
  for (int i = 0; i < 20000 && !installed; ++i) {
    run(m, 1, s_);
    if (HasFatalFailure()) return;
    bool changed = false;
    installed = m.poll_background(s_, &changed);
  }
  if (!installed) {
    const std::string last = m.staged_last_part();
    const bool running = m.background_running();
    m.finish_background(s_);
    const auto stages = m.report().staged_poll_labels();
    std::string tail;
    for (std::size_t k = stages.size() > 8 ? stages.size() - 8 : 0; k < stages.size(); ++k) tail += " | " + stages[k];
    FAIL() << "the staged analysis did not end in 20000 products (running " << running << ", last part '" << last << "', "
           << m.report().staged_polls() << " parts, skipped " << m.report().staged_skipped << ", last stages" << tail << ")\n"
           << m.report().to_string();
  }
  ASSERT_EQ(m.format(), first) << m.report().decision;
  int converting = 0;
  for (int i = 0; i < 400; ++i) {
    run(m, 1, s_);  // checks every product, whichever plan ran it
    if (HasFatalFailure()) return;
    // No second step while the candidate is converted (nor while it is measured).
    if (m.format() == first && !m.report().exploration && m.report().measured_samples >= 4) ++converting;
  }
  m.online_sync();
  const auto& r = m.report();
  std::cout << r.to_string();
  const auto parts = std::find_if(r.refinement.begin(), r.refinement.end(),
                                  [](const std::string& l) { return l.find(" parts after the products") != std::string::npos; });
  ASSERT_NE(parts, r.refinement.end()) << r.to_string();
  const auto n = std::stoi(parts->substr(parts->find("converted in ") + 13));
  EXPECT_GT(n, 3) << *parts;
  EXPECT_GE(converting, 3) << "the running format served the products while the candidate was converted";
  // The first comparison is with the candidate converted in parts, against the mis-predicted choice.
  const auto explored = std::find_if(r.refinement.begin(), r.refinement.end(), [](const std::string& l) { return l.rfind("explored ", 0) == 0; });
  ASSERT_NE(explored, r.refinement.end()) << r.to_string();
  EXPECT_LT(parts - r.refinement.begin(), explored - r.refinement.begin()) << "converted before it was measured";
  EXPECT_EQ(explored->rfind(std::string("explored ") + parts->substr(0, parts->find(' ')) + ": ", 0), 0u) << *explored;
  EXPECT_NE(explored->find(std::string(" of ") + aijp::format_name(first) + ": kept "), std::string::npos) << *explored;
  ASSERT_TRUE(r.exploration.has_value() && r.exploration->finished) << r.to_string();
  run(m, 2, s_);
}

TEST_F(GpuOnline, AfterTheRunnerUpCusparseIsComparedAndTheFastestKept)
{
  auto ctx = online_context();
  aijp::plan_options po = single();
  po.online_policy.explore_after = 4;
  po.online_policy.observe_every = 4;
  // The analysis's choice and the best other format of ours are made to look 500x faster than they are and
  // cuSPARSE CSR 20x (still behind both): whichever of the two is kept measures far above cuSPARSE CSR's
  // prediction, so the baseline is compared next, as on a matrix whose predictions all err the same way.
  format_id first, second = format_id::cusparse_csr;
  std::vector<aijp::format_estimate> est;
  {
    aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
    first = probe.format();
    est = probe.report().estimates;
  }
  if (first == format_id::cusparse_csr) GTEST_SKIP() << "the analysis chose cuSPARSE CSR on this device";
  const aijp::format_estimate* csr = nullptr;
  for (const auto& e : est) {
    if (e.format == format_id::cusparse_csr) csr = &e;
    if (!e.feasible || e.format == first || e.format == format_id::cusparse_csr) continue;
    if (second == format_id::cusparse_csr || e.predicted_us < std::find_if(est.begin(), est.end(), [&](const auto& x) { return x.format == second; })->predicted_us) {
      second = e.format;
    }
  }
  ASSERT_NE(second, format_id::cusparse_csr);
  ASSERT_NE(csr, nullptr);
  const double l2 = static_cast<double>(ctx->device().l2_bytes);
  for (const auto& e : est) {
    const auto cls = aijp::online::classify(e.bytes, l2);
    for (int k = 0; k < 5; ++k) {
      if (e.format == first || e.format == second) ctx->online_corrections()->observe(e.format, cls, 500.0, 1.0);
      if (e.format == format_id::cusparse_csr) ctx->online_corrections()->observe(e.format, cls, 20.0, 1.0);
    }
  }
  aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
  const auto& r = m.report();
  ASSERT_TRUE(m.format() == first || m.format() == second) << r.to_string();
  expect_two_comparisons_ending_with(m, format_id::cusparse_csr, s_);
}

// A format that runs on the CSR copy (csr_vector) is tried, third, when predicted within the free band of
// what the running format (sell_sigma) measures, though predicted slower than it: the corrections put
// sell_sigma's prediction at 1.05x its time measured here, the runner-up sell's at 1.08x, cuSPARSE CSR's at
// 10x and csr_vector's at 1.12x; neither margin rule (set to 300 % here) fires for any of them, so without
// the band csr_vector is not compared, and with a band (300 %) it is, and the faster kept; a second plan of
// the matrix does not try it again by the band (it was measured on this matrix).
TEST_F(GpuOnline, FreeCandidateIsTriedWithinTheBandAfterTheOthers)
{
  aijp::plan_options po = single();
  po.online_policy.explore_after = 4;
  po.online_policy.observe_every = 4;
  po.candidates = {format_id::cusparse_csr, format_id::sell_sigma, format_id::sell_c_sigma, format_id::csr_vector};
  // The rules set out of reach of timing noise. The products here take 8-20 us, and the test plan's own
  // measurement of sell_sigma came out 0.44-2.2x the calibration below in 6 runs of 30 (H100, session 25):
  // the margin rules then compared the candidates first, or the free band missed csr_vector. The free band
  // is the subject: csr_vector must be tried by it alone, after the others gave way, so the margins allow
  // 4x, the band 4x, and the short-product cap is lifted (the skip below still keeps the test to short ones).
  po.online_policy.explore_margin = 3.0;
  po.online_policy.free_max_us = 1000.0;
  // sell_sigma's time here, measured as the test's plan will measure it: a second forced plan of the
  // process (the first one's products include one-time costs).
  double measured = 0;
  {
    auto ctx = online_context();
    aijp::plan_options f = po;
    f.forced = format_id::sell_sigma;
    for (int k = 0; k < 2; ++k) {
      aijp::gpu_matrix<double> m(*ctx, a_.view(), f, s_);
      run(m, 60, s_);
      m.online_sync();
      measured = m.report().measured_us;
    }
  }
  ASSERT_GT(measured, 0);
  if (measured > aijp::online::policy{}.free_max_us) GTEST_SKIP() << "sell_sigma measures " << measured << " us here: not a short product";
  const std::vector<std::pair<format_id, double>> target = {
      {format_id::sell_sigma, 1.05}, {format_id::sell_c_sigma, 1.08}, {format_id::cusparse_csr, 10.0}, {format_id::csr_vector, 1.12}};
  for (const double band : {0.0, 3.0}) {
    SCOPED_TRACE("free band " + std::to_string(band));
    auto ctx = online_context();
    po.online_policy.free_band = band;
    std::vector<aijp::format_estimate> est;
    {
      aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
      est = probe.report().estimates;
    }
    const double l2 = static_cast<double>(ctx->device().l2_bytes);
    for (const auto& e : est) {
      for (const auto& [f, x] : target) {
        if (e.format != f) continue;
        ASSERT_TRUE(e.feasible) << aijp::format_name(f);
        const auto cls = aijp::online::classify(e.bytes, l2);
        for (int k = 0; k < 20; ++k) ctx->online_corrections()->observe(f, cls, e.predicted_us, x * measured);
      }
    }
    aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
    const auto& r = m.report();
    ASSERT_EQ(m.format(), format_id::sell_sigma) << r.to_string();
    run(m, 120, s_);
    m.online_sync();
    std::vector<std::string> explored;
    for (const auto& l : r.refinement) {
      if (l.rfind("explored ", 0) == 0) explored.push_back(l);
    }
    const bool tried = std::any_of(explored.begin(), explored.end(), [](const std::string& l) { return l.rfind("explored csr_vector: ", 0) == 0; });
    if (band == 0) {
      EXPECT_FALSE(tried) << r.to_string();
      continue;
    }
    ASSERT_TRUE(tried) << r.to_string();
    EXPECT_TRUE(std::any_of(r.refinement.begin(), r.refinement.end(), [](const std::string& l) { return l.find("free band") != std::string::npos; }))
        << r.to_string();
    ASSERT_TRUE(r.exploration.has_value());
    EXPECT_TRUE(r.exploration->finished) << r.to_string();
    EXPECT_EQ(r.exploration->to, format_id::csr_vector);
    const auto& x = *r.exploration;
    EXPECT_EQ(r.chosen, x.to_measured_us < x.from_measured_us ? format_id::csr_vector : x.from) << r.to_string();
    run(m, 2, s_);  // still correct after the switches
    aijp::gpu_matrix<double> again(*ctx, a_.view(), po, s_);
    run(again, 120, s_);
    again.online_sync();
    for (const auto& l : again.report().refinement) EXPECT_EQ(l.find("free band"), std::string::npos) << again.report().to_string();
  }
}

TEST_F(GpuOnline, RunningCusparseComparesTheRunnerUpThenAlg2)
{
  // cuSPARSE CSR runs (a 99 % baseline margin keeps it); the best format of ours is made to look 1000x
  // faster than it is and ALG2 500x: cuSPARSE CSR measures far above both predictions, so the runner-up is
  // compared first and ALG2, the other cuSPARSE algorithm, second; the fastest measured is kept.
  auto ctx = online_context();
  aijp::plan_options po = single();
  po.online_policy.explore_after = 4;
  po.online_policy.observe_every = 4;
  po.baseline_margin = 0.99;
  std::vector<aijp::format_estimate> est;
  {
    aijp::gpu_matrix<double> probe(*ctx, a_.view(), po, s_);
    ASSERT_EQ(probe.format(), format_id::cusparse_csr) << probe.report().to_string();
    est = probe.report().estimates;
  }
  format_id ours = format_id::cusparse_csr;
  double ours_us = 0;
  for (const auto& e : est) {
    if (!e.feasible || e.format == format_id::cusparse_csr || e.format == format_id::cusparse_csr_alg2) continue;
    if (ours == format_id::cusparse_csr || e.predicted_us < ours_us) {
      ours = e.format;
      ours_us = e.predicted_us;
    }
  }
  ASSERT_NE(ours, format_id::cusparse_csr);
  const double l2 = static_cast<double>(ctx->device().l2_bytes);
  for (const auto& e : est) {
    const auto cls = aijp::online::classify(e.bytes, l2);
    for (int k = 0; k < 5; ++k) {
      if (e.format == ours) ctx->online_corrections()->observe(e.format, cls, 1000.0, 1.0);
      if (e.format == format_id::cusparse_csr_alg2) ctx->online_corrections()->observe(e.format, cls, 500.0, 1.0);
    }
  }
  aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
  const auto& r = m.report();
  ASSERT_EQ(m.format(), format_id::cusparse_csr) << r.to_string();
  expect_two_comparisons_ending_with(m, format_id::cusparse_csr_alg2, s_);
  if (HasFatalFailure()) return;
  // The first comparison was the runner-up, the format of ours.
  const auto first = std::find_if(r.refinement.begin(), r.refinement.end(), [](const std::string& l) { return l.rfind("explored ", 0) == 0; });
  ASSERT_NE(first, r.refinement.end());
  EXPECT_EQ(first->rfind(std::string("explored ") + aijp::format_name(ours) + ": ", 0), 0u) << *first;
}

TEST_F(GpuOnline, RunningCusparseMissingItsOwnPredictionTriesAlg2)
{
  // The H200 4M-row circuit: cuSPARSE CSR (ALG1) runs and measures far above its own prediction, while every
  // other format, ALG2 included, is predicted slower than that measured time (here: made to look 100x
  // slower than the model says, cuSPARSE CSR 100x faster). The runner-up rule cannot fire; ALG2, which
  // needs no conversion, is still tried once, and nothing else is.
  const aijp::plan_options po = quick_exploration();
  const auto ctx = skewed_context(0.01, po);
  aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
  const auto& r = m.report();
  ASSERT_EQ(m.format(), format_id::cusparse_csr) << r.to_string();
  run(m, 120, s_);
  m.online_sync();
  std::vector<std::string> explored;
  for (const auto& l : r.refinement) {
    if (l.rfind("explored ", 0) == 0) explored.push_back(l);
  }
  ASSERT_EQ(explored.size(), 1u) << r.to_string();
  EXPECT_EQ(explored[0].rfind("explored cusparse_csr_alg2: ", 0), 0u) << explored[0];
  EXPECT_NE(r.refinement.front().find("predicted for it (+"), std::string::npos) << r.refinement.front();
  ASSERT_TRUE(r.exploration.has_value()) << r.to_string();
  const auto& x = *r.exploration;
  EXPECT_TRUE(x.finished);
  EXPECT_EQ(r.chosen, x.to_measured_us < x.from_measured_us ? format_id::cusparse_csr_alg2 : format_id::cusparse_csr);
  run(m, 2, s_);  // still correct after the switch (or the switch back)
}

TEST_F(GpuOnline, RunningCusparseWithinItsOwnPredictionDoesNotTryAlg2)
{
  // The counterpart: the same slow predictions of every other format, but cuSPARSE CSR predicted 4x
  // slower than the model says, so its measured time stays within its prediction: no exploration at all.
  const aijp::plan_options po = quick_exploration();
  const auto ctx = skewed_context(4.0, po);
  aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
  const auto& r = m.report();
  ASSERT_EQ(m.format(), format_id::cusparse_csr) << r.to_string();
  run(m, 120, s_);
  m.online_sync();
  EXPECT_FALSE(r.exploration.has_value()) << r.to_string();
  EXPECT_TRUE(r.refinement.empty()) << r.to_string();
}

TEST_F(GpuOnline, PartitionedPlanIsMeasuredButNotLearnedFrom)
{
  auto ctx = online_context();
  aijp::plan_options po = single();
  po.forced_plan = aijp::parse_partition_plan("sell[0,20000)+coo[20000,40000)");
  aijp::gpu_matrix<double> m(*ctx, a_.view(), po, s_);
  ASSERT_TRUE(m.report().partitioned) << m.report().to_string();
  run(m, 30, s_);
  m.online_sync();
  EXPECT_GT(m.report().measured_samples, 0);
  EXPECT_GT(m.report().measured_us, 0);
  EXPECT_FALSE(m.report().exploration.has_value());
  EXPECT_EQ(ctx->online_corrections()->observations(), 0);
}

TEST_F(GpuOnline, TakenSplitIsComparedWithItsSingleFormatThenCusparseAndTheFastestKept)
{
  // Splits under the placeholder model on the H100 and H200 (hyb or cusparse_csr on the dense top,
  // sell_delta16 below); skipped where this device's constants propose no split.
  const auto a = aijp::gen::from_spec("stack:circuit:rows=100000,dense=32,len=50000+lap27:64x64x64");
  auto ctx = online_context();
  aijp::plan_options po;
  po.online_policy.explore_after = 4;
  po.online_policy.observe_every = 4;
  po.online_policy.sample_first_spacing = 1;
  {
    aijp::gpu_matrix<double> probe(*ctx, a.view(), po, s_);
    if (!probe.report().partitioned) GTEST_SKIP() << "no split taken on this device: " << probe.report().decision;
  }
  aijp::gpu_matrix<double> m(*ctx, a.view(), po, s_);
  const auto& r = m.report();
  ASSERT_TRUE(r.partitioned) << r.to_string();
  const std::string split = r.plan;
  const format_id single = r.proposed.single_format;

  const auto x = aijp::test::random_vector(a.cols, 71);
  std::vector<double> want(a.rows);
  aijp::reference_spmv(a.view(), 1.0, x.data(), 0.0, want.data());
  auto bound = aijp::spmv_error_bounds(a.view(), 1.0, x.data(), 0.0, want.data());
  double *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), x.size() * sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dy), want.size() * sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
  const auto check = [&](const std::string& what) {
    ASSERT_EQ(cudaMemsetAsync(dy, 0xff, want.size() * sizeof(double), s_), cudaSuccess);
    m.apply(1.0, dx, 0.0, dy, s_);
    std::vector<double> y(want.size());
    ASSERT_EQ(cudaMemcpyAsync(y.data(), dy, y.size() * sizeof(double), cudaMemcpyDeviceToHost, s_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
    aijp::test::expect_close(y, want, bound, what);
  };
  for (int i = 0; i < 80; ++i) check("product " + std::to_string(i) + " of " + r.plan);
  m.online_sync();
  std::cout << r.to_string();
  // First the single format the split was predicted to beat ...
  const std::string first = std::string("explored ") + aijp::format_name(single) + ": ";
  const std::string* line = nullptr;
  for (const auto& l : r.refinement) {
    if (l.rfind(first, 0) == 0 && line == nullptr) line = &l;
  }
  ASSERT_NE(line, nullptr) << r.to_string();
  EXPECT_NE(line->find("of the partition " + split), std::string::npos) << *line;
  // The split stays only when it measured policy::split_margin faster than the single format, each one's
  // host time of issuing a product added to its measured time.
  double single_us = 0, split_us = 0, split_host = 0, single_host = 0;
  ASSERT_EQ(std::sscanf(line->c_str() + first.size(), "measured %lf us vs %lf us", &single_us, &split_us), 2) << *line;
  const auto host_at = line->find("host issue of a product ");
  ASSERT_NE(host_at, std::string::npos) << *line;
  ASSERT_EQ(std::sscanf(line->c_str() + host_at, "host issue of a product %lf us for the split, %lf us for", &split_host, &single_host), 2) << *line;
  EXPECT_GT(split_host, 0) << *line;
  EXPECT_GT(single_host, 0) << *line;
  const double margin = aijp::online::policy{}.split_margin;
  const bool split_kept = line->find(": kept " + split) != std::string::npos;
  EXPECT_EQ(split_kept, split_us + split_host < (single_us + single_host) * (1 - margin)) << *line;
  EXPECT_EQ(line->find("a split stays only") != std::string::npos, !split_kept && split_us <= single_us) << *line;
  // ... then, when that was not cuSPARSE CSR, cuSPARSE CSR, whichever of the two was kept.
  bool second = false;
  for (const auto& l : r.refinement) second = second || l.rfind("explored cusparse_csr: ", 0) == 0;
  if (single != format_id::cusparse_csr) {
    EXPECT_TRUE(second) << r.to_string();
  }
  ASSERT_TRUE(r.exploration.has_value()) << r.to_string();
  EXPECT_TRUE(r.exploration->finished) << r.to_string();
  EXPECT_GT(r.exploration->from_measured_us, 0);
  EXPECT_GT(r.exploration->to_measured_us, 0);
  if (r.partitioned) {
    EXPECT_EQ(r.plan, split);
  } else {
    EXPECT_TRUE(m.format() == single || m.format() == format_id::cusparse_csr) << r.plan;
    EXPECT_EQ(r.plan, aijp::format_name(m.format()));
  }
  EXPECT_NE(r.decision.find("online: explored"), std::string::npos) << r.decision;
  check("after the exploration: " + r.plan);
  // Values refreshed after the exploration reach the plan that was kept.
  auto b = a;
  for (auto& v : b.values) v *= 2;
  aijp::reference_spmv(b.view(), 1.0, x.data(), 0.0, want.data());
  bound = aijp::spmv_error_bounds(b.view(), 1.0, x.data(), 0.0, want.data());
  m.update_values(b.values.data(), s_);
  check("refreshed values of " + r.plan);
  cudaFree(dx);
  cudaFree(dy);
}

TEST_F(GpuOnline, CorrectionsPersistThroughTheCache)
{
  std::string tmpl = (std::filesystem::temp_directory_path() / "aijp_online_test-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::filesystem::path dir = tmpl;
  double learned = 0;
  {
    auto ctx = online_context(dir.string());
    aijp::gpu_matrix<double> m(*ctx, a_.view(), single(), s_);
    run(m, 30, s_);
    m.online_sync();
    learned = ctx->online_corrections()->observations();
    ASSERT_GT(learned, 0);
    EXPECT_FALSE(ctx->save_online().empty());
    EXPECT_TRUE(ctx->save_online().empty());  // nothing new since
  }
  {
    auto ctx = online_context(dir.string());
    EXPECT_EQ(ctx->online_corrections()->observations(), learned);
    EXPECT_NE(ctx->online_source().find("loaded from"), std::string::npos) << ctx->online_source();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
