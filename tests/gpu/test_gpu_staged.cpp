// Device tests of staged steps (gpu_matrix::start_background with background_mode::staged): the analysis
// and the conversion issued in parts by successive poll_background calls on the products' stream, never
// waiting for the device, while the products keep running the current plan. Every product before, during
// and after the install against the host reference; the same choice as the synchronous analysis; a
// conversion split into many parts; values changed mid-conversion; finishing, destroying and analysing
// synchronously mid-step; the analysis that keeps cuSPARSE CSR; the host-bound start. Skipped on a machine without a CUDA device.
#include <aijpredict/generators.hpp>

#include "gpu_test_support.hpp"

#include <algorithm>
#include <iostream>
#include <string>

namespace {

using aijp::background_mode;
using aijp::background_step;
using aijp::format_id;
using aijp::test::check_product;
using aijp::test::device_vec;
using aijp::test::not_analysed;

class GpuStaged : public aijp::test::gpu_fixture {
 protected:
  static std::shared_ptr<const aijp::context> make_context(bool online = false) { return aijp::test::own_context(online); }

  // Products until the install (products_until_installed). A staged step always ends: fails after 100000 polls.
  template <typename T>
  static int poll_until_installed(aijp::gpu_matrix<T>& m, const aijp::csr_matrix<T>& a, const std::vector<T>& x,
                                  const device_vec<T>& dx, format_id running, bool* changed)
  {
    return aijp::test::products_until_installed(m, a, x, dx, running, changed, "staged step",
                                                [](int products) { return products > 100000; });
  }

  // Issues the prefetched passes (prefetch_analysis; on the side stream with `side`) and runs products, each
  // checked, until they are read back.
  template <typename T>
  static void prefetch_and_wait(aijp::gpu_matrix<T>& m, const aijp::csr_matrix<T>& a, const std::vector<T>& x,
                                const device_vec<T>& dx, bool side = false)
  {
    m.prefetch_analysis(nullptr, side);
    EXPECT_TRUE(m.prefetch_pending());
    while (!m.advance_prefetch(nullptr)) check_product(m, a, x, dx, side ? "while the side stream's passes run" : "while the prefetched passes run");
  }

  // Takes all of the device's free memory but about `keep` bytes into *hog (cudaFree it), the allocation shrunk
  // in 16 MiB steps until the driver grants it; fails the test where it cannot take at least half.
  static void take_device_memory_but(std::size_t keep, void** hog)
  {
    *hog = nullptr;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::size_t free_bytes = 0, total_bytes = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    ASSERT_GT(free_bytes, 2 * keep);
    for (std::size_t take = free_bytes - keep; take > free_bytes / 2; take -= std::size_t{16} << 20) {
      if (cudaMalloc(hog, take) == cudaSuccess) return;
      (void)cudaGetLastError();
      *hog = nullptr;
    }
    FAIL() << "could not take the device's free memory";
  }

  // Matrices destroyed while a staged step with `opts` runs, after 1, 2 and 3 polls (each poll's product
  // checked): the destructor waits for whatever the step worker is doing.
  template <typename T>
  static void destroy_mid_step(const std::shared_ptr<const aijp::context>& ctx, const aijp::csr_matrix<T>& a,
                               const std::vector<T>& x, const device_vec<T>& dx, const aijp::plan_options& opts)
  {
    for (int polls = 1; polls <= 3; ++polls) {
      aijp::gpu_matrix<T> m(*ctx, a.view(), not_analysed(), nullptr);
      prefetch_and_wait(m, a, x, dx);
      ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
      for (int k = 0; k < polls; ++k) {
        m.poll_background(nullptr);
        check_product(m, a, x, dx, "mid-step");
      }
    }
  }
};

TEST_F(GpuStaged, AnalysisMakesTheSynchronousChoiceOverSeveralProducts)
{
  const auto a = aijp::gen::from_spec("lap7:64x64x64");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 5);
  device_vec<double> dx(x);
  aijp::plan_options opts;
  aijp::gpu_matrix<double> sync(*ctx, a.view(), opts, nullptr);

  // The passes on the products' stream (the default) and on the analysis' own stream.
  for (const bool own_stream : {false, true}) {
    SCOPED_TRACE(own_stream ? "passes on the analysis stream" : "passes on the products' stream");
    opts.analysis_stream = own_stream;
    aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    EXPECT_TRUE(m.background_running());
    EXPECT_FALSE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged)) << "one step at a time";
    bool changed = false;
    const int before = poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
    std::cout << before << " products ran on cuSPARSE CSR while the staged analysis ran; " << m.report().to_string();
    EXPECT_TRUE(changed);
    EXPECT_TRUE(m.report().analyzed);
    // The statistics' first pass, the histogram, the decision: at least three polls before the install.
    EXPECT_GE(m.report().staged_polls(), 3);
    EXPECT_GE(before, 2);
    EXPECT_GT(m.report().staged_host_ms(), 0.0);
    EXPECT_EQ(m.format(), sync.format()) << "staged: " << m.report().decision << "\nsynchronous: " << sync.report().decision;
    EXPECT_EQ(m.report().plan, sync.report().plan);
    EXPECT_EQ(m.report().stats.max_len, sync.report().stats.max_len);
    EXPECT_EQ(m.report().stats.mode_len, sync.report().stats.mode_len);
    EXPECT_EQ(m.report().stats.n_iter_natural, sync.report().stats.n_iter_natural);
    EXPECT_DOUBLE_EQ(m.report().x_sectors_per_nnz, sync.report().x_sectors_per_nnz);
    // One CUDA call per part of the passes (piece_queue), in stream order: each pass's memset, kernel(s),
    // read-back and event appear as parts of their own, and the predictions take parts of their own.
    const auto stages = m.report().staged_poll_labels();
    std::string all;
    for (const auto& st : stages) all += st + " | ";
    const auto part_index = [&](const std::string& what) {
      for (std::size_t k = 0; k < stages.size(); ++k) {
        if (stages[k].find(what) != std::string::npos) return static_cast<int>(k);
      }
      return -1;
    };
    for (const char* pass : {"statistics: ", "samples: ", "histogram: "}) {
      const int memset = part_index(std::string(pass) + "memset");
      const int kernel = part_index(std::string(pass) + "kernel");
      const int copy = part_index(std::string(pass) + "read-back");
      const int event = part_index(std::string(pass) + "event");
      EXPECT_TRUE(memset >= 0 && memset < kernel && kernel < copy && copy < event) << pass << "in parts: " << all;
    }
    EXPECT_GE(part_index("predictions 1-"), 0) << all;
    // The analysis stream's event and wait: parts of their own, before the first pass, only with that stream.
    const int event = part_index("passes' stream: event"), wait = part_index("passes' stream: wait");
    if (own_stream) {
      EXPECT_TRUE(event >= 0 && event < wait && wait < part_index("statistics: memset")) << all;
    } else {
      EXPECT_TRUE(event < 0 && wait < 0) << all;
    }
    aijp::test::check_products_and_refresh(m, a, "after the staged analysis", 7);
  }
}

