// Host unit tests of online refinement: convergence, robustness to outliers, class separation, blending,
// serialisation round trip and merging.
#include <aijpredict/online.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace {

using aijp::format_id;
using aijp::online::corrections;
using aijp::online::size_class;

TEST(Online, Classify)
{
  EXPECT_EQ(aijp::online::classify(1e6, 50e6), size_class::in_l2);
  EXPECT_EQ(aijp::online::classify(50e6, 50e6), size_class::in_l2);
  EXPECT_EQ(aijp::online::classify(51e6, 50e6), size_class::beyond_l2);
  EXPECT_EQ(aijp::online::classify(1e12, 0), size_class::in_l2);
}

TEST(Online, NothingLearnedIsIdentity)
{
  const corrections c;
  EXPECT_DOUBLE_EQ(c.factor(format_id::ell, size_class::in_l2), 1.0);
  EXPECT_DOUBLE_EQ(c.corrected(format_id::coo, size_class::beyond_l2, 7.5), 7.5);
  EXPECT_EQ(c.observations(), 0);
}

TEST(Online, FirstObservationCorrectsAnyFactor)
{
  corrections c;
  // A cache whose constants make every prediction 3x too optimistic.
  ASSERT_TRUE(c.observe(format_id::sell_c_sigma, size_class::in_l2, 2.0, 6.0));
  EXPECT_NEAR(c.corrected(format_id::sell_c_sigma, size_class::in_l2, 2.0), 6.0, 1e-9);
  // An unmeasured format of the same class takes the class-wide correction.
  EXPECT_NEAR(c.factor(format_id::coo, size_class::in_l2), 3.0, 1e-9);
  // The other class is untouched.
  EXPECT_DOUBLE_EQ(c.factor(format_id::sell_c_sigma, size_class::beyond_l2), 1.0);
}

TEST(Online, ConvergesOnNoisyRatioWithinTenPercent)
{
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 0.05);
  corrections c;
  const double truth = 0.4;  // predictions 2.5x too slow
  int first_good = -1;
  for (int i = 0; i < 40; ++i) {
    const double predicted = 10.0;
    const double measured = predicted * truth * std::exp(noise(rng));
    const double before = c.corrected(format_id::csr_vector, size_class::beyond_l2, predicted);
    if (first_good < 0 && std::abs(before - predicted * truth) / (predicted * truth) < 0.10) first_good = i;
    c.observe(format_id::csr_vector, size_class::beyond_l2, predicted, measured);
  }
  EXPECT_EQ(first_good, 1);  // good after one observation
  EXPECT_NEAR(c.factor(format_id::csr_vector, size_class::beyond_l2), truth, truth * 0.04);
}

TEST(Online, OutlierMovesAtMostAFactorTwoThenIsDiluted)
{
  corrections c;
  for (int i = 0; i < 10; ++i) c.observe(format_id::hyb, size_class::in_l2, 10.0, 5.0);
  const double before = c.factor(format_id::hyb, size_class::in_l2);
  EXPECT_NEAR(before, 0.5, 1e-9);
  c.observe(format_id::hyb, size_class::in_l2, 10.0, 500.0);  // a preempted kernel: 100x
  const double after = c.factor(format_id::hyb, size_class::in_l2);
  EXPECT_LT(after / before, std::pow(2.0, 1.0 / 10) + 1e-9);  // clipped to log 2, divided by the weight 11
  for (int i = 0; i < 20; ++i) c.observe(format_id::hyb, size_class::in_l2, 10.0, 5.0);
  EXPECT_NEAR(c.factor(format_id::hyb, size_class::in_l2), 0.5, 0.5 * 0.03);
}

TEST(Online, TracksARealShift)
{
  corrections c;
  for (int i = 0; i < 30; ++i) c.observe(format_id::ell, size_class::in_l2, 10.0, 10.0);
  for (int i = 0; i < 60; ++i) c.observe(format_id::ell, size_class::in_l2, 10.0, 20.0);
  EXPECT_NEAR(c.factor(format_id::ell, size_class::in_l2), 2.0, 2.0 * 0.05);
}

