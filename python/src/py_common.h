// Shared by the _C module's files: pybind11, error translation, the Array type.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bridge/tensor.h"

namespace tb::py {

namespace py = pybind11;

// The Python object `tensorbridge.Array`: a tb::Tensor.
struct PyArray {
  Tensor tensor;
};

// True while the interpreter is shutting down (Python objects must not be touched).
bool InterpreterFinalizing();

// Storage release for memory a Python object owns: drops the reference, with the GIL,
// or does nothing when the interpreter is already finalizing.
void ReleasePyObject(void* object) noexcept;

// Converts anything from_dlpack accepts (Array, DLPack producer, capsule) into a Tensor.
Tensor TensorFromObject(py::handle obj, py::handle device, py::handle copy);

py::object WrapTensor(Tensor t);

void BindErrors(py::module_& m);
// tensorbridge.KernelDeclinedError (made by BindErrors): a NotImplementedError subclass.
PyObject* KernelDeclinedError();
void BindArray(py::module_& m);
void BindDLPack(py::module_& m);
void BindOps(py::module_& m);
void BindMemory(py::module_& m);
void BindPlan(py::module_& m);
void BindEager(py::module_& m);
void BindFfi(py::module_& m);

}  // namespace tb::py