// The formats with a builder (make_format_builder): sell_delta16, sell_sigma (its window sort a part of its
// own) and sell, each converted in many parts and in as few as it can, with every product checked.
TEST_F(GpuStaged, SellConversionsAreSplitIntoManyParts)
{
  const auto a = aijp::gen::from_spec("lap7:64x64x64");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 9);
  device_vec<double> dx(x);
  for (const format_id f : {format_id::sell_delta16, format_id::sell_sigma, format_id::sell_c_sigma}) {
    SCOPED_TRACE(aijp::format_name(f));
    auto upload = not_analysed();
    upload.layout_reserve = 0;  // the layout from the driver: its allocation a part of its own (below)
    aijp::gpu_matrix<double> m(*ctx, a.view(), upload, nullptr);
    EXPECT_EQ(m.report().reserve_bytes, 0.0);
    aijp::plan_options opts;
    opts.forced = f;
    opts.stage_fraction = 0.002;  // tiny parts: many fills of whole slices, the last one partial
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    bool changed = false;
    const int before = poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
    EXPECT_TRUE(changed);
    ASSERT_EQ(m.format(), f) << m.report().decision;
    const auto at = m.report().decision.find("converted in ");
    ASSERT_NE(at, std::string::npos) << m.report().decision;
    const int parts = std::stoi(m.report().decision.substr(at + 13));
    std::cout << before << " products before the install, " << parts << " parts: " << m.report().to_string();
    EXPECT_GT(parts, 20) << "a part is 0.2 % of a product here";
    EXPECT_GE(before, parts);
    // The layout's one allocation is a part of its own, and its label says so with its size.
    const auto labels = m.report().staged_poll_labels();
    const int with_layout = static_cast<int>(std::count_if(labels.begin(), labels.end(), [&](const std::string& l) {
      return l.find("[1 allocation: ") != std::string::npos && l.find(" KiB]") != std::string::npos;
    }));
    EXPECT_GE(with_layout, 1) << "no part names an allocation";
    aijp::test::check_products_and_refresh(m, a, std::string(aijp::format_name(f)) + " converted in parts", 11);

    // The same fraction of a larger budget: the slice offsets (after sell_sigma's window sort, in the same
    // part), then one fill.
    aijp::gpu_matrix<double> whole(*ctx, a.view(), not_analysed(), nullptr);
    opts.stage_fraction = 1e6;
    ASSERT_TRUE(whole.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    poll_until_installed(whole, a, x, dx, format_id::cusparse_csr, &changed);
    EXPECT_NE(whole.report().decision.find("converted in 2 parts"), std::string::npos)
        << whole.report().decision;
    aijp::test::check_products_and_refresh(whole, a, std::string(aijp::format_name(f)) + " converted in few parts", 3);
  }
}

TEST_F(GpuStaged, ValuesChangedMidConversionReachTheNewPlan)
{
  const auto a = aijp::gen::from_spec("lap7:48x48x48");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 13);
  device_vec<double> dx(x);
  aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
  aijp::plan_options opts;
  opts.forced = format_id::sell_delta16;
  opts.stage_fraction = 0.002;
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
  for (int k = 0; k < 8; ++k) {
    ASSERT_FALSE(m.poll_background(nullptr)) << "poll " << k << " ended the step early";
    check_product(m, a, x, dx, "before the values change, poll " + std::to_string(k));
  }
  auto b = a;
  for (auto& v : b.values) v = -3.0 * v + 0.25;
  m.update_values(b.values.data(), nullptr);
  bool changed = false;
  poll_until_installed(m, b, x, dx, format_id::cusparse_csr, &changed);
  EXPECT_TRUE(changed);
  ASSERT_EQ(m.format(), format_id::sell_delta16) << m.report().decision;
  check_product(m, b, x, dx, "after the install, values changed mid-conversion");
  m.update_values(a.values.data(), nullptr);
  check_product(m, a, x, dx, "values restored");
}

TEST_F(GpuStaged, FinishDestroyOrAnalyseMidStep)
{
  const auto a = aijp::gen::from_spec("lap7:48x48x48");
  const auto ctx = make_context();
  aijp::plan_options opts;
  opts.forced = format_id::sell_delta16;
  opts.stage_fraction = 0.002;
  {
    aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    for (int k = 0; k < 6; ++k) m.poll_background(nullptr);
  }  // destroyed mid-conversion: the builder waits for its issued work before its pooled blocks go back
  {
    aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    for (int k = 0; k < 6; ++k) m.poll_background(nullptr);
    bool changed = false;
    EXPECT_TRUE(m.finish_background(nullptr, &changed));
    EXPECT_TRUE(changed);
    EXPECT_FALSE(m.background_running());
    EXPECT_EQ(m.format(), format_id::sell_delta16) << m.report().decision;
    aijp::test::check_products_and_refresh(m, a, "finished mid-conversion", 17);
  }
  aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
  m.poll_background(nullptr);
  aijp::plan_options plain;
  m.analyze(*ctx, plain, nullptr);  // finishes the staged step first, then analyses again, synchronously
  EXPECT_FALSE(m.background_running());
  aijp::test::check_products_and_refresh(m, a, "synchronous analysis over a staged one", 19);
}

TEST_F(GpuStaged, AnalysisKeepingCuSparseCsrMovesTheRunningLayoutThenConvertsWhenItPays)
{
  const auto a = aijp::gen::from_spec("lap7:64x64x64");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 23);
  device_vec<double> dx(x);
  aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
  aijp::plan_options once;
  once.expected_mults = 1;  // no conversion pays for one product: cuSPARSE CSR stays, the choice is deferred
  // Without the formats on the CSR copy: under compute-sanitizer (kernels ~100x slower while the device is
  // calibrated) csr_vector paid within one product as the interim format, and ran instead of cuSPARSE CSR.
  aijp::test::drop_csr_copy_formats(once.candidates);
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, once, nullptr, background_mode::staged));
  bool changed = false;
  poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
  EXPECT_EQ(m.format(), format_id::cusparse_csr);
  ASSERT_TRUE(m.report().deferred.has_value()) << m.report().decision;
  EXPECT_DOUBLE_EQ(m.report().conversion_ms, 0.0) << "the running cuSPARSE CSR layout was kept, not rebuilt";
  aijp::test::check_products_and_refresh(m, a, "cuSPARSE CSR kept by a staged analysis", 29);  // transpose too
  m.update_values(a.values.data(), nullptr);

  const auto target = *m.report().deferred;
  EXPECT_FALSE(m.start_background(ctx, background_step::convert_deferred, once, nullptr, background_mode::staged));
  aijp::plan_options many = once;
  many.expected_mults = 1e9;
  many.stage_fraction = 0.01;
  ASSERT_TRUE(m.start_background(ctx, background_step::convert_deferred, many, nullptr, background_mode::staged));
  poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(m.format(), target) << m.report().decision;
  EXPECT_FALSE(m.report().deferred.has_value());
  aijp::test::check_products_and_refresh(m, a, "deferred conversion, staged", 31);
}

