// aijp::time_spmv on the device: the back-to-back and the gated measurement (timing_options::gated), a
// gate that times out, and products that stay right after either.
#include <aijpredict/measure.hpp>

#include "gpu_test_support.hpp"

#include <aijpredict/cache.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/stats.hpp>

#include <filesystem>
#include <unistd.h>

namespace {

using aijp::test::check_product;
using aijp::test::device_vec;
using aijp::test::gpu_fixture;
using aijp::test::shared_context;

class GpuMeasure : public gpu_fixture {
 protected:
  void SetUp() override
  {
    gpu_fixture::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override
  {
    if (s_) {
      EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
      cudaStreamDestroy(s_);
    }
    gpu_fixture::TearDown();
  }
  static aijp::plan_options forced(aijp::format_id f)
  {
    aijp::plan_options o;
    o.forced = f;
    return o;
  }
  cudaStream_t s_ = nullptr;
};

TEST_F(GpuMeasure, GatedSamplesAreDeviceTimeNoLongerThanBackToBack)
{
  // 1M rows, 5M nonzeros: a product of tens of microseconds, bound by the device on either measurement.
  const auto a = aijp::gen::laplacian_2d_5pt(1000, 1000);
  const std::vector<double> x(a.cols, 1.0);
  device_vec<double> dx(x), dy(std::vector<double>(a.rows, 0.0));
  for (auto f : {aijp::format_id::cusparse_csr, aijp::format_id::sell_c_sigma}) {
    aijp::gpu_matrix<double> m(shared_context(), a.view(), forced(f), s_);
    ASSERT_EQ(m.format(), f);
    aijp::timing_options to;
    to.max_total_ms = 50;
    const auto plain = aijp::time_spmv(m, dx.p, dy.p, s_, to);
    to.gated = true;
    to.gate_max_products = 16;
    const auto gated = aijp::time_spmv(m, dx.p, dy.p, s_, to);
    EXPECT_EQ(gated.gate_timeouts, 0) << aijp::format_name(f);
    EXPECT_GE(gated.samples, 3);
    EXPECT_GE(gated.batch, 1);
    EXPECT_LE(gated.batch, 16);
    EXPECT_GT(gated.median_us, 0.0);
    EXPECT_LE(gated.min_us, gated.median_us);
    // Back to back the device also waits for the host between products where it issues slower than the
    // device runs; gated it never does. 10 % for the machine's noise between the two measurements.
    EXPECT_LE(gated.median_us, 1.10 * plain.median_us) << aijp::format_name(f) << ": gated " << gated.median_us
                                                       << " us, back to back " << plain.median_us << " us";
    check_product(m, a, x, dx, std::string("after gated timing, ") + aijp::format_name(f), s_);
  }
}

TEST_F(GpuMeasure, GateThatTimesOutIsReportedAndTheStreamStaysUsable)
{
  // A timeout shorter than any host issue: every gate opens by its timeout, the batch halves down to one
  // product and the measurement fails with a clear error instead of reporting a host-bound sample as gated.
  const auto a = aijp::gen::laplacian_2d_5pt(64, 64);
  const std::vector<double> x(a.cols, 2.0);
  device_vec<double> dx(x), dy(std::vector<double>(a.rows, 0.0));
  aijp::gpu_matrix<double> m(shared_context(), a.view(), forced(aijp::format_id::csr_vector), s_);
  aijp::timing_options to;
  to.gated = true;
  to.gate_timeout_ms = 1e-6;
  to.max_total_ms = 20;
  try {
    (void)aijp::time_spmv(m, dx.p, dy.p, s_, to);
    FAIL() << "a gate with a 1 ns timeout cannot hold a batch";
  } catch (const aijp::device_error& e) {
    EXPECT_NE(std::string(e.what()).find("gate timed out"), std::string::npos) << e.what();
  }
  check_product(m, a, x, dx, "after the timed-out gate", s_);
  // The same plan measures normally afterwards (online timing resumed, nothing left closed).
  to.gate_timeout_ms = 200;
  const auto r = aijp::time_spmv(m, dx.p, dy.p, s_, to);
  EXPECT_EQ(r.gate_timeouts, 0);
  EXPECT_GT(r.median_us, 0.0);
}

// The gap between back-to-back kernels (measure_launch_gap): an empty kernel timed as the products are, positive
// and no longer than the gated time of a small product; a context whose cache recorded a warm-up's gap moves its
// predictions by each product's kernels times the difference (context::measure_launch_gap), one without it does not.
TEST_F(GpuMeasure, LaunchGapMovesPredictionsByTheCachesDifference)
{
  const auto& dev = shared_context().device();
  aijp::timing_options to;
  to.gated = true;
  const auto gap = aijp::measure_launch_gap(s_, dev, to);
  EXPECT_EQ(gap.gate_timeouts, 0);
  EXPECT_GE(gap.samples, 3);
  EXPECT_GT(gap.median_us, 0.1);
  EXPECT_LT(gap.median_us, 20.0);
  const auto a = aijp::gen::laplacian_2d_5pt(64, 64);  // 4096 rows: a launch-bound product
  const std::vector<double> x(a.cols, 1.0);
  device_vec<double> dx(x), dy(std::vector<double>(a.rows, 0.0));
  aijp::gpu_matrix<double> m(shared_context(), a.view(), forced(aijp::format_id::csr_vector), s_);
  const auto product = aijp::time_spmv(m, dx.p, dy.p, s_, to);
  // An empty kernel of one block per SM is about as short as a launch-bound product; back to back on the host an empty
  // kernel has measured longer than small products (5.2 against 4.5 us, H100, 2026-11-22), hence the slack.
  EXPECT_LE(gap.median_us, 1.5 * product.median_us) << "an empty kernel took far longer than a launch-bound product";
  to.gated = false;
  EXPECT_GT(aijp::measure_launch_gap(s_, dev, to).median_us, 0.1);

  const auto tmp = std::filesystem::temp_directory_path() / ("aijp_launch_gap_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  aijp::context_options o;
  o.cache_dir = tmp.string();
  o.preload = aijp::kernel_preload::none;
  aijp::prediction_input in;
  in.stats = aijp::compute_row_stats(a.view());
  in.device = dev;
  in.value_bytes = 8;
  in.x_sectors_per_nnz = 0.25;
  {
    aijp::context first(o);  // calibrates and writes the cache: no warm-up gap recorded
    ASSERT_EQ(first.model_params().launch_gap_us, 0.0);
    EXPECT_GT(first.measure_launch_gap(s_), 0.1);
    EXPECT_EQ(first.model_params().launch_shift_us, 0.0) << "no gap in the cache: nothing to move by";
  }
  aijp::test::edit_cache(tmp, dev, [&](aijp::cache::cache_entry& e) {
    e.device_metrics["launch_gap_us"] = gap.median_us + 1.0;  // a warm-up whose kernels ran a microsecond apart more
    e.device_metrics["launch_gap_gated"] = 1.0;
  });
  o.measure_launch_gap = true;
  aijp::context second(o);
  EXPECT_NEAR(second.model_params().launch_gap_us, gap.median_us + 1.0, 1e-12);
  EXPECT_GT(second.launch_gap_now(), 0.1);
  EXPECT_NEAR(second.model_params().launch_shift_us, second.launch_gap_now() - (gap.median_us + 1.0), 1e-12);
  EXPECT_NEAR(second.model_params().launch_shift_us, -1.0, 0.5) << "gap now " << second.launch_gap_now() << " us";
  // COO runs two kernels: its prediction moves by twice the shift.
  aijp::bandwidth_model_params unmoved = second.model_params();
  unmoved.launch_shift_us = 0;
  const double before_us = aijp::predict_bandwidth_model(in, unmoved, {aijp::format_id::coo}).front().predicted_us;
  const double after_us = aijp::predict_bandwidth_model(in, second.model_params(), {aijp::format_id::coo}).front().predicted_us;
  EXPECT_NEAR(after_us - before_us, 2 * second.model_params().launch_shift_us, 1e-9);
  std::filesystem::remove_all(tmp);
}

}  // namespace
