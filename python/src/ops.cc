// The op table from Python: call one op by its ATen name, list and explain ops, metrics.
#include "dispatch/op_table.h"
#include "py_common.h"

namespace tb::py {
namespace {

// torch.float32, numpy.dtype("float32") or "float32" -> DType; nullopt for other objects.
std::optional<DType> AsDType(py::handle obj) {
  std::string module = py::str(py::type::of(obj).attr("__module__")).cast<std::string>();
  std::string name;
  if (module == "torch" && std::string(Py_TYPE(obj.ptr())->tp_name) == "torch.dtype") {
    name = py::str(obj).cast<std::string>().substr(6);  // "torch.float32"
  } else if (module.rfind("numpy", 0) == 0 && py::hasattr(obj, "itemsize") &&
             py::hasattr(obj, "kind")) {
    name = py::str(obj).cast<std::string>();
  } else {
    return std::nullopt;
  }
  DType d;
  if (name == "float") name = "float32";
  if (name == "double") name = "float64";
  if (name == "long") name = "int64";
  if (name == "half") name = "float16";
  if (!DTypeFromName(name, &d)) {
    TB_THROW(TypeError) << "dtype " << name << " has no tensorbridge equivalent";
  }
  return d;
}

}  // namespace

Value ToValue(py::handle obj) {
  if (obj.is_none()) return Value();
  if (py::isinstance<PyArray>(obj)) return Value(obj.cast<PyArray&>().tensor);
  if (PyBool_Check(obj.ptr())) return Value(obj.cast<bool>());
  if (PyLong_Check(obj.ptr())) return Value(obj.cast<int64_t>());
  if (PyFloat_Check(obj.ptr())) return Value(obj.cast<double>());
  if (PyComplex_Check(obj.ptr())) {
    return Value(
        std::complex<double>(PyComplex_RealAsDouble(obj.ptr()), PyComplex_ImagAsDouble(obj.ptr())));
  }
  if (py::isinstance<py::str>(obj)) return Value(obj.cast<std::string>());
  if (auto d = AsDType(obj)) return Value(*d);
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    auto seq = py::reinterpret_borrow<py::sequence>(obj);
    bool all_int = true, all_float = true, all_bools = seq.size() > 0;
    for (auto item : seq) {
      const bool is_bool = PyBool_Check(item.ptr());
      all_bools &= is_bool;
      all_int &= PyLong_Check(item.ptr()) && !is_bool;
      all_float &= (PyFloat_Check(item.ptr()) || PyLong_Check(item.ptr())) && !is_bool;
    }
    if (all_bools) return Value(seq.cast<std::vector<bool>>());
    if (all_int) return Value(seq.cast<std::vector<int64_t>>());
    if (all_float) return Value(seq.cast<std::vector<double>>());
    bool all_bool = true, any_none = false;
    for (auto item : seq) {
      all_bool &= PyBool_Check(item.ptr());
      any_none |= item.is_none();
    }
    if (all_bool) return Value(seq.cast<std::vector<bool>>());
    if (any_none) {
      std::vector<std::optional<Tensor>> tensors;
      for (auto item : seq) {
        if (item.is_none())
          tensors.emplace_back(std::nullopt);
        else
          tensors.emplace_back(TensorFromObject(item, py::none(), py::none()));
      }
      return Value(std::move(tensors));
    }
    std::vector<Tensor> tensors;
    for (auto item : seq) tensors.push_back(TensorFromObject(item, py::none(), py::none()));
    return Value(std::move(tensors));
  }
  return Value(TensorFromObject(obj, py::none(), py::none()));
}

py::object FromValue(const Value& v) {
  switch (v.tag()) {
    case Value::Tag::kNone: return py::none();
    case Value::Tag::kBool: return py::bool_(v.to_bool());
    case Value::Tag::kInt: return py::int_(v.to_int());
    case Value::Tag::kDouble: return py::float_(v.to_double());
    case Value::Tag::kComplex: {
      const std::complex<double> c = v.to_complex();
      return py::reinterpret_steal<py::object>(PyComplex_FromDoubles(c.real(), c.imag()));
    }
    case Value::Tag::kTensor:
      if (!v.to_tensor().defined()) return py::none();  // an output masked off
      return WrapTensor(v.to_tensor());
    case Value::Tag::kTensorList: {
      py::list out;
      for (const auto& t : v.to_tensor_list()) out.append(WrapTensor(t));
      return out;
    }
    case Value::Tag::kIntList: return py::cast(v.to_int_list());
    case Value::Tag::kDoubleList: return py::cast(v.to_double_list());
    case Value::Tag::kString: return py::str(v.to_string());
    case Value::Tag::kBoolList: return py::cast(v.to_bool_list());
    case Value::Tag::kDType: return py::str(std::string(DTypeName(v.to_dtype())));
    case Value::Tag::kDevice: return py::str(DeviceString(v.to_device()));
    case Value::Tag::kOptionalTensorList: {
      py::list out;
      for (const auto& t : v.to_optional_tensor_list()) {
        out.append(t && t->defined() ? WrapTensor(*t) : py::none());
      }
      return out;
    }
    default: TB_THROW(TypeError) << "cannot return a " << v.type_name() << " to Python";
  }
}