TEST(Online, RejectsInvalidObservations)
{
  corrections c;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(c.observe(format_id::ell, size_class::in_l2, 0.0, 1.0));
  EXPECT_FALSE(c.observe(format_id::ell, size_class::in_l2, 1.0, -1.0));
  EXPECT_FALSE(c.observe(format_id::ell, size_class::in_l2, nan, 1.0));
  EXPECT_FALSE(c.observe(format_id::ell, size_class::in_l2, 1.0, std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(c.observe(format_id::ell, size_class::in_l2, 1.0, 5000.0));  // 5000x: a broken measurement
  EXPECT_EQ(c.observations(), 0);
}

TEST(Online, OwnCorrectionBlendsWithClassWide)
{
  corrections c;
  for (int i = 0; i < 5; ++i) c.observe(format_id::coo, size_class::in_l2, 10.0, 20.0);  // coo 2x slow
  c.observe(format_id::ell, size_class::in_l2, 10.0, 5.0);                               // ell once, 0.5x
  const double all = c.of_class(size_class::in_l2).log_ratio;
  const double own = std::log(0.5);
  const double expected = std::exp(all + 1.0 / 1.5 * (own - all));
  EXPECT_NEAR(c.factor(format_id::ell, size_class::in_l2), expected, 1e-12);
  // With many of its own observations a format's correction dominates.
  for (int i = 0; i < 20; ++i) c.observe(format_id::ell, size_class::in_l2, 10.0, 5.0);
  EXPECT_NEAR(c.factor(format_id::ell, size_class::in_l2), 0.5, 0.5 * 0.05);
}

TEST(Online, TableRoundTrip)
{
  corrections c;
  c.observe(format_id::sell_sigma, size_class::in_l2, 3.0, 4.0);
  c.observe(format_id::sell_sigma, size_class::beyond_l2, 300.0, 280.0);
  for (int i = 0; i < 30; ++i) c.observe(format_id::cusparse_csr, size_class::in_l2, 9.0, 11.0 + (i % 3));
  const auto table = c.to_table();
  EXPECT_TRUE(table.count("sell_sigma"));
  EXPECT_TRUE(table.count("all"));
  EXPECT_FALSE(table.count("ell"));  // cells without observations are left out
  const corrections back = corrections::from_table(table);
  EXPECT_EQ(back.to_table(), table);
  for (int f = 0; f < aijp::format_count; ++f) {
    for (auto k : {size_class::in_l2, size_class::beyond_l2}) {
      EXPECT_DOUBLE_EQ(back.factor(static_cast<format_id>(f), k), c.factor(static_cast<format_id>(f), k));
    }
  }
}

TEST(Online, FromTableSkipsBadCells)
{
  std::map<std::string, std::map<std::string, double>> t;
  t["ell"] = {{"log_ratio_in_l2", std::nan("")}, {"weight_in_l2", 1}, {"count_in_l2", 1}};
  t["coo"] = {{"log_ratio_in_l2", 0.5}, {"weight_in_l2", -1}, {"count_in_l2", 1}};
  t["hyb"] = {{"log_ratio_in_l2", 0.5}};  // incomplete
  t["no_such_format"] = {{"log_ratio_in_l2", 0.5}, {"weight_in_l2", 1}, {"count_in_l2", 1}};
  t["jad"] = {{"log_ratio_beyond_l2", 0.25}, {"weight_beyond_l2", 100}, {"count_beyond_l2", 100}};
  const corrections c = corrections::from_table(t);
  EXPECT_DOUBLE_EQ(c.factor(format_id::ell, size_class::in_l2), 1.0);
  EXPECT_DOUBLE_EQ(c.factor(format_id::coo, size_class::in_l2), 1.0);
  EXPECT_DOUBLE_EQ(c.factor(format_id::hyb, size_class::in_l2), 1.0);
  EXPECT_EQ(c.of(format_id::jad, size_class::beyond_l2).weight, 20);  // capped at max_weight
  EXPECT_EQ(c.of(format_id::jad, size_class::beyond_l2).count, 100);
}

TEST(Online, MergeKeepsTheCellWithMoreObservations)
{
  corrections mine, theirs;
  mine.observe(format_id::ell, size_class::in_l2, 10, 20);
  for (int i = 0; i < 3; ++i) theirs.observe(format_id::ell, size_class::in_l2, 10, 5);
  theirs.observe(format_id::coo, size_class::beyond_l2, 10, 30);
  for (int i = 0; i < 4; ++i) mine.observe(format_id::sell_c_sigma, size_class::in_l2, 10, 12);
  mine.merge(theirs);
  EXPECT_NEAR(mine.of(format_id::ell, size_class::in_l2).log_ratio, std::log(0.5), 1e-12);     // theirs: 3 > 1
  EXPECT_NEAR(mine.of(format_id::coo, size_class::beyond_l2).log_ratio, std::log(3.0), 1e-12);  // only theirs
  EXPECT_NEAR(mine.of(format_id::sell_c_sigma, size_class::in_l2).log_ratio, std::log(1.2), 1e-12);  // only mine
  EXPECT_EQ(mine.of_class(size_class::in_l2).count, 5);  // mine (1 + 4) beats theirs (3)
}

TEST(Online, Median)
{
  EXPECT_EQ(aijp::online::median({}), 0);
  EXPECT_EQ(aijp::online::median({3, 1, 2}), 2);
  EXPECT_EQ(aijp::online::median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(aijp::online::median({5, 5, 100, 5, 6}), 5);
}

}  // namespace

namespace {

TEST(Online, PerMatrixCorrectionOverridesTheFormatsMix)
{
  using aijp::format_id;
  using aijp::online::corrections;
  using aijp::online::size_class;
  aijp::row_stats a, b;
  a.rows = b.rows = 1000;
  a.nnz = 5000;
  b.nnz = 7000;
  const auto ka = aijp::online::key_of(a, 8, 0.25);
  const auto kb = aijp::online::key_of(b, 8, 0.25);
  EXPECT_NE(ka, kb);
  EXPECT_EQ(ka, aijp::online::key_of(a, 8, 0.25));  // the same pattern reassembled
  EXPECT_NE(ka, aijp::online::key_of(a, 4, 0.25));  // float values are another matrix
  corrections c;
  // ell is 2x slower than predicted on matrix a, 1.25x on matrix b: the format's mix sits in between.
  for (int i = 0; i < 3; ++i) {
    c.observe(format_id::ell, size_class::in_l2, 10.0, 20.0, ka);
    c.observe(format_id::ell, size_class::in_l2, 10.0, 12.5, kb);
  }
  const double mix = c.factor(format_id::ell, size_class::in_l2);
  EXPECT_GT(mix, 1.3);
  EXPECT_LT(mix, 1.9);
  EXPECT_NEAR(c.factor(format_id::ell, size_class::in_l2, ka), 2.0, 2.0 * 0.02);
  EXPECT_NEAR(c.factor(format_id::ell, size_class::in_l2, kb), 1.25, 1.25 * 0.02);
  // An unseen matrix gets the mix; the per-matrix cells are not saved.
  EXPECT_DOUBLE_EQ(c.factor(format_id::ell, size_class::in_l2, 12345), mix);
  const corrections back = corrections::from_table(c.to_table());
  EXPECT_DOUBLE_EQ(back.factor(format_id::ell, size_class::in_l2, ka), mix);
  EXPECT_EQ(c.of_matrix(format_id::ell, ka).count, 3);
  EXPECT_EQ(c.of_matrix(format_id::coo, ka).count, 0);
}

}  // namespace

// Bounded exploration's decision (gpu_matrix's explore_or_finish): a split and a format kept over a split
// are always compared; otherwise the running plan must measure above the candidate's prediction by the
// margin, or above its own prediction by the margin with a candidate that is cuSPARSE CSR's other
// algorithm or predicted below what the running format measured.
TEST(OnlineExplore, ReasonsToCompare)
{
  using aijp::format_id;
  using aijp::online::explore_reason;
  aijp::online::explore_case c;
  c.running = format_id::cusparse_csr;
  c.running_predicted_us = 100;
  c.measured_us = 105;
  c.candidate = format_id::coo;
  c.candidate_predicted_us = 100;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);  // within both margins
  c.candidate_predicted_us = 90;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::beats_candidate);  // 105 > 99
  // Missed its own prediction (113 > 110), the candidate predicted below that (108): the case the
  // candidate's margin alone does not catch (113 < 108 * 1.1).
  c.measured_us = 113;
  c.candidate_predicted_us = 108;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::own_miss);
  c.candidate_predicted_us = 115;  // predicted slower than the running format measures: not tried
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);
  c.candidate = format_id::cusparse_csr_alg2;  // the other cuSPARSE algorithm: tried whatever its prediction
  c.candidate_predicted_us = 300;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::own_miss);
  c.running = format_id::cusparse_csr_alg2;
  c.candidate = format_id::cusparse_csr;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::own_miss);
  c.measured_us = 109;  // within its own prediction's margin
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);
  c.running_predicted_us = 0;  // unknown: no own-miss
  c.measured_us = 200;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);
  c.baseline_always = true;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::after_split);
  c.partitioned = true;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::split);
}

