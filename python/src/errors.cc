// tb::Error -> the Python exception its kind names.
#include "bridge/error.h"
#include "py_common.h"

namespace tb::py {

namespace {
PyObject* declined = nullptr;
}  // namespace

PyObject* KernelDeclinedError() { return declined; }

void BindErrors(py::module_& m) {
  // A kernel's refusal of a dtype or device it has no loop for (tb::Error::declined()).
  declined = PyErr_NewExceptionWithDoc(
      "tensorbridge._C.KernelDeclinedError",
      "A tensorbridge kernel has no loop for the input's dtype or device (a NotImplementedError "
      "naming the op and the dtype). With config.fallback 'allow' or 'warn' such a call runs "
      "PyTorch's CPU kernel instead; with 'error' it raises this.",
      PyExc_NotImplementedError, nullptr);
  if (declined == nullptr) throw py::error_already_set();
  m.attr("KernelDeclinedError") = py::handle(declined);
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
        case ErrorKind::kNotImplementedError:
          type = e.declined() ? declined : PyExc_NotImplementedError;
          break;
        case ErrorKind::kRuntimeError:
        case ErrorKind::kInternalError: type = PyExc_RuntimeError; break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace tb::py
