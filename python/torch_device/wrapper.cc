// The optional fast path of tensorbridge.Tensor's result wrappers: what
// torch.Tensor._make_wrapper_subclass(cls, shape, strides=..., dtype=...) makes for a CPU
// wrapper subclass, built in C++ without torch's argument parser.
//
// A wrapper is a c10::TensorImpl with the dense CPU key, a data-less storage (torch's meta
// allocator, as _make_wrapper_subclass uses: the storage only tracks aliasing while tracing),
// the given sizes, strides and dtype, the Python dispatch keys set, and a Python object of
// the subclass's type. It links libtorch and libtorch_python, one torch release's C++ ABI:
// the core (python/src/eager.cc) calls it through the C function below, whose address
// tensorbridge/_tensor.py hands over when the library was built against the running torch,
// and makes wrappers with _make_wrapper_subclass otherwise.
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <exception>
#include <string>

// libtorch_python's own (torch/csrc/autograd/python_variable.h, which needs torch's copy of
// pybind11): a new Python object of `type` over `var`.
PyObject* THPVariable_Wrap(const at::TensorBase& var, PyTypeObject* type);

namespace {

// torch.dtype's layout (torch/csrc/Dtype.h): the object header, then the scalar type.
struct DtypeObject {
  PyObject ob_base;  // PyObject_HEAD
  c10::ScalarType scalar_type;
};

}  // namespace

// A new wrapper of type `cls` (a torch.Tensor subclass defining __torch_dispatch__) with
// `ndim` sizes and strides (strides == nullptr: contiguous) and dtype `dtype` (a torch.dtype,
// checked by the caller). A new reference, or nullptr with a Python exception set.
extern "C" __attribute__((visibility("default"))) PyObject* tb_torch_make_wrapper(
    PyObject* cls, int64_t ndim, const int64_t* sizes, const int64_t* strides, PyObject* dtype) {
  try {
    const c10::ScalarType st = reinterpret_cast<DtypeObject*>(dtype)->scalar_type;
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
                         c10::DataPtr(nullptr, c10::Device(c10::kCPU)),
                         c10::GetAllocator(c10::kMeta), /*resizable=*/true);
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), meta);
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (strides != nullptr) {
      impl->set_sizes_and_strides(size, c10::IntArrayRef(strides, static_cast<size_t>(ndim)));
    } else {
      impl->set_sizes_contiguous(size);
    }
    impl->set_python_dispatch(true);
    return THPVariable_Wrap(t, reinterpret_cast<PyTypeObject*>(cls));
  } catch (const std::exception& e) {
    PyErr_SetString(
        PyExc_RuntimeError,
        (std::string("tensorbridge: making a result wrapper failed: ") + e.what()).c_str());
    return nullptr;
  }
}
