// The eager path of tensorbridge.Tensor.__torch_dispatch__, in one C++ call per op:
// unwrap the arguments (tensorbridge.Tensor -> its Array, plain torch tensors -> zero-copy
// Arrays), bind them against the op's schema, run the kernel with the GIL released, and
// wrap the results as new tensorbridge.Tensors (in-place and out= ops return the very
// argument they wrote to).
#include <cstring>
#include <unordered_map>

#include "dispatch/op_table.h"
#include "py_common.h"

namespace tb::py {

Value ToValue(py::handle obj);  // ops.cc
py::object FromValue(const Value& v);

namespace {

struct FuncInfo {
  OpId op = 0;
  int mutated_index = -1;        // argument an in-place / out= op writes and returns
  std::string mutated_name;
  bool mutated_kwarg_only = false;
};

struct EagerState {
  py::object tensor_cls;     // tensorbridge.Tensor
  py::object make_wrapper;   // torch.Tensor._make_wrapper_subclass
  py::object torch_tensor;   // torch.Tensor
  py::dict torch_dtypes;     // "float32" -> torch.float32
  py::str array_attr{"_array"};
  py::str inner_attr{"_inner_cache"};
  std::unordered_map<PyObject*, FuncInfo> funcs;  // holds a reference to each func key
};

EagerState& State() {
  static EagerState* s = new EagerState();  // lives for the process (no teardown at exit)
  return *s;
}

const FuncInfo& Info(py::handle func) {
  EagerState& st = State();
  auto it = st.funcs.find(func.ptr());
  if (it != st.funcs.end()) return it->second;
  py::object schema = func.attr("_schema");
  std::string name = schema.attr("name").cast<std::string>();
  std::string overload = schema.attr("overload_name").cast<std::string>();
  std::string qualified = overload.empty() ? name : name + "." + overload;
  OpTable& table = OpTable::Global();
  FuncInfo info;
  info.op = table.Intern(qualified);
  py::list args = schema.attr("arguments");
  py::list returns = schema.attr("returns");
  bool returns_alias = returns.size() == 1 && !returns[0].attr("alias_info").is_none();
  for (size_t i = 0; i < args.size() && returns_alias; ++i) {
    py::object alias = args[i].attr("alias_info");
    if (!alias.is_none() && alias.attr("is_write").cast<bool>()) {
      info.mutated_index = static_cast<int>(i);
      info.mutated_name = args[i].attr("name").cast<std::string>();
      info.mutated_kwarg_only = args[i].attr("kwarg_only").cast<bool>();
      break;
    }
  }
  func.inc_ref();
  return st.funcs.emplace(func.ptr(), std::move(info)).first->second;
}

// Unwraps one argument. Returns false when a tensorbridge.Tensor without data (a tracer's
// stand-in) is met: the Python path handles tracing.
bool Unwrap(py::handle obj, Value* out) {
  EagerState& st = State();
  PyTypeObject* type = Py_TYPE(obj.ptr());
  if (PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(st.tensor_cls.ptr()))) {
    py::object arr = py::reinterpret_steal<py::object>(PyObject_GetAttr(obj.ptr(), st.array_attr.ptr()));
    if (!arr) throw py::error_already_set();
    if (arr.is_none()) return false;
    *out = Value(arr.cast<PyArray&>().tensor);
    return true;
  }
  if (PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(st.torch_tensor.ptr()))) {
    if (obj.attr("is_conj")().cast<bool>() || obj.attr("is_neg")().cast<bool>()) {
      obj = obj.attr("resolve_conj")().attr("resolve_neg")();
    }
    *out = Value(TensorFromObject(obj.attr("detach")(), py::none(), py::none()));
    return true;
  }
  const char* tp = type->tp_name;
  if (std::strcmp(tp, "torch.device") == 0) {
    std::string dev = py::str(obj).cast<std::string>();
    TB_CHECK(dev == "cpu", NotImplementedError)
        << "tensorbridge.Tensor lives on the CPU; got device " << dev;
    *out = Value(std::string("cpu"));
    return true;
  }
  if (std::strcmp(tp, "torch.layout") == 0 || std::strcmp(tp, "torch.memory_format") == 0) {
    *out = Value(py::str(obj).cast<std::string>().substr(6));
    return true;
  }
  if (PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr())) {
    // Lists of tensors (cat, index) may mix wrapped and plain tensors.
    auto seq = py::reinterpret_borrow<py::sequence>(obj);
    bool has_tensor = false;
    for (auto item : seq) {
      has_tensor |= PyObject_TypeCheck(item.ptr(), reinterpret_cast<PyTypeObject*>(st.torch_tensor.ptr()));
    }
    if (has_tensor) {
      bool any_none = false;
      std::vector<std::optional<Tensor>> items;
      for (auto item : seq) {
        if (item.is_none()) {
          any_none = true;
          items.emplace_back(std::nullopt);
          continue;
        }
        Value v;
        if (!Unwrap(item, &v)) return false;
        TB_CHECK(v.is_tensor(), TypeError) << "a list mixes tensors and " << v.type_name();
        items.emplace_back(v.to_tensor());
      }
      if (any_none) {
        *out = Value(std::move(items));
      } else {
        std::vector<Tensor> ts;
        for (auto& t : items) ts.push_back(*t);
        *out = Value(std::move(ts));
      }
      return true;
    }
  }
  *out = ToValue(obj);
  return true;
}

