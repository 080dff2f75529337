// What every device test shares: one context per process (never touching the user's cache), a device copy of
// a host vector, and a fixture that skips without a device and synchronises in TearDown so that an
// asynchronous error fails the test that caused it.
#pragma once

#include <aijpredict/cache.hpp>
#include <aijpredict/device.hpp>
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/reference.hpp>

#include "test_checks.hpp"
#include "test_matrices.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace aijp::test {

inline const context& shared_context()
{
  static std::unique_ptr<context> ctx = [] {
    context_options o;
    o.use_cache = false;  // tests never touch the user's cache
    return std::make_unique<context>(o);
  }();
  return *ctx;
}

/// A device array holding a copy of a host vector (freed on destruction); get() copies it back.
template <typename T>
struct device_vec {
  T* p = nullptr;
  size_t n = 0;
  explicit device_vec(const std::vector<T>& h) : n(h.size())
  {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
    if (n) {
      EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ~device_vec() { cudaFree(p); }
  device_vec(const device_vec&) = delete;
  device_vec& operator=(const device_vec&) = delete;
  std::vector<T> get() const
  {
    std::vector<T> h(n);
    if (n) {
      EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return h;
  }
};

/// Skipped (not failed) without a CUDA device; an asynchronous error fails the test that caused it.
class gpu_fixture : public ::testing::Test {
 protected:
  void SetUp() override
  {
    std::string why;
    if (!device_available(&why)) GTEST_SKIP() << why;
  }
  void TearDown() override
  {
    if (device_available()) {
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
  }
};

/// A context of its own (never touching the user's cache), shared with background and staged steps.
inline std::shared_ptr<const context> own_context(bool online = false)
{
  context_options o;
  o.use_cache = false;
  o.online = online;
  return std::make_shared<context>(o);
}

/// Edits the cache file that a context made with `dir` as its cache directory wrote for `device`.
inline void edit_cache(const std::filesystem::path& dir, const device_properties& device,
                       const std::function<void(cache::cache_entry&)>& edit)
{
  cache::cache_entry initial;  // unused, the file exists; the store checks that it is for `device` all the same
  initial.device = make_fingerprint(device);
  cache::store(dir).update(initial.device, edit, initial);
}

/// Drops the formats of ours that run on the CSR copy (csr_scalar, csr_vector) from `candidates`: they convert for the
/// price of their install, so where a test needs a choice that waits for its conversion to pay, one of them may pay
/// at once instead (the interim format), depending on the context's calibration.
inline void drop_csr_copy_formats(std::vector<format_id>& candidates)
{
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [](format_id f) { return f == format_id::csr_scalar || f == format_id::csr_vector; }),
                   candidates.end());
}

/// Uploaded and running cuSPARSE CSR, not analysed (as the plugin builds a matrix until it is reused).
inline plan_options not_analysed()
{
  plan_options o;
  o.analyze = false;
  return o;
}

/// y = A x on the plan (NaN planted in y), checked against the host reference of `a`. With a stream of
/// its own, waits for the device first and for that stream after: device_vec copies on the legacy
/// default stream, which a non-blocking stream does not wait for.
template <typename T>
void check_product(gpu_matrix<T>& m, const csr_matrix<T>& a, const std::vector<T>& x, const device_vec<T>& dx,
                   const std::string& what, cudaStream_t stream = nullptr)
{
  device_vec<T> dy(std::vector<T>(a.rows, std::numeric_limits<T>::quiet_NaN()));
  if (stream) {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  m.apply(T(1), dx.p, T(0), dy.p, stream);
  if (stream) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  std::vector<T> want(a.rows);
  reference_spmv(a.view(), T(1), x.data(), T(0), want.data());
  expect_close(dy.get(), want, spmv_error_bounds(a.view(), T(1), x.data(), T(0), want.data()), what);
}

/// As the plugin runs a background or staged step: poll (which issues a staged step's next part or installs
/// a finished one), then a product, each checked against the host reference, until the step is installed.
/// The running format must not change before the install. `give_up(products)` ends a step that does not
/// end: a failure, then finish_background. Returns the products that ran before the install.
template <typename T, typename GiveUp>
int products_until_installed(gpu_matrix<T>& m, const csr_matrix<T>& a, const std::vector<T>& x, const device_vec<T>& dx,
                             format_id running, bool* changed, const std::string& step, GiveUp give_up)
{
  int products = 0;
  while (!m.poll_background(nullptr, changed)) {
    EXPECT_TRUE(m.background_running());
    EXPECT_EQ(m.format(), running) << "the running plan changed before the install";
    check_product(m, a, x, dx, "product " + std::to_string(products) + " while the " + step + " runs");
    ++products;
    if (give_up(products)) {
      ADD_FAILURE() << "the " << step << " did not end";
      m.finish_background(nullptr, changed);
      break;
    }
  }
  EXPECT_FALSE(m.background_running());
  return products;
}

/// The products of a plan against the host reference, with bounds derived from the problem: y = A x with NaN
/// planted in y (beta = 0 must not read it), y = 2 A x + y / 2, y = A^T x, and y = B x after a values-only
/// refresh to B = -3 A + 1/4 (same pattern). Random vectors from `seed`, seed + 1 and seed + 2.
template <typename T>
void check_products_and_refresh(gpu_matrix<T>& m, const csr_matrix<T>& a, const std::string& what, unsigned seed)
{
  const auto xd = random_vector(a.cols, seed);
  const auto yd = random_vector(a.rows, seed + 1);
  const std::vector<T> x(xd.begin(), xd.end()), y0(yd.begin(), yd.end());
  device_vec<T> dx(x);
  device_vec<T> dy(std::vector<T>(a.rows, std::numeric_limits<T>::quiet_NaN()));
  m.apply(T(1), dx.p, T(0), dy.p, nullptr);
  std::vector<T> want(a.rows);
  reference_spmv(a.view(), T(1), x.data(), T(0), want.data());
  expect_close(dy.get(), want, spmv_error_bounds(a.view(), T(1), x.data(), T(0), want.data()), what + " y=Ax");

  device_vec<T> dy2(y0);
  m.apply(T(2), dx.p, T(0.5), dy2.p, nullptr);
  want = y0;
  reference_spmv(a.view(), T(2), x.data(), T(0.5), want.data());
  expect_close(dy2.get(), want, spmv_error_bounds(a.view(), T(2), x.data(), T(0.5), y0.data()), what + " y=2Ax+y/2");

  const auto xt64 = random_vector(a.rows, seed + 2);
  const std::vector<T> xt(xt64.begin(), xt64.end());
  device_vec<T> dxt(xt);
  device_vec<T> dyt(std::vector<T>(a.cols, std::numeric_limits<T>::quiet_NaN()));
  m.apply_transpose(T(1), dxt.p, T(0), dyt.p, nullptr);
  std::vector<T> wantt(a.cols);
  reference_spmv_transpose(a.view(), T(1), xt.data(), T(0), wantt.data());
  expect_close(dyt.get(), wantt, spmv_error_bounds(a.view(), T(1), xt.data(), T(0), wantt.data(), true), what + " y=A^T x");

  auto b = a;
  for (auto& v : b.values) v = T(-3) * v + T(0.25);
  m.update_values(b.values.data(), nullptr);
  device_vec<T> dy3(std::vector<T>(a.rows, std::numeric_limits<T>::quiet_NaN()));
  m.apply(T(1), dx.p, T(0), dy3.p, nullptr);
  reference_spmv(b.view(), T(1), x.data(), T(0), want.data());
  expect_close(dy3.get(), want, spmv_error_bounds(b.view(), T(1), x.data(), T(0), want.data()), what + " refreshed");
}

}  // namespace aijp::test
