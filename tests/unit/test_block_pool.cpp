// The block pools' size classes (kernels/src/async_ops.hpp), without a GPU: the staged pools round to powers of
// two; the matrix-storage pool (upload pool) to eight sizes per power of two above 32 KiB, so that a block wastes
// at most an eighth of what was asked and two uploads of the same size share a class.
#include "async_ops.hpp"

#include <gtest/gtest.h>

#include <cstddef>

namespace {

using aijp::detail::block_pool;
using aijp::detail::pool_kind;

TEST(BlockPoolSizes, StagedPoolsRoundToPowersOfTwo)
{
  for (const auto kind : {pool_kind::pinned_host, pool_kind::device}) {
    EXPECT_EQ(block_pool::block_size(kind, 0), 4096u);
    EXPECT_EQ(block_pool::block_size(kind, 1), 4096u);
    EXPECT_EQ(block_pool::block_size(kind, 4097), 8192u);
    EXPECT_EQ(block_pool::block_size(kind, (std::size_t{1} << 20) + 1), std::size_t{2} << 20);
  }
}

TEST(BlockPoolSizes, StorageClassesWasteAtMostAnEighth)
{
  EXPECT_EQ(block_pool::block_size(pool_kind::matrix_storage, 100), 4096u);
  EXPECT_EQ(block_pool::block_size(pool_kind::matrix_storage, 20000), 32768u);  // small: powers of two
  for (std::size_t bytes = 32769; bytes < (std::size_t{80} << 20); bytes = bytes * 5 / 4 + 4093) {
    const std::size_t s = block_pool::block_size(pool_kind::matrix_storage, bytes);
    EXPECT_GE(s, bytes);
    EXPECT_LE(s - bytes, bytes / 8) << bytes;
    EXPECT_EQ(block_pool::block_size(pool_kind::matrix_storage, s), s) << "a class is its own class";
    EXPECT_EQ(s % 4096, 0u) << "page multiples";
  }
  // email-Eu-core's copy and reserve (~0.9 MiB) and one byte more share a class.
  const std::size_t upload = 936000;
  EXPECT_EQ(block_pool::block_size(pool_kind::matrix_storage, upload), block_pool::block_size(pool_kind::matrix_storage, upload + 1));
}

}  // namespace
