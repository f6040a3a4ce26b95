// A strong reference to a tensor's memory as an opaque context pointer, for torch's storages
// over wrapped memory (python/torch_device/wrapper.h): torch holds the context and calls
// ReleaseStorageRef(context) once, when its storage dies. Header-only: both the core module
// (eager.cc) and the libtorch-linked Python-key kernels (python_key.cc) make them.
#pragma once

#include <memory>

#include "bridge/storage.h"
#include "bridge/tensor.h"

namespace tb {

inline void* NewStorageRef(const Tensor& t) { return new std::shared_ptr<Storage>(t.storage()); }

inline void ReleaseStorageRef(void* ref) noexcept {
  delete static_cast<std::shared_ptr<Storage>*>(ref);
}

}  // namespace tb