TEST_F(GpuStaged, SinglePrecisionOnAStreamOfItsOwn)
{
  const auto ad = aijp::gen::from_spec("lap7:48x48x48");
  aijp::csr_matrix<float> a;
  a.rows = ad.rows;
  a.cols = ad.cols;
  a.row_ptr = ad.row_ptr;
  a.col_idx = ad.col_idx;
  a.values.assign(ad.values.begin(), ad.values.end());
  const auto ctx = make_context();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  {
    const auto xd = aijp::test::random_vector(a.cols, 37);
    const std::vector<float> x(xd.begin(), xd.end());
    device_vec<float> dx(x);
    aijp::gpu_matrix<float> m(*ctx, a.view(), not_analysed(), s);
    aijp::plan_options opts;
    opts.forced = format_id::sell_delta16;
    opts.stage_fraction = 0.005;
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, s, background_mode::staged));
    bool changed = false;
    int polls = 0;
    while (!m.poll_background(s, &changed)) {
      check_product(m, a, x, dx, "float product while staged", s);
      ASSERT_LT(++polls, 100000);
    }
    EXPECT_TRUE(changed);
    EXPECT_EQ(m.format(), format_id::sell_delta16) << m.report().decision;
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    aijp::test::check_products_and_refresh(m, a, "float, staged, own stream", 41);
  }
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(GpuStaged, PartitionIsPlannedInSlicesAndMatchesTheSynchronousPlan)
{
  // The staged analysis of a heterogeneous matrix gathers the strips in polled passes (detail::strip_job:
  // summaries, locality, column facts, each read back without waiting) and runs the DP in slices over later
  // products (impl::planning_request), then analyses again with that plan: the same proposal (to the last
  // bit of its prediction, so the same strips), decision and plan as the synchronous analysis, and no part
  // as long as the DP in one go.
  const auto a = aijp::gen::from_spec("stack:lap27:64x64x64+powerlaw:rows=100000,deg=16,exp=2.1");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 11);
  device_vec<double> dx(x);
  aijp::plan_options opts;
  opts.online = false;
  opts.stage_duty = 0;  // a part at every product: the test is about the parts, not the pacing
  aijp::gpu_matrix<double> sync(*ctx, a.view(), opts, nullptr);
  const auto& want = sync.report();
  ASSERT_GE(want.proposed.strips, 2) << "the test needs a planned partition: " << want.decision;

  aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
  bool changed = false;
  const int before = poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
  const auto& rep = m.report();
  std::cout << before << " products while the staged analysis ran; parts (us):";
  for (double t : rep.staged_poll_us) std::cout << " " << t;
  std::cout << "\n" << rep.to_string();
  EXPECT_TRUE(changed);
  EXPECT_EQ(rep.proposed.to_string(), want.proposed.to_string());
  EXPECT_EQ(rep.proposed.strips, want.proposed.strips);
  EXPECT_DOUBLE_EQ(rep.proposed.predicted_us, want.proposed.predicted_us);
  EXPECT_DOUBLE_EQ(rep.proposed.single_us, want.proposed.single_us);
  EXPECT_EQ(rep.plan, want.plan);
  EXPECT_EQ(rep.partitioned, want.partitioned);
  EXPECT_EQ(m.format(), sync.format());
  if (rep.partitioned) {  // built in parts
    EXPECT_NE(rep.decision.find("; built in "), std::string::npos) << rep.decision;
  }
  // Statistics (2 parts: issued with the free-memory query, histogram), decision, strips (2 or more), at least two DP
  // slices, the analysis again.
  EXPECT_GE(rep.staged_polls(), 8);
  EXPECT_GT(rep.proposed.planning_ms, 0.0);
  aijp::test::check_products_and_refresh(m, a, "after the staged analysis with a partition", 13);
}

TEST_F(GpuStaged, LatePartitionPlanningRunsInSlices)
{
  // plan_when_reused as a staged step: the planning the analysis skipped (too little use to pay for it)
  // happens over later products in slices, with the same outcome as the synchronous call.
  const auto a = aijp::gen::from_spec("stack:circuit:rows=100000,dense=32,len=50000+lap27:64x64x64");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 17);
  device_vec<double> dx(x);
  aijp::plan_options opts;
  opts.online = false;
  opts.stage_duty = 0;
  opts.expected_mults = 2;
  opts.planning_share = 1e-3;  // too little for the strips: pending (as GpuPartitionTest.PlanningSkippedUntilTheUsePaysForIt)
  aijp::gpu_matrix<double> sync(*ctx, a.view(), opts, nullptr);
  aijp::gpu_matrix<double> m(*ctx, a.view(), opts, nullptr);
  ASSERT_TRUE(m.report().partition_pending) << m.report().decision;
  const auto single = m.format();

  opts.expected_mults = 1e6;
  opts.planning_share = aijp::plan_options().planning_share;
  const bool sync_changed = sync.plan_when_reused(*ctx, opts, nullptr);
  ASSERT_TRUE(m.start_background(ctx, background_step::plan_when_reused, opts, nullptr, background_mode::staged));
  bool changed = false;
  const int before = poll_until_installed(m, a, x, dx, single, &changed);
  const auto& rep = m.report();
  std::cout << before << " products while the staged planning ran (" << rep.staged_polls() << " parts); " << rep.decision << "\n";
  EXPECT_EQ(changed, sync_changed);
  EXPECT_FALSE(rep.partition_pending);
  EXPECT_EQ(rep.proposed.to_string(), sync.report().proposed.to_string());
  EXPECT_EQ(rep.plan, sync.report().plan);
  EXPECT_GE(rep.staged_polls(), 4);  // the step, the strips, the DP (at least one slice), the step again
  // A partition taken is built in parts too (detail::make_partition_builder): the block bounds, each
  // block's sub-CSR and statistics, its child (sell_delta16 in row slices); the products stay right.
  if (rep.partitioned) {
    EXPECT_NE(rep.decision.find("; built in "), std::string::npos) << rep.decision;
    EXPECT_GE(rep.staged_polls(), 8) << rep.decision;
  }
  aijp::test::check_products_and_refresh(m, a, "after the staged planning", 19);
}

