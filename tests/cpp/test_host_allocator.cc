// Tests for bridge/host_allocator.h: the cache of freed large blocks behind Storage::Allocate.
#include "bridge/host_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "bridge/storage.h"

namespace tb {
namespace {

// Each test starts from an empty cache with the default limit and leaves it that way.
class HostAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    limit_ = HostCache().limit_bytes;
    EmptyHostCache();
  }
  void TearDown() override {
    SetHostCacheLimit(limit_);
    EmptyHostCache();
  }
  uint64_t limit_ = 0;
};

TEST_F(HostAllocatorTest, FreedLargeBlockServesTheNextRequestOfItsClass) {
  SetHostCacheLimit(uint64_t{64} << 20);
  const size_t n = size_t{1} << 20;
  void* a = HostAllocate(n);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % Storage::kAlignment, 0u);
  std::memset(a, 1, n);
  HostCacheStats before = HostCache();
  HostFree(a, n);
  EXPECT_GE(HostCache().cached_bytes, n);
  // A slightly smaller request falls in the same class (1 MiB + up to 1/8 below it).
  void* b = HostAllocate(n - 1000);
  EXPECT_EQ(b, a);
  HostCacheStats after = HostCache();
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_EQ(after.cached_bytes, 0u);
  HostFree(b, n - 1000);
}

TEST_F(HostAllocatorTest, DifferentClassesAndSmallBlocksAreNotShared) {
  SetHostCacheLimit(uint64_t{64} << 20);
  void* a = HostAllocate(size_t{1} << 20);
  HostFree(a, size_t{1} << 20);
  HostCacheStats s = HostCache();
  void* b = HostAllocate((size_t{1} << 20) * 2);  // another class: a miss
  EXPECT_EQ(HostCache().misses, s.misses + 1);
  EXPECT_EQ(HostCache().hits, s.hits);
  HostFree(b, (size_t{1} << 20) * 2);
}

TEST_F(HostAllocatorTest, ALargeRequestTakesACachedBlockUpToTwiceItsClass) {
  SetHostCacheLimit(uint64_t{64} << 20);
  const size_t mib = size_t{1} << 20;
  void* big = HostAllocate(3 * mib / 2);  // class 1.5 MiB
  void* huge = HostAllocate(5 * mib);
  HostFree(big, 3 * mib / 2);
  HostFree(huge, 5 * mib);
  HostCacheStats s = HostCache();
  // 1 MiB has no block of its class: it takes the 1.5 MiB one (no miss), not the 5 MiB one.
  void* a = HostAllocate(mib);
  EXPECT_EQ(a, big);
  EXPECT_EQ(HostCache().hits, s.hits + 1);
  EXPECT_EQ(HostCache().misses, s.misses);
  EXPECT_EQ(HostCache().cached_bytes, 5 * mib);
  std::memset(a, 2, mib);
  // Freed, it goes back to its own class: a 1.5 MiB request gets it again.
  HostFree(a, mib);
  EXPECT_EQ(HostCache().cached_bytes, 5 * mib + 3 * mib / 2);
  void* b = HostAllocate(3 * mib / 2);
  EXPECT_EQ(b, big);
  HostFree(b, 3 * mib / 2);
  // 1 MiB again takes the 1.5 MiB block; a second 1 MiB finds only the 5 MiB one (over four times
  // its class): a miss.
  a = HostAllocate(mib);
  EXPECT_EQ(a, big);
  s = HostCache();
  void* c = HostAllocate(mib);
  EXPECT_NE(c, huge);
  EXPECT_EQ(HostCache().misses, s.misses + 1);
  HostFree(a, mib);
  HostFree(c, mib);
  // Small requests take only their own class.
  void* small = HostAllocate(1000);
  EXPECT_NE(small, big);
  HostFree(small, 1000);
}

