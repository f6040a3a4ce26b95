#include "bridge/host_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "bridge/error.h"
#include "bridge/storage.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// A cached block is poisoned while it waits: a use after free still reports under ASan.
#define TB_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TB_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define TB_POISON(p, n) ((void)(p), (void)(n))
#define TB_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tb {
namespace {

constexpr size_t kAlign = Storage::kAlignment;

// At most this many freed blocks of one small class (< kCachedMinBytes) are kept.
constexpr size_t kSmallBlocksPerClass = 64;

// The size a request is served with: up to 1 KiB, a multiple of the alignment; above, a
// multiple of 1/8 of its highest power of two.
size_t ClassSize(size_t nbytes) {
  if (nbytes <= 1024) return (nbytes + kAlign - 1) / kAlign * kAlign;
  int top = 63 - __builtin_clzll(static_cast<unsigned long long>(nbytes));
  size_t step = size_t{1} << (top - 3);
  return (nbytes + step - 1) / step * step;
}

uint64_t LimitFromEnv() {
  const char* v = std::getenv("TB_HOST_CACHE_MB");
  if (v == nullptr || *v == '\0') return uint64_t{512} << 20;
  char* end = nullptr;
  unsigned long long mb = std::strtoull(v, &end, 10);
  if (end == v) return uint64_t{512} << 20;
  return static_cast<uint64_t>(mb) << 20;
}

struct Cache {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free;  // class size -> blocks (no empty lists)
  // Blocks handed out for a request of a smaller class (see HostAllocate) -> their class.
  std::unordered_map<void*, size_t> larger;
  uint64_t cached = 0, limit = LimitFromEnv(), hits = 0, misses = 0;
  // Bytes handed out and not freed (by class size), and the most of them, and of them plus
  // the cached bytes, held at once since the last ResetHostPeaks().
  uint64_t live = 0, peak_live = 0, peak_footprint = 0;

  // Called with mu held after `live` or `cached` grew.
  void NotePeaks() {
    peak_live = std::max(peak_live, live);
    peak_footprint = std::max(peak_footprint, live + cached);
  }

  // Frees cached blocks until at most `keep` bytes are held. Called with mu held.
  void TrimTo(uint64_t keep) {
    for (auto it = free.begin(); it != free.end() && cached > keep;) {
      auto& blocks = it->second;
      while (!blocks.empty() && cached > keep) {
        TB_UNPOISON(blocks.back(), it->first);
        std::free(blocks.back());
        blocks.pop_back();
        cached -= it->first;
      }
      it = blocks.empty() ? free.erase(it) : std::next(it);
    }
  }
};

Cache& TheCache() {
  static Cache* cache = new Cache;  // never destroyed: tensors may be freed at exit
  return *cache;
}

}  // namespace

void* HostAllocate(size_t nbytes) {
  const size_t size = ClassSize(nbytes);
  {
    Cache& c = TheCache();
    std::lock_guard<std::mutex> lock(c.mu);
    // The block of this class freed last; for a large request without one, the smallest
    // cached block of a class up to four times as large: memory already resident and idle, where
    // the C library would fault in fresh pages and the cache would grow by the request.
    // (an empty list is only left by a failed push_back in HostFree)
    auto it = c.free.find(size);
    if (it != c.free.end() && it->second.empty()) it = c.free.end();
    if (it == c.free.end() && size >= kCachedMinBytes) {
      it = c.free.upper_bound(size);
      while (it != c.free.end() && it->second.empty()) ++it;
      if (it != c.free.end() && it->first > 4 * size) it = c.free.end();
    }
    if (it != c.free.end()) {
      const size_t block = it->first;
      void* p = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) c.free.erase(it);
      if (block != size) {
        try {
          c.larger.emplace(p, block);
        } catch (...) {  // no memory for the entry: give the block back, allocate below
          TB_UNPOISON(p, block);
          std::free(p);
          c.cached -= block;
          p = nullptr;
        }
      }
      if (p != nullptr) {
        c.cached -= block;
        c.live += block;
        ++c.hits;
        c.NotePeaks();
        TB_UNPOISON(p, block);
        return p;
      }
    }
    if (size >= kCachedMinBytes) ++c.misses;
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) {
    // Cached blocks of other sizes may be what the C library lacks.
    EmptyHostCache();
    p = std::aligned_alloc(kAlign, size);
  }
  TB_CHECK(p != nullptr, RuntimeError)
      << "tensorbridge: out of memory allocating " << nbytes << " bytes";
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.live += size;
  c.NotePeaks();
  return p;
}

void HostFree(void* p, size_t nbytes) noexcept {
  if (p == nullptr) return;
  size_t size = ClassSize(nbytes);
  {
    Cache& c = TheCache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (!c.larger.empty()) {
      auto it = c.larger.find(p);
      if (it != c.larger.end()) {
        size = it->second;
        c.larger.erase(it);
      }
    }
    c.live -= std::min<uint64_t>(c.live, size);
    if (size <= c.limit) {
      // A full cache gives up older blocks for this one: the blocks a step frees are the ones
      // the next step allocates, so blocks of sizes no plan asks for any more do not keep the
      // current ones out.
      if (c.cached + size > c.limit) c.TrimTo(c.limit - size);
      try {
        std::vector<void*>& blocks = c.free[size];
        if (size < kCachedMinBytes && blocks.size() >= kSmallBlocksPerClass) {
          std::free(p);
          return;
        }
        blocks.push_back(p);
      } catch (...) {  // no memory for the list entry: give the block back instead
        std::free(p);
        return;
      }
      c.cached += size;
      TB_POISON(p, size);
      return;
    }
  }
  std::free(p);
}

HostCacheStats HostCache() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.hits, c.misses, c.cached, c.limit, c.live, c.peak_live, c.peak_footprint};
}

void ResetHostPeaks() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.peak_live = c.live;
  c.peak_footprint = c.live + c.cached;
}

void EmptyHostCache() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.TrimTo(0);
}

void SetHostCacheLimit(uint64_t bytes) {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.limit = bytes;
  c.TrimTo(bytes);
}

}  // namespace tb
