#include "bridge/storage.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "bridge/alloc_stats.h"
#include "bridge/error.h"
#include "bridge/host_allocator.h"

namespace tb {
namespace {
std::atomic<uint64_t> g_alloc_count{0}, g_alloc_bytes{0};
}  // namespace

AllocationStats StorageAllocations() {
  AllocationStats s;
  s.count = g_alloc_count.load(std::memory_order_relaxed);
  s.bytes = g_alloc_bytes.load(std::memory_order_relaxed);
  return s;
}

// Allocate and Wrap make a Storage and its shared_ptr control block in one allocation
// (make_shared): the only allocation an import makes. make_shared cannot reach the private
// constructor, but a class local to a member function can, as the function itself can.

std::shared_ptr<Storage> Storage::Allocate(size_t nbytes, bool zero) {
  struct Shared final : Storage {
    Shared() : Storage() {}
  };
  std::shared_ptr<Storage> s = std::make_shared<Shared>();
  s->nbytes_ = nbytes;
  s->owns_allocation_ = true;
  if (nbytes > 0) {
    s->data_ = HostAllocate(nbytes);
    if (zero) std::memset(s->data_, 0, nbytes);
    g_alloc_count.fetch_add(1, std::memory_order_relaxed);
    g_alloc_bytes.fetch_add(nbytes, std::memory_order_relaxed);
  }
  return s;
}

std::shared_ptr<Storage> Storage::Wrap(void* data, size_t nbytes, Device device, void* context,
                                       ReleaseFn release) {
  struct Shared final : Storage {
    Shared() : Storage() {}
  };
  std::shared_ptr<Storage> s = std::make_shared<Shared>();
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->context_ = context;
  s->release_ = release;
  return s;
}

Storage::~Storage() {
  if (owns_allocation_) {
    HostFree(data_, nbytes_);
  } else if (release_ != nullptr) {
    release_(context_);
  }
}

}  // namespace tb
