// tensorbridge._C.Plan: building and running captured graphs from Python.
#include "bridge/alloc_stats.h"
#include "dispatch/plan.h"
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

std::vector<Plan::Arg> ToArgs(py::iterable args) {
  std::vector<Plan::Arg> out;
  for (auto a : args) out.push_back(ToArg(a));
  return out;
}

}  // namespace

void BindPlan(py::module_& m) {
  m.def("storage_allocations", [] {
    AllocationStats s = StorageAllocations();
    py::dict d;
    d["count"] = s.count;
    d["bytes"] = s.bytes;
    return d;
  }, "Buffers tensorbridge has allocated in this process (count, bytes): a plan run's share is "
     "the difference around it.");
  py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan", "A captured graph of table ops, built once, run in C++.")
      .def(py::init<>())
      .def("add_input", &Plan::AddInput, py::arg("name"))
      .def("add_node", [](Plan& p, const std::string& op, py::iterable args, int num_outputs,
                          std::string name) {
        return p.AddNode(op, ToArgs(args), num_outputs, std::move(name));
      }, py::arg("op"), py::arg("args"), py::arg("num_outputs"), py::arg("name"))
      .def("set_outputs", [](Plan& p, py::iterable outs) { p.SetOutputs(ToArgs(outs)); })
      .def("finalize", &Plan::Finalize)
      .def("run", [](const Plan& p, py::iterable inputs) {
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
      }, py::arg("inputs"), "Runs the plan on the inputs (the GIL is released while it runs).")
      .def_property_readonly("num_nodes", &Plan::num_nodes)
      .def_property_readonly("num_slots", &Plan::num_slots)
      .def_property_readonly("num_values", &Plan::num_values)
      .def("count", [](const Plan& p, const std::string& by) {
        for (ServedBy s : {ServedBy::kKernel, ServedBy::kComposite, ServedBy::kDecomposition,
                           ServedBy::kFallback}) {
          if (by == ServedByName(s)) return p.CountServedBy(s);
        }
        TB_THROW(ValueError) << "Plan.count: unknown path '" << by << "'";
      }, py::arg("served_by"))
      .def("dump", &Plan::Dump);
}

}  // namespace tb::py
