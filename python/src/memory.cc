// tensorbridge._C's view of the buffers tensorbridge allocates: allocation counters
// (bridge/alloc_stats.h) and the cache of freed large blocks (bridge/host_allocator.h).
#include "bridge/alloc_stats.h"
#include "bridge/host_allocator.h"
#include "py_common.h"

namespace tb::py {

void BindMemory(py::module_& m) {
  m.def(
      "storage_allocations",
      [] {
        AllocationStats s = StorageAllocations();
        py::dict d;
        d["count"] = s.count;
        d["bytes"] = s.bytes;
        return d;
      },
      "Buffers tensorbridge has allocated in this process (count, bytes): a plan run's share is "
      "the difference around it.");
  m.def(
      "memory_stats",
      [] {
        AllocationStats a = StorageAllocations();
        HostCacheStats c = HostCache();
        py::dict d;
        d["allocations"] = a.count;
        d["allocated_bytes"] = a.bytes;
        d["cache_hits"] = c.hits;
        d["cache_misses"] = c.misses;
        d["cached_bytes"] = c.cached_bytes;
        d["cache_limit_bytes"] = c.limit_bytes;
        d["live_bytes"] = c.live_bytes;
        d["peak_live_bytes"] = c.peak_live_bytes;
        d["peak_footprint_bytes"] = c.peak_footprint_bytes;
        return d;
      },
      "tensorbridge's buffers: allocations and their bytes (monotonic), and the cache of freed "
      "large blocks: requests it served (hits), large requests it could not (misses), bytes it "
      "holds now and its limit; live_bytes: buffers handed out and not freed (by their size "
      "class), "
      "peak_live_bytes and peak_footprint_bytes (live plus cached) the most held at once since "
      "reset_peak_memory().");
  m.def("reset_peak_memory", &ResetHostPeaks,
        "Starts memory_stats()'s peak_live_bytes and peak_footprint_bytes over from the bytes "
        "held now.");
  m.def("empty_cache", &EmptyHostCache,
        "Returns the freed large blocks tensorbridge keeps for reuse to the C library.");
  m.def(
      "set_host_cache_limit", [](uint64_t nbytes) { SetHostCacheLimit(nbytes); }, py::arg("nbytes"),
      "The most bytes of freed large blocks kept for reuse (0: none); trims the cache to it.");
}

}  // namespace tb::py
