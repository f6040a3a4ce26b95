// tb::Error -> the Python exception its kind names.
#include "bridge/error.h"
#include "py_common.h"

namespace tb::py {

void BindErrors(py::module_& m) {
  // By value: pybind11's translator type is void (*)(std::exception_ptr).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const tb::Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.kind()) {
        case ErrorKind::kValueError: type = PyExc_ValueError; break;
        case ErrorKind::kTypeError: type = PyExc_TypeError; break;
        case ErrorKind::kBufferError: type = PyExc_BufferError; break;
        case ErrorKind::kIndexError: type = PyExc_IndexError; break;
        case ErrorKind::kNotImplementedError: type = PyExc_NotImplementedError; break;
        case ErrorKind::kRuntimeError:
        case ErrorKind::kInternalError: type = PyExc_RuntimeError; break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace tb::py
