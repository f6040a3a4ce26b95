// Storage: the reference-counted owner of the memory tensors point into.
//
// Either memory we allocated (64-byte aligned, freed by us), or foreign memory whose owner
// is told exactly once, through `release(context)`, when the last reference goes away.
// Reference counting is std::shared_ptr's, so it is thread-safe.
#pragma once

#include <cstddef>
#include <memory>

#include "bridge/api.h"
#include "bridge/device.h"

namespace tb {

class TB_API Storage {
 public:
  using ReleaseFn = void (*)(void* context) noexcept;
  static constexpr size_t kAlignment = 64;

  // New memory of `nbytes` (zero-initialised when `zero` is true), 64-byte aligned.
  // CPU only: other devices' memory only ever arrives from their own frameworks.
  static std::shared_ptr<Storage> Allocate(size_t nbytes, bool zero = false);
  // Foreign memory. `release(context)` runs exactly once, when the last reference dies;
  // `release` may be null for memory that outlives every tensor (static data in tests).
  static std::shared_ptr<Storage> Wrap(void* data, size_t nbytes, Device device, void* context,
                                       ReleaseFn release);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // True when the memory belongs to another framework.
  bool is_foreign() const { return !owns_allocation_; }

 private:
  Storage() = default;

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_{};
  // true: data_ came from our aligned allocator and the destructor frees it.
  bool owns_allocation_ = false;
  // Foreign owner handle (a DLManagedTensor, a Python object, ...), passed to release_.
  void* context_ = nullptr;
  // Called once with context_ by the destructor; null when there is nothing to release.
  ReleaseFn release_ = nullptr;
};

}  // namespace tb