// A candidate that needs no conversion is tried within the free band of the running plan's measured time,
// slower predictions included, but only where the products are short (policy::free_max_us).
TEST(OnlineExplore, FreeCandidatesWithinTheBandOfShortProducts)
{
  using aijp::format_id;
  using aijp::online::explore_reason;
  aijp::online::explore_case c;
  c.running = format_id::sell_sigma;
  c.running_predicted_us = 8.0;
  c.measured_us = 8.5;  // within its own prediction's margin
  c.candidate = format_id::csr_vector;
  c.candidate_predicted_us = 9.0;  // predicted 6 % slower than the running format measures
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);  // the band is off by default here
  c.candidate_free = true;
  c.free_band = 0.15;
  c.free_max_us = 20;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::free_band);
  c.candidate_predicted_us = 8.5 * 1.15 + 0.01;  // beyond the band
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);
  c.candidate_predicted_us = 9.0;
  c.candidate_free = false;  // a format that converts: the margin rules only
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);
  c.candidate_free = true;
  c.measured_us = 25;  // long products: the margin rules only
  c.running_predicted_us = 24;
  c.candidate_predicted_us = 26;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);
  c.candidate_predicted_us = 22;  // 25 > 22 * 1.1: the usual reason comes first
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::beats_candidate);
  c.measured_us = 0;  // nothing measured
  c.running_predicted_us = 0;
  EXPECT_EQ(aijp::online::explore_reason_for(c), explore_reason::none);
}