// The layout reserve (plan_options::layout_reserve): the first conversion takes its layout from the CSR
// copy's allocation (no part allocates it from the driver), a second layout that no longer fits comes from
// the driver, a layout replaced by another frees nothing, and every product stays right throughout. No
// reserve when it is off or when nothing but the CSR copy can run.
TEST_F(GpuStaged, LayoutsComeFromTheReserveUntilItIsUsedUp)
{
  const auto a = aijp::gen::from_spec("lap7:64x64x64");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 13);
  device_vec<double> dx(x);
  const double csr_bytes = a.nnz() * (sizeof(double) + sizeof(aijp::index_type)) + (a.rows + 1.0) * sizeof(aijp::index_type);
  const auto names_allocation_over = [](const std::vector<std::string>& labels, double bytes) {
    for (const auto& l : labels) {  // "[1 allocation: 18432 KiB]", "[2 allocations: 16 KiB, 4 KiB host]"
      for (auto at = l.find(": "); at != std::string::npos; at = l.find(", ", at + 1)) {
        const auto kib = l.find(" KiB", at);
        if (kib == std::string::npos) break;
        try {
          if (std::stod(l.substr(at + 2, kib - at - 2)) * 1024 >= bytes) return true;
        } catch (const std::exception&) {
        }
      }
    }
    return false;
  };

  {
    const aijp::gpu_matrix<double> small(*ctx, a.view(), not_analysed(), nullptr);
    ASSERT_LT(csr_bytes, aijp::layout_reserve_small_bytes);
    EXPECT_GE(small.report().reserve_bytes, 2 * csr_bytes) << "default: a small copy's bytes twice (rounded up)";
    EXPECT_LE(small.report().reserve_bytes, 2 * csr_bytes + 512);
  }
  // Half of that: one copy's bytes, which the second layout below no longer fits beside the first.
  auto upload = not_analysed();
  upload.layout_reserve = 0.5;
  aijp::gpu_matrix<double> m(*ctx, a.view(), upload, nullptr);
  const double reserve = m.report().reserve_bytes;
  ASSERT_GE(reserve, csr_bytes) << "0.5: the CSR copy's bytes (rounded up), with this much free device memory";
  EXPECT_EQ(m.report().reserve_used_bytes, 0.0);
  aijp::plan_options opts;
  opts.forced = format_id::sell_delta16;
  opts.stage_fraction = 0.01;
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
  bool changed = false;
  poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
  ASSERT_EQ(m.format(), format_id::sell_delta16) << m.report().decision;
  const double first = m.report().reserve_used_bytes;
  std::cout << m.report().to_string();
  EXPECT_GT(first, 0.5 * csr_bytes) << "sell_delta16's layout (10 bytes per stored entry) came from the reserve";
  EXPECT_LE(first, reserve);
  EXPECT_FALSE(names_allocation_over(m.report().staged_poll_labels(), 0.25 * csr_bytes))
      << "no part allocated the layout from the driver";
  EXPECT_NE(m.report().to_string().find("layout reserve beside the CSR copy"), std::string::npos);
  aijp::test::check_products_and_refresh(m, a, "sell_delta16 in the reserve", 5);
  m.update_values(a.values.data(), nullptr);  // back to `a`'s values, the reference below

  // A second layout: sell_sigma's 12 bytes per entry no longer fit beside the first one; from the driver.
  opts.forced = format_id::sell_sigma;
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
  poll_until_installed(m, a, x, dx, format_id::sell_delta16, &changed);
  ASSERT_EQ(m.format(), format_id::sell_sigma) << m.report().decision;
  EXPECT_TRUE(names_allocation_over(m.report().staged_poll_labels(), 0.5 * csr_bytes))
      << "the second layout came from the driver";
  EXPECT_LE(m.report().reserve_used_bytes, reserve);
  EXPECT_GE(m.report().reserve_used_bytes, first) << "regions are never handed out twice";
  aijp::test::check_products_and_refresh(m, a, "sell_sigma after the reserve", 5);

  // Synchronous conversions of every format with a layout of its own take from a reserve too.
  for (const format_id f : {format_id::coo, format_id::ell, format_id::ellr, format_id::pellr, format_id::jad, format_id::hyb,
                            format_id::sell_sigma, format_id::sell_c_sigma, format_id::cusparse_sell}) {
    SCOPED_TRACE(aijp::format_name(f));
    aijp::plan_options sync;
    sync.forced = f;
    aijp::gpu_matrix<double> s(*ctx, a.view(), sync, nullptr);
    ASSERT_EQ(s.format(), f) << s.report().decision;
    EXPECT_GT(s.report().reserve_used_bytes, 0.0);
    aijp::test::check_products_and_refresh(s, a, std::string(aijp::format_name(f)) + " in the reserve", 3);
  }

  auto off = not_analysed();
  off.layout_reserve = 0;
  EXPECT_EQ(aijp::gpu_matrix<double>(*ctx, a.view(), off, nullptr).report().reserve_bytes, 0.0);
  aijp::plan_options csr_only;
  csr_only.forced = format_id::cusparse_csr;
  EXPECT_EQ(aijp::gpu_matrix<double>(*ctx, a.view(), csr_only, nullptr).report().reserve_bytes, 0.0);
  aijp::plan_options quarter = not_analysed();
  quarter.layout_reserve = 0.25;
  const double q = aijp::gpu_matrix<double>(*ctx, a.view(), quarter, nullptr).report().reserve_bytes;
  EXPECT_GE(q, 0.5 * csr_bytes) << "a quarter of a small copy's bytes counted twice";
  EXPECT_LT(q, 0.55 * csr_bytes);
}

// The analysis' passes issued at the upload (prefetch_analysis) and read back at later products without
// waiting (advance_prefetch): a staged analysis started afterwards begins at its decision, issues no pass of
// its own, and makes the synchronous analysis' choice from the same statistics. With plan_options::host_worker
// the decision (and a conversion on the CSR copy, and the DP of a partition) runs on the step worker: the
// products' thread then only hands the stages over. Every product checked against the host reference.
TEST_F(GpuStaged, PrefetchedPassesAndHostWorkerMakeTheSynchronousChoice)
{
  const auto ctx = make_context();
  for (const char* spec : {"lap7:48x48x48", "powerlaw:rows=20000,deg=8,exp=2.1", "stack:lap27:64x64x64+powerlaw:rows=100000,deg=16,exp=2.1"}) {
    const auto a = aijp::gen::from_spec(spec);
    const auto x = aijp::test::random_vector(a.cols, 17);
    device_vec<double> dx(x);
    aijp::plan_options opts;
    opts.online = false;
    aijp::gpu_matrix<double> sync(*ctx, a.view(), opts, nullptr);
    for (const bool prefetch : {true, false}) {
      for (const bool worker : {false, true}) {
        SCOPED_TRACE(std::string(spec) + (prefetch ? ", prefetched" : ", own passes") + (worker ? ", host worker" : ", products' thread"));
        aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
        int before_step = 0;
        if (prefetch) {
          m.prefetch_analysis(nullptr);
          EXPECT_TRUE(m.prefetch_pending());
          while (!m.advance_prefetch(nullptr)) {
            check_product(m, a, x, dx, "product " + std::to_string(before_step) + " while the prefetched passes run");
            ASSERT_LT(++before_step, 100000) << "the prefetched passes never came back";
          }
          EXPECT_FALSE(m.prefetch_pending());
          EXPECT_EQ(m.format(), format_id::cusparse_csr);
          EXPECT_FALSE(m.report().analyzed);
        }
        opts.host_worker = worker;
        ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
        bool changed = false;
        const int products = poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
        const auto& rep = m.report();
        std::string all;
        for (const auto& st : rep.staged_poll_labels()) all += st + " | ";
        std::cout << spec << (prefetch ? " prefetched" : "") << (worker ? " worker" : "") << ": " << before_step << " products for the prefetch, "
                  << products << " for the step; parts: " << all << " worker: " << rep.staged_worker_stages << " (" << rep.staged_worker_ms
                  << " ms)\n";
        EXPECT_TRUE(changed);
        EXPECT_TRUE(rep.analyzed);
        EXPECT_EQ(rep.staged_prefetched, prefetch);
        EXPECT_EQ(m.format(), sync.format()) << "staged: " << rep.decision << "\nsynchronous: " << sync.report().decision;
        EXPECT_EQ(rep.plan, sync.report().plan);
        EXPECT_EQ(rep.proposed.to_string(), sync.report().proposed.to_string());
        EXPECT_EQ(rep.stats.max_len, sync.report().stats.max_len);
        EXPECT_EQ(rep.stats.n_iter_natural, sync.report().stats.n_iter_natural);
        EXPECT_EQ(rep.stats.chain_warp_nnz, sync.report().stats.chain_warp_nnz);
        EXPECT_DOUBLE_EQ(rep.x_sectors_per_nnz, sync.report().x_sectors_per_nnz);
        const bool own_passes = all.find("statistics: ") != std::string::npos || all.find("samples: ") != std::string::npos ||
                                all.find("histogram: ") != std::string::npos;
        EXPECT_EQ(own_passes, !prefetch) << all;
        if (worker) {
          EXPECT_NE(rep.staged_worker_stages.find("deciding"), std::string::npos) << rep.staged_worker_stages;
          EXPECT_NE(all.find("handed to the worker"), std::string::npos) << all;
          EXPECT_EQ(all.find("predictions "), std::string::npos) << "the predictions ran in parts on the products' thread: " << all;
          EXPECT_EQ(all.find("decision ("), std::string::npos) << "the decision ran on the products' thread: " << all;
          EXPECT_EQ(all.find("choice ("), std::string::npos) << "the choice ran on the products' thread: " << all;
          EXPECT_GT(rep.staged_worker_ms, 0.0);
          // A plan never analysed is copied on the worker too.
          EXPECT_NE(rep.staged_worker_stages.find("copy"), std::string::npos) << rep.staged_worker_stages;
          if (!rep.partitioned && (m.format() == format_id::csr_vector || m.format() == format_id::csr_scalar)) {
            EXPECT_NE(rep.staged_worker_stages.find("convert"), std::string::npos) << "a format on the CSR copy: " << rep.staged_worker_stages;
          }
        } else {
          EXPECT_TRUE(rep.staged_worker_stages.empty()) << rep.staged_worker_stages;
          EXPECT_EQ(all.find("handed to the worker"), std::string::npos) << all;
          // The copy and the decision in two parts each (report, then state; choice, then the rest).
          EXPECT_NE(all.find("copy>copy state"), std::string::npos) << all;
          EXPECT_NE(all.find("choice ("), std::string::npos) << all;
          EXPECT_NE(all.find("decision ("), std::string::npos) << all;
        }
        if (prefetch && worker && rep.proposed.strips == 0 && m.format() != format_id::sell_delta16 && m.format() != format_id::sell_sigma &&
            m.format() != format_id::sell_c_sigma) {
          // The hand-over, then at most the install's poll and a conversion in one part.
          EXPECT_LE(rep.staged_polls(), 3) << all;
        }
        aijp::test::check_products_and_refresh(m, a, "after the staged analysis", 19);
      }
    }
  }
}

