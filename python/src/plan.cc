// tensorbridge._C.Plan: building and running captured graphs from Python.
#include "dispatch/plan.h"

#include <pybind11/gil_safe_call_once.h>

#include "dlpack_py.h"
#include "py_common.h"

namespace tb::py {

Value ToValue(py::handle obj);  // ops.cc
py::object FromValue(const Value& v);

namespace {

// Python form of a plan argument: ("value", n) | ("item", n, i) | ("const", obj) |
// ("list", [args]) | ("optlist", [args]).
Plan::Arg ToArg(py::handle obj) {
  auto t = obj.cast<py::tuple>();
  std::string kind = t[0].cast<std::string>();
  if (kind == "value") return Plan::Arg::Of(t[1].cast<int>());
  if (kind == "item") return Plan::Arg::Item(t[1].cast<int>(), t[2].cast<int>());
  if (kind == "const") return Plan::Arg::Const(ToValue(t[1]));
  if (kind == "list" || kind == "optlist") {
    Plan::Arg a;
    a.kind = kind == "list" ? Plan::Arg::Kind::kList : Plan::Arg::Kind::kOptionalList;
    for (auto item : t[1]) a.items.push_back(ToArg(item));
    return a;
  }
  TB_THROW(ValueError) << "Plan: unknown argument kind '" << kind << "'";
}

std::vector<Plan::Arg> ToArgs(const py::iterable& args) {
  std::vector<Plan::Arg> out;
  for (auto a : args) out.push_back(ToArg(a));
  return out;
}

// torch's side of a compiled plan's calls: its tensor types (inputs of exactly these types are
// imported in C++) and its DLPack exchange table, whose managed_tensor_to_py_object_no_sync
// makes the output tensors. Looked up once, under the GIL, and kept for the process.
struct TorchSide {
  PyTypeObject* tensor = nullptr;
  PyTypeObject* parameter = nullptr;
  DLPackManagedTensorToPyObjectNoSync to_py = nullptr;
  py::object from_capsule;  // torch._C._from_dlpack, where the table has no to_py
};

TorchSide* MakeTorchSide() {
  auto* t = new TorchSide;  // never freed: outlives the interpreter's last plan call
  py::module_ torch = py::module_::import("torch");
  py::object tensor = torch.attr("Tensor");
  t->tensor = reinterpret_cast<PyTypeObject*>(tensor.ptr());
  t->parameter = reinterpret_cast<PyTypeObject*>(torch.attr("nn").attr("Parameter").ptr());
  py::object cap = py::getattr(tensor, "__dlpack_c_exchange_api__", py::none());
  if (!cap.is_none() && PyCapsule_IsValid(cap.ptr(), "dlpack_exchange_api")) {
    auto* header = static_cast<DLPackExchangeAPIHeader*>(
        PyCapsule_GetPointer(cap.ptr(), "dlpack_exchange_api"));
    while (header != nullptr && header->version.major != TB_DLPACK_MAJOR_VERSION) {
      header = header->prev_api;
    }
    if (header != nullptr) {
      t->to_py =
          reinterpret_cast<const DLPackExchangeAPI*>(header)->managed_tensor_to_py_object_no_sync;
    }
  }
  t->from_capsule = torch.attr("_C").attr("_from_dlpack");
  return t;
}

const TorchSide& Torch() {
  // Made under the GIL by the first caller: gil_safe_call_once_and_store rather than a
  // function-local static, whose guard would deadlock a second thread that waits for it with
  // the GIL held while the first runs Python (the import) and needs the GIL back.
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<TorchSide*> side;
  return *side.call_once_and_store_result(MakeTorchSide).get_stored();
}

// A torch tensor sharing the memory of `t` (no copy).
py::object ToTorch(const Tensor& t) {
  const TorchSide& torch = Torch();
  DLManagedTensorVersioned* managed = ExportDLPackVersioned(t);
  if (torch.to_py != nullptr) {
    void* out = nullptr;
    if (torch.to_py(managed, &out) != 0 || out == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(static_cast<PyObject*>(out));
  }
  return torch.from_capsule(py::reinterpret_steal<py::object>(NewCapsule(managed)));
}

py::object OutputToTorch(const Value& v) {
  if (v.is_tensor() && v.to_tensor().defined()) return ToTorch(v.to_tensor());
  if (v.tag() == Value::Tag::kTensorList) {
    py::list out;
    for (const Tensor& t : v.to_tensor_list()) out.append(ToTorch(t));
    return out;
  }
  return FromValue(v);
}

}  // namespace

void BindPlan(py::module_& m) {
  py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan",
                                          "A captured graph of table ops, built once, run in C++.")
      .def(py::init<>())
      .def("add_input", &Plan::AddInput, py::arg("name"))
      .def(
          "add_node",
          [](Plan& p, const std::string& op, const py::iterable& args, int num_outputs,
             std::string name) {
            return p.AddNode(op, ToArgs(args), num_outputs, std::move(name));
          },
          py::arg("op"), py::arg("args"), py::arg("num_outputs"), py::arg("name"))
      .def("set_outputs", [](Plan& p, const py::iterable& outs) { p.SetOutputs(ToArgs(outs)); })
      .def("expect_strides", &Plan::ExpectStrides, py::arg("value"), py::arg("strides"),
           "The strides the graph expects of a value: a result laid out otherwise is copied "
           "into them where the graph depends on the layout.")
      .def("set_value_bytes", &Plan::SetValueBytes, py::arg("value"), py::arg("bytes"),
           "The bytes a value's buffers take (0 for a view of another value): the plan sums "
           "them by liveness into peak_bytes.")
      .def("set_value_base", &Plan::SetValueBase, py::arg("value"), py::arg("base"),
           "``value`` is a view of ``base``'s memory: for peak_bytes, base's buffer stays alive "
           "until the last use of its views.")
      .def("finalize", &Plan::Finalize)
      .def(
          "run",
          [](const Plan& p, const py::iterable& inputs) {
            Stack in;
            for (auto x : inputs) in.push_back(ToValue(x));
            Stack out;
            {
              py::gil_scoped_release release;
              out = p.Run(std::move(in));
            }
            py::list result;
            for (const Value& v : out) result.append(FromValue(v));
            return result;
          },
          py::arg("inputs"), "Runs the plan on the inputs (the GIL is released while it runs).")
      .def(
          "run_torch",
          [](const Plan& p, py::list args, py::handle convert) {
            // Plain torch tensors (torch.Tensor, nn.Parameter) are imported here, zero-copy;
            // anything else goes through `convert` first. The list is emptied (the boxed calling
            // convention: the caller's references go, so inputs can be freed early).
            const TorchSide& torch = Torch();
            const Py_ssize_t n = PyList_GET_SIZE(args.ptr());
            Stack in;
            in.reserve(static_cast<size_t>(n));
            for (Py_ssize_t i = 0; i < n; ++i) {
              PyObject* x = PyList_GET_ITEM(args.ptr(), i);
              PyTypeObject* type = Py_TYPE(x);
              if (type == torch.tensor || type == torch.parameter) {
                in.emplace_back(TensorFromObject(x, py::none(), py::none()));
              } else {
                in.push_back(ToValue(convert(py::handle(x))));
              }
            }
            // Outputs that are inputs unchanged return the caller's very object (as the graph
            // says: its identity, version counter and autograd state are kept).
            const std::vector<int>& output_inputs = p.output_inputs();
            std::vector<py::object> same(output_inputs.size());
            for (size_t k = 0; k < output_inputs.size(); ++k) {
              if (output_inputs[k] >= 0 && output_inputs[k] < n) {
                same[k] = py::reinterpret_borrow<py::object>(
                    PyList_GET_ITEM(args.ptr(), output_inputs[k]));
              }
            }
            if (PyList_SetSlice(args.ptr(), 0, n, nullptr) != 0) throw py::error_already_set();
            Stack out;
            {
              py::gil_scoped_release release;
              out = p.Run(std::move(in));
            }
            py::list result(out.size());
            for (size_t i = 0; i < out.size(); ++i) {
              result[i] = same[i] ? std::move(same[i]) : OutputToTorch(out[i]);
            }
            return result;
          },
          py::arg("args"), py::arg("convert"),
          "Runs the plan on torch tensors and returns torch tensors sharing the results' memory "
          "(both ways zero-copy, in C++; an output that is an input unchanged is that input's own "
          "object); ``convert`` turns any other input into a plan input.")
      .def_property_readonly("num_nodes", &Plan::num_nodes)
      .def_property_readonly("num_slots", &Plan::num_slots)
      .def_property_readonly("num_values", &Plan::num_values)
      .def_property_readonly("peak_bytes", &Plan::peak_bytes,
                             "The most bytes alive at once during a run: the plan's own results "
                             "and the inputs given bytes (handed over by the caller, freed at "
                             "their last use), a buffer alive while any view of it is (by the "
                             "sizes given to set_value_bytes and set_value_base).")
      .def(
          "count",
          [](const Plan& p, const std::string& by) {
            for (ServedBy s : {ServedBy::kKernel, ServedBy::kComposite, ServedBy::kDecomposition,
                               ServedBy::kFallback}) {
              if (by == ServedByName(s)) return p.CountServedBy(s);
            }
            TB_THROW(ValueError) << "Plan.count: unknown path '" << by << "'";
          },
          py::arg("served_by"))
      .def("dump", &Plan::Dump)
      .def_property_readonly("restrides", &Plan::restrides,
                             "Results copied into the strides the graph expects, over all runs.")
      .def_property("profiling", &Plan::profiling, &Plan::SetProfiling,
                    "While True, each run times every node (turning it on clears the times).")
      .def(
          "node_times",
          [](const Plan& p) {
            py::list out;
            for (const Plan::NodeTime& t : p.NodeTimes()) {
              out.append(py::make_tuple(t.name, t.op, ServedByName(t.served_by), t.calls,
                                        t.total_ns, t.min_ns));
            }
            return out;
          },
          "Per node, in plan order: (node, op, served_by, calls, total_ns, min_ns) since profiling "
          "was turned on.");
}

}  // namespace tb::py