py::object Wrap(const Value& v) {
  EagerState& st = State();
  if (v.is_tensor()) {
    const Tensor& t = v.to_tensor();
    if (!t.defined()) return py::none();
    TB_CHECK(t.device().is_cpu(), NotImplementedError) << "a result on " << DeviceString(t.device());
    py::tuple shape(t.ndim()), strides(t.ndim());
    for (int64_t i = 0; i < t.ndim(); ++i) {
      shape[i] = t.shape()[i];
      strides[i] = t.strides()[i];
    }
    py::object dtype = st.torch_dtypes.attr("get")(std::string(DTypeName(t.dtype())));
    TB_CHECK(!dtype.is_none(), TypeError) << "dtype " << DTypeName(t.dtype()) << " has no torch equivalent";
    py::dict kw;
    kw["strides"] = strides;
    kw["dtype"] = dtype;
    kw["device"] = "cpu";
    py::object obj = st.make_wrapper(st.tensor_cls, shape, **kw);
    if (PyObject_SetAttr(obj.ptr(), st.array_attr.ptr(), py::cast(PyArray{t}).ptr()) != 0 ||
        PyObject_SetAttr(obj.ptr(), st.inner_attr.ptr(), Py_None) != 0) {
      throw py::error_already_set();
    }
    return obj;
  }
  if (v.tag() == Value::Tag::kTensorList) {
    py::list out;
    for (const auto& t : v.to_tensor_list()) out.append(Wrap(Value(t)));
    return out;
  }
  return FromValue(v);
}

}  // namespace

void BindEager(py::module_& m) {
  m.def("_eager_init", [](py::object tensor_cls, py::object torch_tensor, py::dict dtypes) {
    EagerState& st = State();
    st.tensor_cls = tensor_cls;
    st.torch_tensor = torch_tensor;
    st.make_wrapper = torch_tensor.attr("_make_wrapper_subclass");
    st.torch_dtypes = dtypes;
  });
  // Returns NotImplemented when a traced stand-in is among the arguments.
  m.def("_eager_dispatch", [](py::handle func, py::tuple args, py::dict kwargs) -> py::object {
    const FuncInfo& info = Info(func);
    Stack positional;
    positional.reserve(args.size());
    for (auto a : args) {
      Value v;
      if (!Unwrap(a, &v)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      positional.push_back(std::move(v));
    }
    std::vector<std::pair<std::string, Value>> keywords;
    for (auto [k, val] : kwargs) {
      Value v;
      if (!Unwrap(val, &v)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      keywords.emplace_back(k.cast<std::string>(), std::move(v));
    }
    Stack out;
    {
      py::gil_scoped_release release;
      out = OpTable::Global().CallWithArgs(info.op, std::move(positional), std::move(keywords));
    }
    if (info.mutated_index >= 0) {
      if (info.mutated_kwarg_only || kwargs.contains(info.mutated_name)) {
        return kwargs[py::str(info.mutated_name)];
      }
      return args[info.mutated_index];
    }
    if (out.size() == 1) return Wrap(out[0]);
    py::tuple result(out.size());
    for (size_t i = 0; i < out.size(); ++i) result[i] = Wrap(out[i]);
    return result;
  });
}

}  // namespace tb::py