// A step whose stages run on the worker: finishing it waits for the worker, and destroying the matrix while
// the worker runs joins it before the plan goes (job_ is destroyed first). Run under compute-sanitizer too.
TEST_F(GpuStaged, HostWorkerStepFinishedOrDestroyedMidStep)
{
  const auto a = aijp::gen::from_spec("powerlaw:rows=50000,deg=8,exp=2.1");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 23);
  device_vec<double> dx(x);
  aijp::plan_options opts;
  opts.host_worker = true;
  opts.stage_duty = 0;
  aijp::gpu_matrix<double> sync(*ctx, a.view(), opts, nullptr);
  {
    aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
    m.prefetch_analysis(nullptr);
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));  // passes not back yet
    EXPECT_FALSE(m.report().staged_prefetched);
    EXPECT_FALSE(m.poll_background(nullptr));  // the copy, handed to the worker
    bool changed = false;
    EXPECT_TRUE(m.finish_background(nullptr, &changed));
    EXPECT_TRUE(changed);
    EXPECT_EQ(m.format(), sync.format());
    aijp::test::check_products_and_refresh(m, a, "after finishing a worker's step", 29);
  }
  destroy_mid_step(ctx, a, x, dx, opts);  // with the worker possibly running
}

// Host time the caller charges to a staged step (the plugin's checks in the product that started it) holds
// its parts back as their own does (plan_options::stage_duty): 10 ms charged at a duty of 1 % wait for
// about a second of products, so none of 40 quick products runs a part; the step still finishes and
// installs when waited for.
TEST_F(GpuStaged, ChargedStartHoldsThePartsBack)
{
  const auto a = aijp::gen::from_spec("lap7:32x32x32");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 11);
  device_vec<double> dx(x);
  aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
  aijp::plan_options opts;
  opts.stage_duty = 0.01;
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
  m.charge_background(10000);
  for (int k = 0; k < 40; ++k) {
    check_product(m, a, x, dx, "product " + std::to_string(k) + " of a charged step");
    EXPECT_FALSE(m.poll_background(nullptr)) << "product " << k;
  }
  EXPECT_TRUE(m.background_running());
  EXPECT_EQ(m.staged_last_part(), "") << "a part ran although the charge was not paid";
  bool changed = false;
  EXPECT_TRUE(m.finish_background(nullptr, &changed));
  EXPECT_TRUE(changed);
  EXPECT_TRUE(m.report().analyzed);
  EXPECT_EQ(m.report().staged_skipped, 40) << m.report().to_string();
  check_product(m, a, x, dx, "after the charged step");
}

// gpu_matrix::background_poll_due (the plugin polls only where it says a part is due): false at every product
// of a charged step, counted as the pacing's skipped products once each, with no part run; a step polled only
// where it says so runs its parts, skips products under the duty, and installs the synchronous choice.
TEST_F(GpuStaged, PollsGatedByBackgroundPollDueKeepThePacing)
{
  const auto a = aijp::gen::from_spec("lap7:32x32x32");
  const auto ctx = make_context();
  const auto x = aijp::test::random_vector(a.cols, 13);
  device_vec<double> dx(x);
  aijp::plan_options opts;
  opts.stage_duty = 0.01;
  aijp::gpu_matrix<double> sync(*ctx, a.view(), opts, nullptr);
  {
    aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
    EXPECT_FALSE(m.background_poll_due()) << "no step";
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    m.charge_background(10000);
    for (int k = 0; k < 40; ++k) {
      check_product(m, a, x, dx, "product " + std::to_string(k) + " of a charged step");
      EXPECT_FALSE(m.background_poll_due()) << "product " << k;
    }
    EXPECT_EQ(m.staged_last_part(), "") << "a part ran although the charge was not paid";
    EXPECT_TRUE(m.finish_background(nullptr));
    EXPECT_EQ(m.report().staged_skipped, 40) << "each product counted once: " << m.report().to_string();
  }
  aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
  int products = 0, due = 0;
  bool installed = false, changed = false;
  while (!installed) {
    ASSERT_LT(products, 200000) << "the gated step never finished: " << m.report().to_string();
    check_product(m, a, x, dx, "while the gated step runs");
    ++products;
    if (!m.background_poll_due()) continue;
    ++due;
    installed = m.poll_background(nullptr, &changed);
  }
  std::cout << products << " products, " << due << " of them polled, for a step of " << m.report().staged_polls() << " parts; "
            << m.report().to_string();
  EXPECT_TRUE(changed);
  EXPECT_FALSE(m.background_running());
  EXPECT_FALSE(m.background_poll_due()) << "installed: no step";
  EXPECT_LT(due, products) << "the duty held no product back";
  EXPECT_GE(m.report().staged_skipped, products - due) << "every product not polled is a skipped one";
  EXPECT_EQ(m.format(), sync.format()) << "gated: " << m.report().decision << "\nsynchronous: " << sync.report().decision;
  EXPECT_EQ(m.report().plan, sync.report().plan);
  check_product(m, a, x, dx, "after the gated step");
}

