// tensorbridge._C: the C++ library seen from Python.
#include "kernels/onednn/onednn.h"
#include "py_common.h"

namespace tb::py {

bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

void ReleasePyObject(void* object) noexcept {
  if (!Py_IsInitialized() || InterpreterFinalizing()) return;  // dies with the interpreter
  PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF(static_cast<PyObject*>(object));
  PyGILState_Release(state);
}

}  // namespace tb::py

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  m.doc() = "tensorbridge C++ core: tensors over foreign memory, DLPack, the ATen op table.";
  m.attr("__version__") = TB_VERSION;
  tb::py::BindErrors(m);
  tb::py::BindArray(m);
  tb::py::BindDLPack(m);
  tb::py::BindOps(m);
  tb::py::BindMemory(m);
  tb::py::BindPlan(m);
  tb::py::BindEager(m);
  tb::py::BindFfi(m);
  m.def(
      "onednn_info",
      [] {
        py::dict d;
        d["version"] = tb::OneDnnVersion();
        d["effective_isa"] = tb::OneDnnEffectiveIsa();
        d["isa_capped"] = tb::OneDnnIsaCapped();
        py::dict created;
        for (const auto& [name, count] : tb::OneDnnPrimitivesCreated())
          created[name.c_str()] = count;
        d["primitives_created"] = created;
        return d;
      },
      "oneDNN's version, the CPU ISA it dispatches to, whether tensorbridge capped it, and how "
      "many primitives the kernels created, by implementation name.");
}