namespace {

py::object Call(const std::string& op, const py::args& args, const py::kwargs& kwargs) {
  OpTable& table = OpTable::Global();
  auto id = table.Find(op);
  // An ATen op nobody registered a kernel for still has PyTorch's schema: the fallback can
  // serve it.
  if (!id && FindAtenSchema(op) != nullptr) id = table.Intern(op);
  if (!id) {
    TB_THROW(NotImplementedError) << op << " is not a known op (not in aten, and not defined "
                                  << "with register_kernel(schema=...)); tensorbridge.ops() "
                                  << "lists the ops with kernels";
  }
  Stack positional;
  positional.reserve(args.size());
  for (auto a : args) positional.push_back(ToValue(a));
  std::vector<std::pair<std::string, Value>> keywords;
  for (auto [k, v] : kwargs) keywords.emplace_back(k.cast<std::string>(), ToValue(v));
  Stack stack;
  {
    py::gil_scoped_release release;
    stack = table.CallWithArgs(*id, std::move(positional), std::move(keywords));
  }
  if (stack.size() == 1) return FromValue(stack[0]);
  py::tuple out(stack.size());
  for (size_t i = 0; i < stack.size(); ++i) out[i] = FromValue(stack[i]);
  return out;
}

// Python objects for a call's arguments: positional, and keyword-only ones by name.
std::pair<py::tuple, py::dict> ToPythonArgs(const OpInfo& op, const Stack& stack) {
  const FunctionSchema* schema = op.schema;
  py::list args;
  py::dict kwargs;
  for (size_t i = 0; i < stack.size(); ++i) {
    py::object obj = FromValue(stack[i]);
    if (schema != nullptr && i < schema->arguments().size() && schema->arguments()[i].kwarg_only) {
      kwargs[py::str(schema->arguments()[i].name)] = obj;
    } else {
      args.append(obj);
    }
  }
  return {py::tuple(args), kwargs};
}

// Puts a Python function's result on the stack as the op's results.
void FromPythonResult(const OpInfo& op, py::handle result, Stack& stack) {
  stack.clear();
  const FunctionSchema* schema = op.schema;
  const bool list_return =
      schema != nullptr && schema->returns().size() == 1 && schema->returns()[0].type.list;
  if (result.is_none() && schema != nullptr && schema->returns().empty()) return;
  if (py::isinstance<py::tuple>(result) && !list_return) {
    for (auto item : result) stack.push_back(ToValue(item));
    return;
  }
  stack.push_back(ToValue(result));
}

// A kernel written in Python: fn(*args, **kwargs) over tensorbridge.Arrays. The function
// object is kept for the life of the process (a lock-free caller may still reach it).
BoxedKernel PythonKernel(py::object fn, bool pass_op_name) {
  PyObject* f = fn.release().ptr();
  return [f, pass_op_name](const OpInfo& op, Stack& stack) {
    py::gil_scoped_acquire gil;
    auto [args, kwargs] = ToPythonArgs(op, stack);
    py::object result;
    try {
      result = pass_op_name ? py::reinterpret_borrow<py::object>(f)(op.qualified, args, kwargs)
                            : py::reinterpret_borrow<py::object>(f)(*args, **kwargs);
    } catch (py::error_already_set& e) {
      // A user kernel raising KernelDeclinedError declines the call, as a C++ kernel may.
      if (pass_op_name || !e.matches(KernelDeclinedError())) throw;
      throw Error(ErrorKind::kNotImplementedError, py::str(e.value()).cast<std::string>(), true);
    }
    FromPythonResult(op, result, stack);
  };
}

// What register_kernel returns: removing it restores the kernel that was there before.
struct PyRegistration {
  RegistrationHandle handle;
  std::string op;
  std::string where;
};

}  // namespace

