// Counters of the buffers tensorbridge allocates itself (Storage::Allocate; wrapped foreign
// memory is not counted): process-wide, monotonic, thread-safe.
#pragma once

#include <cstdint>

#include "bridge/api.h"

namespace tb {

struct AllocationStats {
  uint64_t count = 0;  // allocations of a non-empty buffer
  uint64_t bytes = 0;  // their requested sizes, summed
};

TB_API AllocationStats StorageAllocations();

}  // namespace tb
