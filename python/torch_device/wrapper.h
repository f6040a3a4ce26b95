// The TensorImpl of a tensorbridge.Tensor, as torch.Tensor._make_wrapper_subclass makes it for
// a CPU wrapper subclass (the dense CPU key, the given sizes, strides and dtype, the Python
// dispatch keys), except for its storage: the wrapped memory itself, beginning at the tensor's
// first element (storage offset 0), not resizable, kept alive by `context` until torch drops
// the storage and calls `deleter(context)`. torch's C++ code that reads a tensor's memory above
// the Python key (CompositeImplicit decompositions reading an index tensor, to_dlpack) then
// reads the wrapped values. Shared by wrapper.cc and python_key.cc.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>

#include <cstdint>
#include <utility>

namespace tb_torch {

// `ndim` sizes and strides (strides == nullptr: contiguous) over the memory at `data`.
inline at::Tensor MakeWrapperTensor(c10::ScalarType st, int64_t ndim, const int64_t* sizes,
                                    const int64_t* strides, void* data, void* context,
                                    c10::DeleterFnPtr deleter) {
  const caffe2::TypeMeta meta = c10::scalarTypeToTypeMeta(st);
  const c10::IntArrayRef size(sizes, static_cast<size_t>(ndim));
  // The storage's size in bytes, as torch computes it for these sizes and strides.
  int64_t nbytes = 0;
  bool empty = false;
  for (int64_t i = 0; i < ndim; ++i) empty |= sizes[i] == 0;
  if (!empty) {
    int64_t extent = 1;
    if (strides != nullptr) {
      for (int64_t i = 0; i < ndim; ++i) extent += (sizes[i] - 1) * strides[i];
    } else {
      for (int64_t i = 0; i < ndim; ++i) extent *= sizes[i];
    }
    nbytes = extent * static_cast<int64_t>(meta.itemsize());
  }
  c10::Storage storage(c10::Storage::use_byte_size_t{}, nbytes,
                       c10::DataPtr(data, context, deleter, c10::Device(c10::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), meta);
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (strides != nullptr) {
    impl->set_sizes_and_strides(size, c10::IntArrayRef(strides, static_cast<size_t>(ndim)));
  } else {
    impl->set_sizes_contiguous(size);
  }
  impl->set_python_dispatch(true);
  return t;
}

}  // namespace tb_torch