// plan_options::first_part_unpaced (the plugin's -mat_aijpredict_first_solve_analysis): an analysis that starts
// from prefetched passes with the host worker hands over at the first poll even under a duty that a charged
// start would hold it back by (the start's host time is not charged) and installs the synchronous choice. A
// format on the CSR copy is converted on the worker: the hand-over is then the only part on the products'
// thread; a conversion that launches kernels (lap7's sell_delta16) stays paced (convert_at_once_us is 0).
TEST_F(GpuStaged, UnpacedFirstPartHandsOverAtTheFirstPoll)
{
  const auto ctx = make_context();
  for (const char* spec : {"lap7:16x16x16", "powerlaw:rows=20000,deg=8,exp=2.1"}) {
    SCOPED_TRACE(spec);
    const auto a = aijp::gen::from_spec(spec);
    const auto x = aijp::test::random_vector(a.cols, 31);
    device_vec<double> dx(x);
    aijp::plan_options opts;
    opts.online = false;
    aijp::gpu_matrix<double> sync(*ctx, a.view(), opts, nullptr);
    aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
    EXPECT_FALSE(m.prefetch_ready());
    m.prefetch_analysis(nullptr);
    EXPECT_FALSE(m.prefetch_ready());
    int before = 0;
    while (!m.advance_prefetch(nullptr)) {
      check_product(m, a, x, dx, "while the prefetched passes run");
      ASSERT_LT(++before, 100000) << "the prefetched passes never came back";
    }
    EXPECT_TRUE(m.prefetch_ready());
    opts.host_worker = true;
    opts.stage_duty = 0.01;
    opts.first_part_unpaced = true;
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    check_product(m, a, x, dx, "the product that started the step");
    EXPECT_FALSE(m.poll_background(nullptr));
    EXPECT_NE(m.staged_last_part().find("handed to the worker"), std::string::npos)
        << "the first poll did not hand over: '" << m.staged_last_part() << "'";
    bool changed = false;
    const int products = poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
    const auto& rep = m.report();
    EXPECT_TRUE(changed);
    EXPECT_TRUE(rep.analyzed);
    EXPECT_TRUE(rep.staged_prefetched);
    EXPECT_EQ(m.format(), sync.format()) << "staged: " << rep.decision << "\nsynchronous: " << sync.report().decision;
    if (!rep.partitioned && rep.proposed.strips == 0 &&
        (m.format() == format_id::csr_vector || m.format() == format_id::csr_scalar || m.format() == format_id::cusparse_csr)) {
      EXPECT_EQ(rep.staged_polls(), 1) << "one part on the products' thread, the hand-over, for a format on the CSR copy";
      EXPECT_EQ(rep.staged_skipped, 0) << "a poll waited for the pacing: " << rep.to_string();
    }
    std::cout << spec << ": " << before << " products for the prefetch, " << products << " more to the install of " << aijp::format_name(m.format()) << "\n";
    aijp::test::check_products_and_refresh(m, a, "after the unpaced analysis", 37);
  }
}

// plan_options::convert_at_once_us: one expected product defers the choice (the conversion does not pay), unless
// its estimate is within convert_at_once_us: then the staged step converts at once, unpaced and in whole parts
// (no product skips for the pacing, whatever the duty), to the synchronous choice.
TEST_F(GpuStaged, ConversionAtOnceBelowItsThresholdIsUnpaced)
{
  const auto ctx = make_context();
  const auto a = aijp::gen::from_spec("lap7:32x32x32");
  const auto x = aijp::test::random_vector(a.cols, 41);
  device_vec<double> dx(x);
  aijp::plan_options opts;
  opts.online = false;
  aijp::gpu_matrix<double> sync(*ctx, a.view(), opts, nullptr);
  ASSERT_NE(sync.format(), format_id::cusparse_csr) << "the test needs a matrix converted away from cuSPARSE CSR: " << sync.report().decision;
  opts.expected_mults = 1;  // one product cannot pay for a conversion
  opts.host_worker = true;
  opts.stage_duty = 0.01;
  opts.first_part_unpaced = true;
  for (const bool at_once : {false, true}) {
    SCOPED_TRACE(at_once ? "converted at once" : "amortized");
    opts.convert_at_once_us = at_once ? 1e6 : 0;
    aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
    prefetch_and_wait(m, a, x, dx);
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    bool changed = false;
    poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
    const auto& rep = m.report();
    EXPECT_TRUE(rep.analyzed);
    if (at_once) {
      EXPECT_FALSE(rep.deferred.has_value()) << rep.decision;
      EXPECT_EQ(m.format(), sync.format()) << rep.decision;
      EXPECT_NE(rep.decision.find("converted at once"), std::string::npos) << rep.decision;
      EXPECT_EQ(rep.staged_skipped, 0) << "a part waited for the pacing: " << rep.to_string();
    } else {
      ASSERT_TRUE(rep.deferred.has_value()) << rep.decision;
      EXPECT_EQ(*rep.deferred, sync.format());
      EXPECT_EQ(m.format(), format_id::cusparse_csr);
    }
    aijp::test::check_products_and_refresh(m, a, at_once ? "after converting at once" : "deferred", 43);
  }
}

// plan_options::worker_converts: a conversion made at once (plan_options::convert_at_once_us) to a builder's
// layout runs on the step worker and its stream. The products' thread runs one part (the hand-over); the
// worker decides, converts and waits for the read-backs; every product before and after the install is right.
// Without the option the same conversion runs in parts on the products' thread.
TEST_F(GpuStaged, WorkerConvertsAtOnceOnItsStream)
{
  const auto ctx = make_context();
  const auto a = aijp::gen::from_spec("lap7:32x32x32");
  const auto x = aijp::test::random_vector(a.cols, 47);
  device_vec<double> dx(x);
  aijp::plan_options opts;
  opts.online = false;
  opts.host_worker = true;
  opts.stage_duty = 0.01;
  opts.first_part_unpaced = true;
  opts.convert_at_once_us = 1e6;
  for (const format_id f : {format_id::sell_delta16, format_id::sell_sigma, format_id::sell_c_sigma}) {
    opts.forced = f;  // the builders' formats, whatever the coefficients would choose
    for (const bool on_worker : {true, false}) {
      SCOPED_TRACE(std::string(aijp::format_name(f)) + (on_worker ? " converted on the worker" : " converted on the products' thread"));
      opts.worker_converts = on_worker;
      aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
      prefetch_and_wait(m, a, x, dx);
      ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
      bool changed = false;
      poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
      EXPECT_TRUE(changed);
      const auto& rep = m.report();
      EXPECT_EQ(m.format(), f) << rep.decision;
      const bool worker_converted = rep.staged_worker_stages.find("converting") != std::string::npos;
      EXPECT_EQ(worker_converted, on_worker) << "stages on the worker: " << rep.staged_worker_stages;
      if (on_worker) EXPECT_EQ(rep.staged_polls(), 1) << "parts on the products' thread beyond the hand-over: " << rep.to_string();
      else EXPECT_GT(rep.staged_polls(), 1) << rep.to_string();
      aijp::test::check_products_and_refresh(m, a, on_worker ? "converted on the worker" : "converted in parts", 49);
    }
  }
}