void BindOps(py::module_& m) {
  py::class_<PyRegistration>(m, "KernelRegistration",
                             "A kernel registered from Python; remove() unregisters it.")
      .def("remove", [](PyRegistration& r) { r.handle.reset(); })
      .def_readonly("op", &PyRegistration::op)
      .def("__repr__", [](const PyRegistration& r) {
        return "<KernelRegistration " + r.op + " from " + r.where + ">";
      });
  m.def(
      "_register_python_kernel",
      [](const std::string& op, py::object fn, const std::string& where) {
        auto reg = std::make_unique<PyRegistration>();
        reg->op = OpName::Parse(op).ToString();
        reg->where = where;
        reg->handle = OpTable::Global().RegisterKernel(op, DeviceType::kCPU,
                                                       PythonKernel(std::move(fn), false), where);
        return reg;
      },
      py::arg("op"), py::arg("fn"), py::arg("where"));
  m.def(
      "_define",
      [](const std::string& schema) {
        return OpTable::Global().Info(OpTable::Global().Define(schema)).qualified;
      },
      py::arg("schema"), "Declares the schema of an op outside aten.");
  m.def(
      "_set_fallback_on_decline", [](bool on) { OpTable::Global().SetFallbackOnDecline(on); },
      py::arg("on"),
      "Whether a kernel that declines its input's dtype or device hands the call to the "
      "fallback (config.fallback 'allow' / 'warn') or raises KernelDeclinedError ('error').");
  m.def(
      "_set_fallback",
      [](py::object fn) {
        if (fn.is_none()) {
          OpTable::Global().SetFallback(nullptr);
        } else {
          OpTable::Global().SetFallback(PythonKernel(std::move(fn), true));
        }
      },
      py::arg("fn"), "Installs fn(op_name, args, kwargs) as the table's fallback (step 4).");
  m.def("_set_legal", [](const std::string& op, bool legal) {
    OpTable::Global().SetLegal(OpTable::Global().Intern(op), legal);
  });
  m.def("_composites", [] {
    OpTable& table = OpTable::Global();
    py::list out;
    for (OpId id : table.Composites()) {
      py::dict d;
      d["op"] = table.Info(id).qualified;
      d["legal"] = table.IsLegal(id);
      d["has_kernel"] = table.HasKernel(id, DeviceType::kCPU);
      out.append(d);
    }
    return out;
  });
  m.def("call", &Call, py::arg("op"),
        "Runs one op of the table by its ATen name on Arrays (or anything from_dlpack "
        "accepts), with arguments bound against PyTorch's schema (defaults filled, types "
        "checked); returns Arrays.");
  m.def(
      "schema",
      [](const std::string& op) -> py::object {
        OpTable& table = OpTable::Global();
        auto id = table.Find(op);
        const FunctionSchema* s = id ? table.Info(*id).schema : FindAtenSchema(op);
        if (s == nullptr) return py::none();
        return py::str(s->ToString());
      },
      py::arg("op"), "The schema tensorbridge holds for `op`, in PyTorch's text form.");
  m.def("_aten_schema_names", &AtenSchemaNames);
  m.def("_parse_schema",
        [](const std::string& text) { return FunctionSchema::Parse(text).ToString(); });
  m.def(
      "ops",
      [] {
        OpTable& table = OpTable::Global();
        py::list out;
        for (OpId id = 0; id < table.size(); ++id) {
          Resolution r = table.Resolve(id, DeviceType::kCPU);
          if (r.served_by == ServedBy::kMissing || r.served_by == ServedBy::kFallback) continue;
          py::dict d;
          d["op"] = table.Info(id).qualified;
          d["served_by"] = ServedByName(r.served_by);
          d["registered_at"] = r.where ? *r.where : std::string();
          out.append(d);
        }
        return out;
      },
      "Every op the table serves on the CPU, with how it is served.");
  m.def(
      "explain",
      [](const std::string& op) {
        OpTable& table = OpTable::Global();
        auto id = table.Find(op);
        if (!id)
          return op + ": not registered; a call would " +
                 (table.has_fallback() ? "take the fallback" : "fail");
        Resolution r = table.Resolve(*id, DeviceType::kCPU);
        return table.Info(*id).qualified + " on cpu: " + ServedByName(r.served_by) + ", " +
               r.Describe();
      },
      py::arg("op"), "Says which path the next call of `op` on the CPU takes, and why.");
  m.def(
      "has_kernel",
      [](const std::string& op) {
        OpTable& table = OpTable::Global();
        auto id = table.Find(op);
        return id.has_value() &&
               table.Resolve(*id, DeviceType::kCPU).served_by == ServedBy::kKernel;
      },
      py::arg("op"),
      "True when the next call of `op` on the CPU runs a kernel of the table's own (not a "
      "composite, a decomposition or the fallback).");
  m.def(
      "metrics",
      [] {
        OpTable& table = OpTable::Global();
        py::dict out;
        for (OpId id = 0; id < table.size(); ++id) {
          OpCounters c = table.Counters(id);
          if (c.calls == 0) continue;
          py::dict d;
          d["calls"] = c.calls;
          d["kernel"] = c.kernel;
          d["composite"] = c.composite;
          d["decomposition"] = c.decomposition;
          d["fallback"] = c.fallback;
          d["declined"] = c.declined;
          d["time_ns"] = c.time_ns;
          out[py::str(table.Info(id).qualified)] = d;
        }
        return out;
      },
      "Per-op counters: calls, and how many were served by kernel, composite, decomposition "
      "or fallback; declined: of the fallbacks, the calls whose kernel declined the input's "
      "dtype or device; time_ns while profiling is on.");
  m.def(
      "reset_metrics", [] { OpTable::Global().ResetCounters(); },
      "Sets every per-op counter of metrics() back to zero.");
  m.def(
      "set_profiling", [](bool on) { OpTable::Global().SetProfiling(on); }, py::arg("on"),
      "Turns timing of every table call on or off: while on, metrics() reports time_ns per op "
      "(the time spent in its calls).");
  m.def(
      "dump", [] { return OpTable::Global().Dump(); }, "The whole op table, as text.");
}

}  // namespace tb::py
