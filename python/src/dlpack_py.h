// Shared by dlpack.cc (from_dlpack: the consumer side) and array.cc (Array: the producer side)
// of the DLPack Python protocol.
#pragma once

#include <optional>
#include <utility>

#include "interop/dlpack_convert.h"
#include "py_common.h"

namespace tb::py {

// tensorbridge.Array's Python type; set by BindArray.
extern PyTypeObject* g_array_type;

// The PyArray inside a tensorbridge.Array (or a subclass); TypeError for anything else.
PyArray* ArrayOf(PyObject* obj);

// Array's own C exchange API table (`Array.__dlpack_c_exchange_api__`).
const DLPackExchangeAPI* ArrayExchangeApi();

// An interned str, kept for the life of the process.
PyObject* Intern(const char* s);

// Binds vectorcall arguments to `names` (interned strs): the first `npos` may come by
// position, all by keyword. Slots not given keep their value. TypeError for extra, unknown or
// repeated arguments.
void BindArgs(const char* fn, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
              PyObject* const* names, Py_ssize_t nnames, Py_ssize_t npos, PyObject** out);

// `copy`: None, True or False (numpy.bool_ too); TypeError otherwise.
std::optional<bool> ParseCopy(PyObject* copy);

// A DLPack (device_type, device_id) pair; TypeError naming `what` otherwise.
std::pair<int32_t, int32_t> ParseDevicePair(PyObject* device, const char* what);

// New capsules ("dltensor_versioned" / "dltensor") owning `managed`: their destructor frees a
// tensor that no consumer took. On failure the tensor is freed and error_already_set thrown.
PyObject* NewCapsule(DLManagedTensorVersioned* managed);
PyObject* NewCapsule(DLManagedTensor* managed);

// Adds a plain CPython method (METH_FASTCALL and friends) to a pybind11 type.
void AddMethod(py::handle type, PyMethodDef* def);

}  // namespace tb::py
