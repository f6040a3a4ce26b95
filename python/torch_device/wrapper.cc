// The optional maker of tensorbridge.Tensor's wrappers: what
// torch.Tensor._make_wrapper_subclass(cls, shape, strides=..., dtype=...) makes for a CPU
// wrapper subclass, built in C++ without torch's argument parser, with the wrapped memory as
// its storage (wrapper.h).
//
// A wrapper is the TensorImpl of wrapper.h and a Python object of the subclass's type. It links
// libtorch and libtorch_python, one torch release's C++ ABI: the core (python/src/eager.cc) calls
// it through the C function below, whose address tensorbridge/_tensor.py hands over when the
// library was built against the running torch, and makes wrappers with _make_wrapper_subclass
// otherwise.
#include <Python.h>

#include "wrapper.h"

// A new wrapper of type `cls` (a torch.Tensor subclass defining __torch_dispatch__) with
// `ndim` sizes and strides (strides == nullptr: contiguous) and dtype `dtype` (a torch.dtype,
// checked by the caller), over the memory at `data`, which `context` keeps alive: torch calls
// `deleter(context)` once, when it drops the wrapper's storage (also when this call fails).
// A new reference, or nullptr with a Python exception set.
extern "C" __attribute__((visibility("default"))) PyObject* tb_torch_make_wrapper(
    PyObject* cls, int64_t ndim, const int64_t* sizes, const int64_t* strides, PyObject* dtype,
    void* data, void* context, void (*deleter)(void*)) {
  return tb_torch::MakeWrapperObject(cls, ndim, sizes, strides, dtype, data, context, deleter,
                                     nullptr);
}