// The upload pool (plan_options::upload_pool): a matrix uploaded after another was destroyed takes its block
// (no cudaMalloc) and the reserve's free-memory figure from the reading of the upload before; the old contents
// never leak into the new matrix's products. At most 256 MiB stay unused in the pool; an allocation of ours
// that runs out of device memory gives them back to the driver and succeeds; trim_upload_pool empties it.
TEST_F(GpuStaged, UploadReusesADestroyedMatrixsBlock)
{
  const auto ctx = make_context();
  const auto a = aijp::gen::from_spec("lap7:16x16x16");
  auto b = a;  // same pattern and sizes, other values: stale contents of `a` would show in its products
  for (std::size_t k = 0; k < b.values.size(); ++k) b.values[k] = 0.5 * b.values[k] + 1e-3 * static_cast<double>(k % 7);
  const auto x = aijp::test::random_vector(a.cols, 71);
  device_vec<double> dx(x);
  { aijp::gpu_matrix<double> first(*ctx, a.view(), not_analysed(), nullptr); check_product(first, a, x, dx, "first upload"); }
  {
    aijp::gpu_matrix<double> again(*ctx, b.view(), not_analysed(), nullptr);
    EXPECT_TRUE(again.report().upload_reused) << "the destroyed matrix's block";
    EXPECT_TRUE(again.report().upload_recent_reading) << "the last upload's free-memory reading (< 1 s old)";
    EXPECT_GT(again.report().reserve_bytes, 0.0);
    check_product(again, b, x, dx, "upload into the reused block");
    aijp::plan_options opts;
    opts.forced = format_id::sell_delta16;  // a layout in the reused block's reserve
    again.analyze(*ctx, opts, nullptr);
    ASSERT_EQ(again.format(), format_id::sell_delta16) << again.report().decision;
    EXPECT_GT(again.report().reserve_used_bytes, 0.0);
    aijp::test::check_products_and_refresh(again, b, "sell_delta16 in the reused block's reserve", 73);
  }
  auto off = not_analysed();
  off.upload_pool = false;
  {
    aijp::gpu_matrix<double> own(*ctx, a.view(), off, nullptr);
    EXPECT_FALSE(own.report().upload_reused);
    EXPECT_FALSE(own.report().upload_recent_reading);
    check_product(own, a, x, dx, "upload without the pool");
  }

  // Ten copies of ~29 MiB (with their reserves) destroyed together: at most 256 MiB stay unused.
  const auto mid = aijp::gen::from_spec("lap7:48x48x48");
  {
    std::vector<std::unique_ptr<aijp::gpu_matrix<double>>> many;
    for (int k = 0; k < 10; ++k) many.push_back(std::make_unique<aijp::gpu_matrix<double>>(*ctx, mid.view(), not_analysed(), nullptr));
  }
  const std::size_t idle = aijp::upload_pool_idle_bytes();
  EXPECT_LE(idle, std::size_t{256} << 20);
  EXPECT_GE(idle, std::size_t{128} << 20) << "most of the ten blocks kept for later uploads";

  // Out of memory: a 74 MB copy without the pool (its own cudaMalloc) fits only once the unused blocks go back.
  const auto big = aijp::gen::from_spec("lap7:96x96x96");
  void* hog = nullptr;
  ASSERT_NO_FATAL_FAILURE(take_device_memory_but(std::size_t{48} << 20, &hog));
  {
    std::unique_ptr<aijp::gpu_matrix<double>> m;
    EXPECT_NO_THROW(m = std::make_unique<aijp::gpu_matrix<double>>(*ctx, big.view(), off, nullptr))
        << "the unused blocks given back to the driver";
    EXPECT_EQ(aijp::upload_pool_idle_bytes(), 0u);
    ASSERT_EQ(cudaFree(hog), cudaSuccess);
    if (m) {
      const auto xb = aijp::test::random_vector(big.cols, 79);
      device_vec<double> dxb(xb);
      check_product(*m, big, xb, dxb, "after the pool was trimmed");
    }
  }
  { aijp::gpu_matrix<double> refill(*ctx, a.view(), not_analysed(), nullptr); }
  EXPECT_GT(aijp::upload_pool_idle_bytes(), 0u);
  EXPECT_GT(aijp::trim_upload_pool(), 0u);
  EXPECT_EQ(aijp::upload_pool_idle_bytes(), 0u);
}

// A builder that fails on the worker hands the fallback back: cuSPARSE CSR is built on the products' thread and
// stream, the decision says why, and the products stay right. The failure is real: after the upload (without a
// layout reserve) the test takes all but 48 MiB of the device's free memory, so the ~75 MiB sell_delta16 layout
// of a 7M-nonzero matrix cannot be allocated, while the decision still sees the free memory of the upload.
// Then: destroying a matrix while the worker converts waits for it.
TEST_F(GpuStaged, WorkerConversionThatFailsFallsBackOnTheProductsThread)
{
  const auto ctx = make_context();
  {
    const auto a = aijp::gen::from_spec("lap7:100x100x100");
    const auto x = aijp::test::random_vector(a.cols, 53);
    device_vec<double> dx(x);
    auto upload = not_analysed();
    upload.layout_reserve = 0;
    aijp::gpu_matrix<double> m(*ctx, a.view(), upload, nullptr);
    prefetch_and_wait(m, a, x, dx);
    aijp::plan_options opts;
    opts.online = false;
    opts.forced = format_id::sell_delta16;
    opts.host_worker = true;
    opts.first_part_unpaced = true;
    opts.convert_at_once_us = 1e6;
    opts.worker_converts = true;
    (void)aijp::trim_upload_pool();  // destroyed matrices' blocks would let the layout's allocation succeed
    void* hog = nullptr;
    ASSERT_NO_FATAL_FAILURE(take_device_memory_but(std::size_t{48} << 20, &hog));
    ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
    bool changed = false;
    poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
    ASSERT_EQ(cudaFree(hog), cudaSuccess);
    const auto& rep = m.report();
    EXPECT_EQ(m.format(), format_id::cusparse_csr) << rep.decision;
    EXPECT_NE(rep.decision.find("out of device memory while converting"), std::string::npos) << rep.decision;
    EXPECT_NE(rep.staged_worker_stages.find("converting"), std::string::npos) << "stages on the worker: " << rep.staged_worker_stages;
    aijp::test::check_products_and_refresh(m, a, "after the fallback", 59);
  }
  const auto b = aijp::gen::from_spec("lap7:32x32x32");
  const auto xb = aijp::test::random_vector(b.cols, 61);
  device_vec<double> dxb(xb);
  aijp::plan_options opts;
  opts.forced = format_id::sell_delta16;
  opts.host_worker = true;
  opts.first_part_unpaced = true;
  opts.convert_at_once_us = 1e6;
  opts.worker_converts = true;
  destroy_mid_step(ctx, b, xb, dxb, opts);  // with the worker possibly converting
}

