// The TensorImpl of a tensorbridge.Tensor, as torch.Tensor._make_wrapper_subclass makes it for
// a CPU wrapper subclass (the dense CPU key, the given sizes, strides and dtype, the Python
// dispatch keys), except for its storage: the wrapped memory itself, beginning at the tensor's
// first element (storage offset 0), not resizable, kept alive by `context` until torch drops
// the storage and calls `deleter(context)`. torch's C++ code that reads a tensor's memory above
// the Python key (CompositeImplicit decompositions reading an index tensor, to_dlpack) then
// reads the wrapped values. Shared by wrapper.cc and python_key.cc.
//
// Its class, WrapperImpl, makes torch's shallow copies (autograd's detach of saved outputs and
// of unpacked saved tensors, `.data`, `x.data = y`) through the hooks of the library that made
// it: a detached copy with its Python object of the same class over the same Array, made in
// C++ where torch would call `__torch_dispatch__` with `aten::detach` (twice per saved output
// of a training step); `x.data = y` also moves the Python object's Array to y's memory.
#pragma once

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>

// libtorch_python's own (torch/csrc/autograd/python_variable.h, which needs torch's copy of
// pybind11): a new Python object of `type` over `var`.
PyObject* THPVariable_Wrap(const at::TensorBase& var, PyTypeObject* type);

namespace tb_torch {

// torch.dtype's layout (torch/csrc/Dtype.h): the object header, then the scalar type.
struct DtypeObject {
  PyObject ob_base;  // PyObject_HEAD
  c10::ScalarType scalar_type;
};

class WrapperImpl;

// What the library that made a wrapper does for its shallow copies. Every function may throw
// (torch's exceptions); none is called with the GIL held by the caller's knowledge.
struct WrapperHooks {
  // Whether a detached copy of `self` may be made in C++ now: otherwise torch's own route
  // (TensorImpl::shallow_copy_and_detach: the interpreter's detach, __torch_dispatch__).
  bool (*may_detach)(const WrapperImpl& self);
  // Gives `copy`, a shallow copy of `self`, its Python object: self's class, self's Array.
  void (*attach_copy)(const WrapperImpl& self, const c10::intrusive_ptr<c10::TensorImpl>& copy);
  // `self.data = src`: takes src's metadata and memory (WrapperImpl::CopyMetadataFrom) and
  // gives self's Python object an Array over that memory, or raises where src has none.
  void (*copy_from)(WrapperImpl& self, const c10::intrusive_ptr<c10::TensorImpl>& src);
};

// A wrapper's TensorImpl: torch's, with shallow copies made through `hooks` (nullptr: torch's
// own shallow copies).
class WrapperImpl final : public c10::TensorImpl {
 public:
  WrapperImpl(c10::Storage&& storage, c10::DispatchKeySet keys, caffe2::TypeMeta dtype,
              const WrapperHooks* hooks)
      : c10::TensorImpl(std::move(storage), keys, dtype), hooks_(hooks) {}
  WrapperImpl(c10::DispatchKeySet keys, caffe2::TypeMeta dtype, std::optional<c10::Device> device,
              const WrapperHooks* hooks)
      : c10::TensorImpl(keys, dtype, device), hooks_(hooks) {}

  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      const c10::VariableVersion& version_counter,
      bool allow_tensor_metadata_change) const override {
    if (hooks_ == nullptr || !hooks_->may_detach(*this)) {
      return c10::TensorImpl::shallow_copy_and_detach(version_counter,
                                                      allow_tensor_metadata_change);
    }
    return Detached(version_counter, allow_tensor_metadata_change);
  }

  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const override {
    if (hooks_ == nullptr || !hooks_->may_detach(*this)) {
      return c10::TensorImpl::shallow_copy_and_detach(std::move(version_counter),
                                                      allow_tensor_metadata_change);
    }
    return Detached(std::move(version_counter), allow_tensor_metadata_change);
  }

  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override {
    if (hooks_ == nullptr) {
      c10::TensorImpl::shallow_copy_from(impl);
    } else {
      hooks_->copy_from(*this, impl);
    }
  }

  // torch's shallow_copy_from: `impl`'s metadata and storage, this one's version counter.
  void CopyMetadataFrom(const c10::intrusive_ptr<c10::TensorImpl>& impl) {
    c10::TensorImpl::shallow_copy_from(impl);
  }

 private:
  // What TensorImpl::shallow_copy_and_detach makes without an interpreter (the same key set,
  // metadata and storage; the given version counter), as a WrapperImpl with its Python object.
  template <typename Version>
  c10::intrusive_ptr<c10::TensorImpl> Detached(Version&& version_counter,
                                               bool allow_tensor_metadata_change) const {
    auto impl = c10::make_intrusive<WrapperImpl>(key_set(), dtype(), device(), hooks_);
    copy_tensor_metadata(this, impl.get(), std::forward<Version>(version_counter),
                         allow_tensor_metadata_change);
    impl->refresh_numel();
    impl->refresh_contiguous();
    c10::intrusive_ptr<c10::TensorImpl> out = std::move(impl);
    hooks_->attach_copy(*this, out);
    return out;
  }

  const WrapperHooks* hooks_;
};

// `ndim` sizes and strides (strides == nullptr: contiguous) over the memory at `data`, whose
// shallow copies take `hooks` (nullptr: torch's own).
inline at::Tensor MakeWrapperTensor(c10::ScalarType st, int64_t ndim, const int64_t* sizes,
                                    const int64_t* strides, void* data, void* context,
                                    c10::DeleterFnPtr deleter,
                                    const WrapperHooks* hooks = nullptr) {
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
  at::Tensor t = at::detail::make_tensor<WrapperImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), meta, hooks);
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (strides != nullptr) {
    impl->set_sizes_and_strides(size, c10::IntArrayRef(strides, static_cast<size_t>(ndim)));
  } else {
    impl->set_sizes_contiguous(size);
  }
  impl->set_python_dispatch(true);
  return t;
}

// The body of the C entry points that make wrappers (wrapper.cc's, python_key.cc's): a new
// Python object of type `cls` over MakeWrapperTensor(...) with `dtype` a torch.dtype (checked
// by the caller), or nullptr with a Python exception set.
inline PyObject* MakeWrapperObject(PyObject* cls, int64_t ndim, const int64_t* sizes,
                                   const int64_t* strides, PyObject* dtype, void* data,
                                   void* context, c10::DeleterFnPtr deleter,
                                   const WrapperHooks* hooks) {
  try {
    const c10::ScalarType st = reinterpret_cast<DtypeObject*>(dtype)->scalar_type;
    const at::Tensor t = MakeWrapperTensor(st, ndim, sizes, strides, data, context, deleter, hooks);
    return THPVariable_Wrap(t, reinterpret_cast<PyTypeObject*>(cls));
  } catch (const std::exception& e) {
    PyErr_SetString(
        PyExc_RuntimeError,
        (std::string("tensorbridge: making a result wrapper failed: ") + e.what()).c_str());
    return nullptr;
  }
}

}  // namespace tb_torch
