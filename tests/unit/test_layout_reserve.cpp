// The layout reserve's arithmetic (kernels/src/layout_reserve.hpp) on host memory: aligned regions from the
// bottom up, never one past the end, never the same bytes twice, also under concurrent takers.
#include "layout_reserve.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace {

using aijp::detail::layout_reserve;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(LayoutReserve, AlignedRegionsFromTheBottomUntilFull)
{
  alignas(layout_reserve::alignment) static unsigned char memory[4096];
  layout_reserve r(memory, sizeof(memory));
  EXPECT_EQ(r.size(), 4096u);
  void* a = r.take(10);
  ASSERT_EQ(a, static_cast<void*>(memory));
  void* b = r.take(256);
  EXPECT_EQ(address(b), address(memory) + 256) << "10 bytes round up to one 256-byte unit";
  void* c = r.take(0);
  EXPECT_EQ(address(c), address(memory) + 512) << "zero bytes still get a distinct region";
  EXPECT_EQ(r.used(), 768u);
  EXPECT_EQ(r.left(), 4096u - 768u);
  EXPECT_EQ(r.regions(), 3);
  EXPECT_EQ(r.take(4096 - 768 + 1), nullptr) << "one byte too many";
  EXPECT_EQ(r.used(), 768u) << "a refused take changes nothing";
  void* d = r.take(4096 - 768);
  EXPECT_EQ(address(d), address(memory) + 768);
  EXPECT_EQ(r.left(), 0u);
  EXPECT_EQ(r.take(1), nullptr);
  EXPECT_EQ(r.regions(), 4);
}

TEST(LayoutReserve, RoundUp)
{
  EXPECT_EQ(layout_reserve::round_up(0), 0u);
  EXPECT_EQ(layout_reserve::round_up(1), 256u);
  EXPECT_EQ(layout_reserve::round_up(256), 256u);
  EXPECT_EQ(layout_reserve::round_up(257), 512u);
}

TEST(LayoutReserve, ConcurrentTakersGetDisjointRegions)
{
  constexpr int threads = 8, per_thread = 200;
  std::vector<unsigned char> memory(threads * per_thread * 512 / 2 + 256);  // room for about half the takes
  void* base = memory.data() + (256 - address(memory.data()) % 256) % 256;
  const std::size_t bytes = (memory.size() - 256) / 256 * 256;
  layout_reserve r(base, bytes);
  std::vector<std::vector<std::pair<std::uintptr_t, std::size_t>>> got(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int k = 0; k < per_thread; ++k) {
        const std::size_t want = 1 + static_cast<std::size_t>((t * 131 + k * 17) % 700);
        if (void* p = r.take(want)) got[t].emplace_back(address(p), want);
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<std::pair<std::uintptr_t, std::size_t>> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(static_cast<int>(all.size()), r.regions());
  std::sort(all.begin(), all.end());
  for (std::size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(all[k].first % layout_reserve::alignment, 0u);
    EXPECT_GE(all[k].first, address(base));
    EXPECT_LE(all[k].first + all[k].second, address(base) + bytes) << "region past the end";
    if (k > 0) {
      EXPECT_GE(all[k].first, all[k - 1].first + all[k - 1].second) << "overlapping regions";
    }
  }
  EXPECT_LE(r.used(), bytes);
}

}  // namespace