// prefetch_analysis on the side stream (the PETSc plugin's -mat_aijpredict_prefetch_stream): the passes read
// back what they read on the products' stream, and the analysis started from them makes the same choice.
// The products queued meanwhile stay right.
TEST_F(GpuStaged, PrefetchOnTheSideStreamReadsWhatTheProductsStreamReads)
{
  const auto ctx = make_context();
  for (const char* spec : {"powerlaw:rows=20000,deg=8,exp=2.1", "lap7:24x24x24"}) {
    SCOPED_TRACE(spec);
    const auto a = aijp::gen::from_spec(spec);
    const auto x = aijp::test::random_vector(a.cols, 67);
    device_vec<double> dx(x);
    aijp::plan_options opts;
    opts.online = false;
    opts.host_worker = true;
    opts.first_part_unpaced = true;
    aijp::row_stats got[2];
    format_id chose[2] = {format_id::cusparse_csr, format_id::cusparse_csr};
    for (const bool side : {false, true}) {
      aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
      prefetch_and_wait(m, a, x, dx, side);
      ASSERT_TRUE(m.prefetch_ready());
      ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
      bool changed = false;
      poll_until_installed(m, a, x, dx, format_id::cusparse_csr, &changed);
      EXPECT_TRUE(m.report().staged_prefetched);  // reported at the install
      got[side] = m.report().stats;
      chose[side] = m.format();
      aijp::test::check_products_and_refresh(m, a, side ? "analysed from the side stream's passes" : "analysed from the passes", 71);
    }
    EXPECT_EQ(chose[0], chose[1]);
    EXPECT_EQ(got[0].nnz, got[1].nnz);
    EXPECT_EQ(got[0].max_len, got[1].max_len);
    EXPECT_EQ(got[0].mode_len, got[1].mode_len);
    EXPECT_EQ(got[0].n_iter_natural, got[1].n_iter_natural);
    EXPECT_EQ(got[0].hyb_ell_width, got[1].hyb_ell_width);
    EXPECT_DOUBLE_EQ(got[0].stddev, got[1].stddev);
  }
}

TEST_F(GpuStaged, EmptyMatrix)
{
  aijp::csr_matrix<double> a;
  a.rows = 0;
  a.cols = 5;
  a.row_ptr = {0};
  const auto ctx = make_context();
  aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
  aijp::plan_options opts;
  opts.forced = format_id::sell_delta16;
  ASSERT_TRUE(m.start_background(ctx, background_step::analyze, opts, nullptr, background_mode::staged));
  bool changed = false;
  EXPECT_TRUE(m.finish_background(nullptr, &changed));
  EXPECT_TRUE(m.report().analyzed);
}

// gpu_matrix::host_bound_start: before any analysis, once the prefetched passes are back, csr_vector runs on the
// CSR copy where the model predicts it no slower than cuSPARSE CSR (the context's own constants decide, so the
// test follows its answer); never before the passes are back, with csr_vector not a candidate, with cuSPARSE CSR
// predicted above host_bound_start_us, or twice. The analyses that follow decide as usual: synchronous, staged,
// and one that keeps cuSPARSE CSR (forced), which takes back the layout set aside. Every product checked
// against the host reference, the transpose and a values refresh too.
TEST_F(GpuStaged, HostBoundStartRunsCsrVectorUntilTheAnalysis)
{
  const auto ctx = make_context();
  for (const char* spec : {"lap7:16x16x16", "powerlaw:rows=20000,deg=8,exp=2.1"}) {
    SCOPED_TRACE(spec);
    const auto a = aijp::gen::from_spec(spec);
    const auto x = aijp::test::random_vector(a.cols, 23);
    device_vec<double> dx(x);
    aijp::plan_options opts;
    opts.online = false;
    aijp::plan_options without = opts;
    without.candidates = {format_id::cusparse_csr, format_id::csr_scalar};
    // Prepares a matrix running what host_bound_start decides; false where it keeps cuSPARSE CSR.
    const auto started = [&](aijp::gpu_matrix<double>& m) {
      EXPECT_FALSE(m.host_bound_start(*ctx, opts, nullptr)) << "before the prefetched passes are back";
      prefetch_and_wait(m, a, x, dx);
      EXPECT_FALSE(m.host_bound_start(*ctx, without, nullptr)) << "csr_vector is not a candidate";
      aijp::plan_options never = opts;
      never.host_bound_start_us = 0;
      EXPECT_FALSE(m.host_bound_start(*ctx, never, nullptr)) << "cuSPARSE CSR predicted above host_bound_start_us";
      EXPECT_EQ(m.format(), format_id::cusparse_csr);
      const bool on = m.host_bound_start(*ctx, opts, nullptr);
      std::cout << spec << ": " << m.report().decision << "\n";
      EXPECT_FALSE(m.report().analyzed);
      EXPECT_EQ(m.format(), on ? format_id::csr_vector : format_id::cusparse_csr);
      EXPECT_EQ(m.report().chosen, m.format());
      EXPECT_EQ(on, m.report().decision.find("host-bound start") != std::string::npos) << m.report().decision;
      EXPECT_FALSE(m.host_bound_start(*ctx, opts, nullptr)) << "once";
      for (int k = 0; k < 3; ++k) check_product(m, a, x, dx, "before the analysis");
      return on;
    };
    {
      aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
      started(m);
      aijp::test::check_products_and_refresh(m, a, "host-bound start", 29);
    }
    {  // a synchronous analysis keeping cuSPARSE CSR takes the layout set aside
      aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
      started(m);
      aijp::plan_options forced = opts;
      forced.forced = format_id::cusparse_csr;
      m.analyze(*ctx, forced, nullptr);
      EXPECT_EQ(m.format(), format_id::cusparse_csr) << m.report().decision;
      aijp::test::check_products_and_refresh(m, a, "analysed synchronously to cuSPARSE CSR", 31);
    }
    for (const bool keep : {false, true}) {  // staged: the usual choice, or cuSPARSE CSR kept (the layout set aside moves over)
      SCOPED_TRACE(keep ? "staged, cuSPARSE CSR forced" : "staged");
      aijp::gpu_matrix<double> m(*ctx, a.view(), not_analysed(), nullptr);
      const bool on = started(m);
      aijp::plan_options step = opts;
      if (keep) step.forced = format_id::cusparse_csr;
      ASSERT_TRUE(m.start_background(ctx, background_step::analyze, step, nullptr, background_mode::staged));
      bool changed = false;
      poll_until_installed(m, a, x, dx, on ? format_id::csr_vector : format_id::cusparse_csr, &changed);
      EXPECT_TRUE(m.report().analyzed);
      if (keep) {
        EXPECT_EQ(m.format(), format_id::cusparse_csr) << m.report().decision;
      }
      aijp::test::check_products_and_refresh(m, a, keep ? "staged to cuSPARSE CSR" : "staged", 37);
    }
  }
}

}  // namespace
