// The host allocator behind Storage::Allocate: 64-byte aligned buffers, with a cache of freed
// large blocks.
//
// A large buffer (>= kCachedMinBytes) freshly obtained from the C library is fresh pages: the
// kernel maps and zeroes each 4 KiB page on first touch, so a 2 MiB result costs ~500 page
// faults before the kernel writing it does any work; a small one costs an aligned allocation
// (the C library's slow path) that is most of a tiny op's time. Freed blocks are kept instead,
// by size class (up to 1 KiB a multiple of 64 bytes, above sizes rounded up to 1/8 of their
// power of two, so a block serves any request within 12.5% below its class; at most
// 64 blocks of one small class), and handed to the next request of that class; a large request
// whose class has no block takes the smallest cached block up to four times its class instead (idle
// resident memory rather than fresh pages, so a step's footprint stays near its live bytes), and
// the block returns to its own class when freed. The cache holds
// at most a byte limit (TB_HOST_CACHE_MB in the environment at first use, default 512; 0 turns
// caching off; SetHostCacheLimit changes it); a freed block that would exceed it goes back to
// the C library. Thread-safe; blocks may be freed on any thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bridge/api.h"

namespace tb {

constexpr size_t kCachedMinBytes = size_t{64} << 10;

struct HostCacheStats {
  uint64_t hits = 0;          // requests served by a cached block
  uint64_t misses = 0;        // large requests (>= kCachedMinBytes) the C library served
  uint64_t cached_bytes = 0;  // held now, free for reuse
  uint64_t limit_bytes = 0;
  uint64_t live_bytes = 0;            // handed out now, by class size (all sizes)
  uint64_t peak_live_bytes = 0;       // the most live bytes since ResetHostPeaks()
  uint64_t peak_footprint_bytes = 0;  // the most live plus cached bytes since ResetHostPeaks()
};

// `nbytes` > 0. Never returns null: throws RuntimeError when memory runs out.
TB_API void* HostAllocate(size_t nbytes);
// `p` from HostAllocate(nbytes), same nbytes.
TB_API void HostFree(void* p, size_t nbytes) noexcept;

TB_API HostCacheStats HostCache();
// Returns every cached block to the C library.
TB_API void EmptyHostCache();
// Starts the peaks of HostCacheStats over from the bytes held now.
TB_API void ResetHostPeaks();
// Sets the cache's byte limit (0: no caching) and trims the cache to it.
TB_API void SetHostCacheLimit(uint64_t bytes);

}  // namespace tb