TEST_F(HostAllocatorTest, PeaksCountLiveAndCachedBytes) {
  SetHostCacheLimit(uint64_t{64} << 20);
  const size_t mib = size_t{1} << 20;
  const uint64_t live0 = HostCache().live_bytes;
  ResetHostPeaks();
  void* a = HostAllocate(mib);
  void* b = HostAllocate(2 * mib);
  EXPECT_EQ(HostCache().live_bytes, live0 + 3 * mib);
  HostFree(a, mib);
  HostFree(b, 2 * mib);
  HostCacheStats s = HostCache();
  EXPECT_EQ(s.live_bytes, live0);
  EXPECT_GE(s.peak_live_bytes, live0 + 3 * mib);
  EXPECT_GE(s.peak_footprint_bytes, s.peak_live_bytes);
  ResetHostPeaks();
  s = HostCache();
  EXPECT_EQ(s.peak_live_bytes, s.live_bytes);
  EXPECT_EQ(s.peak_footprint_bytes, s.live_bytes + s.cached_bytes);
}

TEST_F(HostAllocatorTest, SmallBlocksAreReusedUpToACountPerClass) {
  SetHostCacheLimit(uint64_t{64} << 20);
  void* small = HostAllocate(1000);  // class 1024
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % Storage::kAlignment, 0u);
  HostFree(small, 1000);
  EXPECT_EQ(HostCache().cached_bytes, 1024u);
  EXPECT_EQ(HostAllocate(990), small);
  HostFree(small, 990);
  // At most 64 blocks of one small class wait in the cache; the rest are freed.
  std::vector<void*> blocks;
  for (int i = 0; i < 70; ++i) blocks.push_back(HostAllocate(100));  // class 128
  const uint64_t misses = HostCache().misses;
  for (void* p : blocks) HostFree(p, 100);
  EXPECT_EQ(HostCache().cached_bytes, 1024u + 64u * 128u);
  EXPECT_EQ(HostCache().misses, misses);  // small requests are not counted as misses
}

TEST_F(HostAllocatorTest, LimitBoundsTheCacheAndZeroTurnsItOff) {
  const size_t n = size_t{1} << 20;
  SetHostCacheLimit(n + n / 2);  // room for one block of the class
  void* a = HostAllocate(n);
  void* b = HostAllocate(n);
  HostFree(a, n);
  HostFree(b, n);  // over the limit: the older block (a) is freed to make room for b
  EXPECT_EQ(HostCache().cached_bytes, n);
  SetHostCacheLimit(0);  // trims to nothing
  EXPECT_EQ(HostCache().cached_bytes, 0u);
  void* c = HostAllocate(n);
  HostFree(c, n);
  EXPECT_EQ(HostCache().cached_bytes, 0u);
}

TEST_F(HostAllocatorTest, EmptyReturnsEverything) {
  SetHostCacheLimit(uint64_t{64} << 20);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(HostAllocate((size_t{1} << 17) * (i + 1)));
  for (int i = 0; i < 4; ++i) HostFree(blocks[i], (size_t{1} << 17) * (i + 1));
  EXPECT_GT(HostCache().cached_bytes, 0u);
  EmptyHostCache();
  EXPECT_EQ(HostCache().cached_bytes, 0u);
}

TEST_F(HostAllocatorTest, StorageOfAReusedBlockIsZeroedWhenAsked) {
  SetHostCacheLimit(uint64_t{64} << 20);
  const size_t n = size_t{256} << 10;
  {
    auto s = Storage::Allocate(n);
    std::memset(s->data(), 0xAB, n);
  }
  auto z = Storage::Allocate(n, /*zero=*/true);
  const auto* p = static_cast<const unsigned char*>(z->data());
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(p[i], 0) << i;
  EXPECT_EQ(p[n - 1], 0);
}

TEST_F(HostAllocatorTest, ManyThreadsAllocateAndFree) {
  SetHostCacheLimit(uint64_t{16} << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        const size_t n = (size_t{64} << 10) * (1 + (i + t) % 5);
        auto* p = static_cast<unsigned char*>(HostAllocate(n));
        p[0] = static_cast<unsigned char>(t);
        p[n - 1] = static_cast<unsigned char>(i);
        EXPECT_EQ(p[0], static_cast<unsigned char>(t));
        HostFree(p, n);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(HostCache().cached_bytes, uint64_t{16} << 20);
}

}  // namespace
}  // namespace tb
