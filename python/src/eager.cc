// The eager path of tensorbridge.Tensor.__torch_dispatch__, in one C++ call per op:
// unwrap the arguments (tensorbridge.Tensor -> its Array, plain torch tensors -> zero-copy
// Arrays), bind them against the op's schema, run the kernel with the GIL released, and
// wrap the results as new tensorbridge.Tensors (in-place and out= ops return the very
// argument they wrote to).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "dispatch/op_table.h"
#include "py_common.h"
#include "storage_ref.h"
// After Python.h (py_common.h): PyMemberDef, for the `_array` slot's offset.
#include <structmember.h>

namespace tb::py {

Value ToValue(py::handle obj);  // ops.cc
py::object FromValue(const Value& v);

namespace {

struct FuncInfo {
  OpId op = 0;
  int mutated_index = -1;  // argument an in-place / out= op writes and returns
  std::string mutated_name;
  bool mutated_kwarg_only = false;
  // Changes its argument's shape, strides or memory (squeeze_, resize_, ...).
  bool metadata = false;
  // Its namespace goes to a Python handler (the collectives: c10d::, _c10d_functional::, ...).
  bool routed = false;
  // Returns a view of its first argument (view, t, slice, ...).
  bool view = false;
};

struct EagerState {
  py::object tensor_cls;         // tensorbridge.Tensor
  py::object make_wrapper;       // torch.Tensor._make_wrapper_subclass
  py::object default_dtype;      // torch.get_default_dtype
  py::object torch_tensor;       // torch.Tensor
  py::object parameter;          // torch.nn.Parameter
  py::object inference_enabled;  // torch.is_inference_mode_enabled
  py::object inference_guard;    // torch._C._InferenceMode: a guard object, (mode) -> guard
  py::object stand_in;  // f(tensor) -> bool: a tracer's tensor without memory (FakeTensor, ...)
  py::object traced;    // the Python path for traced stand-ins: f(func, args, kwargs)
  py::object metadata;  // the Python path of in-place metadata ops: f(func, args, kwargs)
  // Namespaces whose ops run torch's own implementation through a Python handler,
  // f(func, args, kwargs): the collectives of torch.distributed, whose process groups and
  // Work handles are opaque objects the table cannot bind.
  std::vector<std::string> routed_namespaces;
  py::object routed;
  std::array<py::object, kNumDTypes> torch_dtypes;  // DType -> torch.dtype (unset: none)
  py::str array_attr{"_array"};
  Py_ssize_t array_offset = 0;   // of tensorbridge.Tensor's `_array` slot in its instances
  py::object cpu;                // torch.device("cpu")
  py::tuple contiguous_kwnames;  // ("dtype", "device")
  py::tuple wrapper_kwnames;     // ("strides", "dtype", "device") for a vectorcall
  py::tuple strides_kwnames;     // ("strides",)
  std::unordered_map<PyObject*, FuncInfo> funcs;  // holds a reference to each func key
  // The libtorch-linked maker of wrappers (python/torch_device/wrapper.cc) where it was
  // loaded: (cls, ndim, sizes, strides or nullptr, torch.dtype, data, context, deleter) -> a
  // new reference whose storage is the memory at `data`, kept alive by `context` (a storage
  // reference, storage_ref.h) until torch calls `deleter(context)`; or nullptr with an
  // exception set. Unset: torch.Tensor._make_wrapper_subclass (a storage without memory).
  using MakeWrapperFn = PyObject* (*)(PyObject*, int64_t, const int64_t*, const int64_t*, PyObject*,
                                      void*, void*, void (*)(void*));
  MakeWrapperFn fast_wrapper = nullptr;
  PyTypeObject* array_type = nullptr;  // tensorbridge.Array (_C.Array)
  py::object rule_registry;            // torch._library.simple_registry.singleton
};

// Stage timers of the eager path, read by benchmarks/bench_eager.py --breakdown through
// _eager_timing(). Off by default (one branch per stage when off); the counters change only
// while the GIL is held.
enum Stage { kEntry, kUnwrap, kTable, kWrapMake, kWrapAttach, kTotal, kNumStages };
constexpr const char* kStageNames[kNumStages] = {"entry",     "unwrap",      "table",
                                                 "wrap_make", "wrap_attach", "total"};
bool g_timing = false;
std::array<int64_t, kNumStages> g_stage_ns{};
int64_t g_timed_ops = 0;

int64_t Now() {
  if (!g_timing) return 0;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Adds the time since `*since` to `stage` and restarts `*since`.
void Lap(Stage stage, int64_t* since) {
  if (!g_timing) return;
  int64_t now = Now();
  g_stage_ns[stage] += now - *since;
  *since = now;
}

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
  // In-place ops that change the tensor object itself (its shape, strides or memory) rather
  // than its data: the wrapper's own metadata must change too, which only Python can do.
  static const char* const kMetadataOps[] = {
      "aten::as_strided_", "aten::squeeze_",  "aten::unsqueeze_", "aten::t_",
      "aten::transpose_",  "aten::swapdims_", "aten::swapaxes_",  "aten::resize_",
      "aten::resize_as_",  "aten::set_"};
  for (const char* m : kMetadataOps) info.metadata |= name == m;
  const std::string ns = name.substr(0, name.find("::"));
  for (const std::string& r : st.routed_namespaces) info.routed |= ns == r;
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
  info.view = returns_alias && info.mutated_index < 0;
  // The attribute reads above may run Python code and let another thread fill the entry
  // first: the reference is taken once, by the thread that inserts.
  auto [it_new, inserted] = st.funcs.emplace(func.ptr(), std::move(info));
  if (inserted) func.inc_ref();
  return it_new->second;
}

// An exact Python int that fits int64 as `*v`; false (no error set) for a larger one.
bool ExactInt(PyObject* obj, int64_t* v) {
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow != 0) return false;
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  *v = static_cast<int64_t>(x);
  return true;
}

// The Tensor of an Array object. An exact tensorbridge.Array is read in place, without
// pybind11's type caster and its registry lookups; anything else goes through the caster
// (whose TypeError names what it got).
const Tensor& ArrayTensor(py::handle arr) {
  if (Py_TYPE(arr.ptr()) == State().array_type) {
    auto* inst = reinterpret_cast<py::detail::instance*>(arr.ptr());
    void* value =
        inst->simple_layout ? inst->simple_value_holder[0] : inst->nonsimple.values_and_holders[0];
    if (value != nullptr) return static_cast<PyArray*>(value)->tensor;
  }
  return arr.cast<PyArray&>().tensor;
}

// Unwraps one argument. Returns false when a tensorbridge.Tensor without data (a tracer's
// stand-in) is met: the Python path handles tracing.
bool Unwrap(py::handle obj, Value* out) {
  EagerState& st = State();
  PyTypeObject* type = Py_TYPE(obj.ptr());
  if (PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(st.tensor_cls.ptr()))) {
    // `_array` is a slot of tensorbridge.Tensor: read at its offset, without the attribute
    // lookup through torch.Tensor's class hierarchy (an unset slot takes the generic lookup,
    // whose AttributeError names it).
    PyObject* found = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj.ptr()) +
                                                    st.array_offset);  // borrowed
    py::object arr =
        found != nullptr
            ? py::reinterpret_borrow<py::object>(found)
            : py::reinterpret_steal<py::object>(PyObject_GetAttr(obj.ptr(), st.array_attr.ptr()));
    if (!arr) throw py::error_already_set();
    if (arr.is_none()) return false;
    *out = Value(ArrayTensor(arr));
    return true;
  }
  if (PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(st.torch_tensor.ptr()))) {
    // Under torch.compile's tracing, plain arguments are fake or functional tensors: they have
    // no memory to bind, and the op goes to the traced path with the stand-ins (as a traced
    // tensorbridge.Tensor does). Only subclasses can be such stand-ins.
    if (type != reinterpret_cast<PyTypeObject*>(st.torch_tensor.ptr()) &&
        type != reinterpret_cast<PyTypeObject*>(st.parameter.ptr()) &&
        st.stand_in(obj).cast<bool>()) {
      return false;
    }
    if (obj.attr("is_conj")().cast<bool>() || obj.attr("is_neg")().cast<bool>()) {
      obj = obj.attr("resolve_conj")().attr("resolve_neg")();
    }
    *out = Value(TensorFromObject(obj.attr("detach")(), py::none(), py::none()));
    return true;
  }
  // Plain numbers and None, the commonest other arguments, without ToValue's type tests (an
  // int beyond int64 goes on to ToValue, whose error names it).
  if (obj.is_none()) {
    *out = Value();
    return true;
  }
  if (PyFloat_CheckExact(obj.ptr())) {
    *out = Value(PyFloat_AS_DOUBLE(obj.ptr()));
    return true;
  }
  if (PyLong_CheckExact(obj.ptr())) {
    int64_t v = 0;
    if (ExactInt(obj.ptr(), &v)) {
      *out = Value(v);
      return true;
    }
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
    bool has_tensor = false, all_int = PySequence_Fast_GET_SIZE(obj.ptr()) > 0;
    for (auto item : seq) {
      has_tensor |=
          PyObject_TypeCheck(item.ptr(), reinterpret_cast<PyTypeObject*>(st.torch_tensor.ptr()));
      all_int = all_int && PyLong_CheckExact(item.ptr());
    }
    if (all_int) {  // sizes, dims, strides: straight to an int list
      std::vector<int64_t> ints(PySequence_Fast_GET_SIZE(obj.ptr()));
      PyObject** items = PySequence_Fast_ITEMS(obj.ptr());
      bool exact = true;
      for (size_t i = 0; i < ints.size() && exact; ++i) exact = ExactInt(items[i], &ints[i]);
      if (exact) {
        *out = Value(std::move(ints));
        return true;
      }
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

py::object NewInt(int64_t v) {
  PyObject* o = PyLong_FromLongLong(v);
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// Whether `dtype` is torch.get_default_dtype().
bool IsDefaultDtype(const py::object& dtype) {
  PyObject* d = PyObject_CallNoArgs(State().default_dtype.ptr());
  if (d == nullptr) throw py::error_already_set();
  Py_DECREF(d);  // torch.dtype objects are interned: the identity is the comparison
  return d == dtype.ptr();
}

// Sets a new wrapper's `_array` to an Array over `t` and returns the wrapper.
py::object Attach(py::object obj, const Tensor& t, int64_t* since) {
  // The new object's `_array` slot is empty: the reference moves into it.
  PyObject** slot =
      reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj.ptr()) + State().array_offset);
  Py_XSETREF(*slot, py::cast(PyArray{t}).release().ptr());
  Lap(kWrapAttach, since);
  return obj;
}

// A new wrapper of class `cls` over `t`'s memory (its storage), made by the libtorch-linked
// maker (which must be loaded); `dtype` is t's torch.dtype.
py::object MakeFastWrapper(PyObject* cls, const Tensor& t, const py::object& dtype,
                           bool contiguous) {
  py::object obj = py::reinterpret_steal<py::object>(
      State().fast_wrapper(cls, static_cast<int64_t>(t.ndim()), t.shape().data(),
                           contiguous ? nullptr : t.strides().data(), dtype.ptr(), t.data(),
                           NewStorageRef(t), &ReleaseStorageRef));
  if (!obj) throw py::error_already_set();
  return obj;
}

// A new tensorbridge.Tensor over `t`: made by the libtorch-linked maker where it is loaded,
// otherwise by torch.Tensor._make_wrapper_subclass called with one vectorcall (no kwargs
// dict); the Array is set as its `_array`.
py::object Wrap(const Value& v) {
  EagerState& st = State();
  if (v.is_tensor()) {
    const Tensor& t = v.to_tensor();
    if (!t.defined()) return py::none();
    TB_CHECK(t.device().is_cpu(), NotImplementedError)
        << "a result on " << DeviceString(t.device());
    const py::object& dtype = st.torch_dtypes[static_cast<int>(t.dtype())];
    TB_CHECK(dtype, TypeError) << "dtype " << DTypeName(t.dtype()) << " has no torch equivalent";
    int64_t since = Now();
    const auto nd = static_cast<Py_ssize_t>(t.ndim());
    // Strides are passed only where they differ from torch's contiguous ones (fewer
    // arguments for torch to parse).
    bool contiguous = true;
    int64_t expected = 1;
    for (Py_ssize_t i = nd - 1; i >= 0; --i) {
      contiguous &= t.strides()[i] == expected;
      expected *= std::max<int64_t>(t.shape()[i], 1);
    }
    py::object obj;
    if (st.fast_wrapper != nullptr) {
      obj = MakeFastWrapper(st.tensor_cls.ptr(), t, dtype, contiguous);
      Lap(kWrapMake, &since);
      return Attach(std::move(obj), t, &since);
    }
    py::tuple shape(nd);
    for (Py_ssize_t i = 0; i < nd; ++i) {
      PyTuple_SET_ITEM(shape.ptr(), i, NewInt(t.shape()[i]).release().ptr());
    }
    // torch's defaults (the default dtype, device cpu, contiguous strides) are left out: each
    // keyword costs torch's argument parser, the first one a third of the call.
    const bool default_dtype = IsDefaultDtype(dtype);
    if (contiguous && default_dtype) {
      PyObject* call_args[] = {st.tensor_cls.ptr(), shape.ptr()};
      obj = py::reinterpret_steal<py::object>(
          PyObject_Vectorcall(st.make_wrapper.ptr(), call_args, 2, nullptr));
    } else if (contiguous) {
      PyObject* call_args[] = {st.tensor_cls.ptr(), shape.ptr(), dtype.ptr(), st.cpu.ptr()};
      obj = py::reinterpret_steal<py::object>(
          PyObject_Vectorcall(st.make_wrapper.ptr(), call_args, 2, st.contiguous_kwnames.ptr()));
    } else {
      py::tuple strides(nd);
      for (Py_ssize_t i = 0; i < nd; ++i) {
        PyTuple_SET_ITEM(strides.ptr(), i, NewInt(t.strides()[i]).release().ptr());
      }
      PyObject* call_args[] = {st.tensor_cls.ptr(), shape.ptr(), strides.ptr(), dtype.ptr(),
                               st.cpu.ptr()};
      obj = py::reinterpret_steal<py::object>(
          PyObject_Vectorcall(st.make_wrapper.ptr(), call_args, 2,
                              default_dtype ? st.strides_kwnames.ptr() : st.wrapper_kwnames.ptr()));
    }
    if (!obj) throw py::error_already_set();
    Lap(kWrapMake, &since);
    return Attach(std::move(obj), t, &since);
  }
  if (v.tag() == Value::Tag::kTensorList) {
    py::list out;
    for (const auto& t : v.to_tensor_list()) out.append(Wrap(Value(t)));
    return out;
  }
  return FromValue(v);
}

// The eager path of one op. Returns NotImplemented when a traced stand-in is among the
// arguments.
py::object EagerDispatch(py::handle func, py::handle args_obj, py::handle kwargs_obj) {
  int64_t since = Now();
  const FuncInfo& info = Info(func);
  auto args = py::reinterpret_borrow<py::tuple>(args_obj);
  Stack positional;
  positional.reserve(args.size());
  for (auto a : args) {
    Value v;
    if (!Unwrap(a, &v)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    positional.push_back(std::move(v));
  }
  std::vector<std::pair<std::string, Value>> keywords;
  const bool has_kwargs = !kwargs_obj.is_none() && PyDict_Size(kwargs_obj.ptr()) > 0;
  if (has_kwargs) {
    for (auto [k, val] : py::reinterpret_borrow<py::dict>(kwargs_obj)) {
      Value v;
      if (!Unwrap(val, &v)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      keywords.emplace_back(k.cast<std::string>(), std::move(v));
    }
  }
  Lap(kUnwrap, &since);
  Stack out;
  {
    py::gil_scoped_release release;
    out = OpTable::Global().CallWithArgs(info.op, std::move(positional), std::move(keywords));
  }
  Lap(kTable, &since);
  if (info.mutated_index >= 0) {
    if (has_kwargs) {
      auto kwargs = py::reinterpret_borrow<py::dict>(kwargs_obj);
      if (info.mutated_kwarg_only || kwargs.contains(info.mutated_name)) {
        return kwargs[py::str(info.mutated_name)];
      }
    }
    return args[info.mutated_index];
  }
  if (out.empty()) return py::none();  // a schema returning () (aten::_linalg_check_errors)
  if (info.view && out.size() == 1 && args.size() > 0) {
    // A view of a normal tensor is a normal tensor, also in inference mode (torch builds
    // views with their base's dispatch keys): its wrapper is made outside inference mode,
    // where autograd can give it its base's version counter.
    EagerState& st = State();
    if (PyObject_IsTrue(st.inference_enabled().ptr()) &&
        !PyObject_IsTrue(args[0].attr("is_inference")().ptr())) {
      py::object guard = st.inference_guard(false);
      return Wrap(out[0]);
    }
  }
  if (out.size() == 1) return Wrap(out[0]);
  py::tuple result(out.size());
  for (size_t i = 0; i < out.size(); ++i) result[i] = Wrap(out[i]);
  return result;
}

// tensorbridge.Tensor.__torch_dispatch__ itself: ([cls,] func, types, args=(), kwargs=None). A
// plain CPython fast-call function, as it runs once per op. Ops on traced stand-ins go to the
// Python path (_traced_dispatch).
PyObject* TorchDispatch(PyObject* /*self*/, PyObject* const* argv, Py_ssize_t nargs,
                        PyObject* kwnames) {
  try {
    const int64_t start = Now();
    static const char* const kNames[] = {"cls", "func", "types", "args", "kwargs"};
    PyObject* bound[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
    // The class comes first where the function is called as a classmethod; torch calls it
    // through the instance, where it is a plain builtin (no bound method made per op):
    // (func, types, args, kwargs). An op is never a type.
    const Py_ssize_t first = nargs > 0 && PyType_Check(argv[0]) ? 0 : 1;
    if (nargs + first > 5) throw py::type_error("__torch_dispatch__ takes at most 5 arguments");
    for (Py_ssize_t i = 0; i < nargs; ++i) bound[first + i] = argv[i];
    const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; ++k) {
      const char* name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
      if (name == nullptr) throw py::error_already_set();
      int slot = -1;
      for (int j = 0; j < 5; ++j) slot = std::strcmp(name, kNames[j]) == 0 ? j : slot;
      if (slot < 0 || bound[slot] != nullptr) {
        throw py::type_error(std::string("__torch_dispatch__: unexpected or repeated argument '") +
                             name + "'");
      }
      bound[slot] = argv[nargs + k];
    }
    if (bound[1] == nullptr || bound[2] == nullptr) {
      throw py::type_error("__torch_dispatch__ needs func and types");
    }
    py::tuple empty;
    py::handle args = bound[3] != nullptr ? py::handle(bound[3]) : py::handle(empty);
    py::handle kwargs = bound[4] != nullptr ? py::handle(bound[4]) : py::handle(Py_None);
    TB_CHECK(PyTuple_Check(args.ptr()), TypeError) << "__torch_dispatch__: args must be a tuple";
    TB_CHECK(kwargs.is_none() || PyDict_Check(kwargs.ptr()), TypeError)
        << "__torch_dispatch__: kwargs must be a dict or None";
    py::object out;
    const FuncInfo& info = Info(bound[1]);
    if (info.routed) {
      out =
          State().routed(py::handle(bound[1]), args,
                         kwargs.is_none() ? py::dict() : py::reinterpret_borrow<py::dict>(kwargs));
      return out.release().ptr();
    }
    if (info.metadata) {
      out = State().metadata(
          py::handle(bound[1]), args,
          kwargs.is_none() ? py::dict() : py::reinterpret_borrow<py::dict>(kwargs));
      return out.release().ptr();
    }
    if (g_timing) g_stage_ns[kEntry] += Now() - start;
    out = EagerDispatch(bound[1], args, kwargs);
    if (g_timing) {
      g_stage_ns[kTotal] += Now() - start;
      ++g_timed_ops;
    }
    if (out.ptr() == Py_NotImplemented) {
      out =
          State().traced(py::handle(bound[1]), args,
                         kwargs.is_none() ? py::dict() : py::reinterpret_borrow<py::dict>(kwargs));
    }
    return out.release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// torch._library.simple_registry.find_torch_dispatch_rule(op, cls), which torch calls from C++
// before every __torch_dispatch__ of a tensor subclass, in C++: the rule registered for
// `cls` on `op` (torch.library.register_torch_dispatch), or None. Ops without an entry in
// the registry have no rule; the original makes an empty entry for them on the way (three
// Python calls per op), this answers None without one. Ops with an entry look `cls` up in
// their holder's dict, as the holder's find() does.
PyObject* FindTorchDispatchRule(PyObject* /*self*/, PyObject* const* argv, Py_ssize_t nargs) {
  try {
    TB_CHECK(nargs == 2, TypeError) << "find_torch_dispatch_rule(op, torch_dispatch_class)";
    EagerState& st = State();
    TB_CHECK(st.rule_registry, RuntimeError)
        << "_find_torch_dispatch_rule: no registry set (_set_dispatch_rule_registry)";
    static PyObject* const kQualname = PyUnicode_InternFromString("__qualname__");
    static PyObject* const kData = PyUnicode_InternFromString("_data");
    static PyObject* const kRules = PyUnicode_InternFromString("torch_dispatch_rules");
    static PyObject* const kFind = PyUnicode_InternFromString("find");
    py::object name = py::reinterpret_steal<py::object>(PyObject_GetAttr(argv[0], kQualname));
    if (!name) throw py::error_already_set();
    py::object data =
        py::reinterpret_steal<py::object>(PyObject_GetAttr(st.rule_registry.ptr(), kData));
    if (!data) throw py::error_already_set();
    TB_CHECK(PyDict_Check(data.ptr()), TypeError) << "simple_registry.singleton._data: not a dict";
    PyObject* entry = PyDict_GetItemWithError(data.ptr(), name.ptr());  // borrowed
    if (entry == nullptr) {
      if (PyErr_Occurred()) throw py::error_already_set();
      Py_RETURN_NONE;
    }
    py::object rules = py::reinterpret_steal<py::object>(PyObject_GetAttr(entry, kRules));
    if (!rules) throw py::error_already_set();
    // The holder's find(cls) is its dict's get(cls) (checked when this was installed).
    py::object by_class = py::reinterpret_steal<py::object>(PyObject_GetAttr(rules.ptr(), kData));
    if (!by_class) throw py::error_already_set();
    if (PyDict_CheckExact(by_class.ptr())) {
      PyObject* rule = PyDict_GetItemWithError(by_class.ptr(), argv[1]);  // borrowed
      if (rule == nullptr && PyErr_Occurred()) throw py::error_already_set();
      return Py_NewRef(rule != nullptr ? rule : Py_None);
    }
    PyObject* call_args[] = {rules.ptr(), argv[1]};
    return PyObject_VectorcallMethod(kFind, call_args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// ---- the C functions of the Python-key kernels (python/torch_device/python_key.cc), which
// take ops on tensorbridge.Tensors straight from torch's dispatcher to the table.

// The Tensor of a tensorbridge.Tensor's `_array`, or nullptr where the slot holds no Array (a
// traced stand-in's None, unset). Reads pointers only, without the GIL: the caller holds the
// tensor, whose slot keeps the Array alive.
const Tensor* CArrayTensor(PyObject* tensor) {
  PyObject* arr =
      *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(tensor) + State().array_offset);
  if (arr == nullptr || Py_TYPE(arr) != State().array_type) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(arr);
  void* value =
      inst->simple_layout ? inst->simple_value_holder[0] : inst->nonsimple.values_and_holders[0];
  return value != nullptr ? &static_cast<PyArray*>(value)->tensor : nullptr;
}

// Sets a new wrapper's `_array` to an Array over `*t`, with the GIL held. 0, or -1 with a
// Python exception set.
int CAttach(PyObject* wrapper, const Tensor* t) {
  try {
    int64_t since = Now();
    Attach(py::reinterpret_borrow<py::object>(wrapper), *t, &since);
    return 0;
  } catch (...) {
    py::detail::try_translate_exceptions();
    return -1;
  }
}

// Sets `to`'s `_array` (a new wrapper's) to `from`'s Array, with the GIL held: a detached copy
// of `from` shares its Array, as it shares its memory.
void CShareArray(PyObject* from, PyObject* to) {
  const Py_ssize_t offset = State().array_offset;
  PyObject* arr = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(from) + offset);
  PyObject** slot = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(to) + offset);
  Py_XINCREF(arr);
  Py_XSETREF(*slot, arr);
}

PyMethodDef kFindRuleDef = {
    "_find_torch_dispatch_rule",
    reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(FindTorchDispatchRule)),
    METH_FASTCALL,
    "_find_torch_dispatch_rule(op, torch_dispatch_class): "
    "torch._library.simple_registry.find_torch_dispatch_rule without Python frames."};

PyMethodDef kTorchDispatchDef = {
    "_torch_dispatch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(TorchDispatch)),
    METH_FASTCALL | METH_KEYWORDS,
    "_torch_dispatch(cls, func, types, args=(), kwargs=None): tensorbridge.Tensor's "
    "__torch_dispatch__."};

}  // namespace

void BindEager(py::module_& m) {
  m.def("_eager_init", [](py::object tensor_cls, py::object torch_tensor, py::dict dtypes,
                          py::object traced, py::object metadata, py::object stand_in) {
    EagerState& st = State();
    st.tensor_cls = tensor_cls;
    // The `_array` slot's member descriptor gives its offset in the instance.
    PyObject* descr = PyDict_GetItemString(
        reinterpret_cast<PyTypeObject*>(tensor_cls.ptr())->tp_dict, "_array");  // borrowed
    TB_CHECK(descr != nullptr && Py_TYPE(descr) == &PyMemberDescr_Type, TypeError)
        << "tensorbridge.Tensor must declare __slots__ = ('_array',)";
    const PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descr)->d_member;
    TB_CHECK(member->type == T_OBJECT_EX, TypeError)
        << "tensorbridge.Tensor._array: not an object slot";
    st.array_offset = member->offset;
    st.array_type = reinterpret_cast<PyTypeObject*>(py::type::of<PyArray>().ptr());
    st.torch_tensor = torch_tensor;
    st.parameter = py::module_::import("torch").attr("nn").attr("Parameter");
    st.inference_enabled = py::module_::import("torch").attr("is_inference_mode_enabled");
    st.inference_guard = py::module_::import("torch").attr("_C").attr("_InferenceMode");
    st.stand_in = stand_in;
    st.make_wrapper = torch_tensor.attr("_make_wrapper_subclass");
    st.default_dtype = py::module_::import("torch").attr("get_default_dtype");
    st.traced = traced;
    st.metadata = metadata;
    for (auto [name, dtype] : dtypes) {
      DType d;
      if (DTypeFromName(name.cast<std::string>(), &d)) {
        st.torch_dtypes[static_cast<int>(d)] = py::reinterpret_borrow<py::object>(dtype);
      }
    }
    st.wrapper_kwnames = py::make_tuple("strides", "dtype", "device");
    st.contiguous_kwnames = py::make_tuple("dtype", "device");
    st.strides_kwnames = py::make_tuple("strides");
    st.cpu = py::module_::import("torch").attr("device")("cpu");
  });
  // Ops of these namespaces skip the table and go to `handler(func, args, kwargs)`. Set once,
  // at import, before any op of those namespaces is seen (FuncInfo is cached per op).
  m.def("_eager_route", [](std::vector<std::string> namespaces, py::object handler) {
    EagerState& st = State();
    st.routed_namespaces = std::move(namespaces);
    st.routed = std::move(handler);
    for (auto& entry : st.funcs) Py_DECREF(entry.first);  // the references Info() took
    st.funcs.clear();
  });
  // The stage timers: _eager_timing(on) switches them and returns the nanoseconds summed per
  // stage since the last call ("ops": the ops timed), then zeroes them.
  m.def("_eager_timing", [](bool on) {
    py::dict d;
    for (int i = 0; i < kNumStages; ++i) d[kStageNames[i]] = g_stage_ns[i];
    d["ops"] = g_timed_ops;
    g_stage_ns.fill(0);
    g_timed_ops = 0;
    g_timing = on;
    return d;
  });
  // The libtorch-linked maker of result wrappers: the address of tb_torch_make_wrapper
  // (python/torch_device/wrapper.cc), or 0 for torch.Tensor._make_wrapper_subclass. Returns
  // whether a maker was set before.
  m.def("_eager_fast_wrapper", [](uintptr_t address) {
    EagerState& st = State();
    const bool was = st.fast_wrapper != nullptr;
    st.fast_wrapper = reinterpret_cast<EagerState::MakeWrapperFn>(address);
    return was;
  });
  // tensorbridge.Tensor.__new__'s maker: a new wrapper of class `cls` over `array` (set as
  // its `_array`), with the array's memory as its storage; None where the libtorch-linked
  // maker is not loaded (then torch.Tensor._make_wrapper_subclass makes it, without memory).
  m.def("_eager_wrap_array", [](py::handle cls, py::handle array) -> py::object {
    EagerState& st = State();
    if (st.fast_wrapper == nullptr) return py::none();
    TB_CHECK(Py_TYPE(array.ptr()) == st.array_type, TypeError)
        << "expected a tensorbridge.Array, got " << Py_TYPE(array.ptr())->tp_name;
    const Tensor& t = array.cast<const PyArray&>().tensor;
    TB_CHECK(t.device().is_cpu(), ValueError)
        << "tensorbridge.Tensor computes on the CPU; this array is on " << DeviceString(t.device());
    const py::object& dtype = st.torch_dtypes[static_cast<int>(t.dtype())];
    TB_CHECK(dtype, TypeError) << "dtype " << DTypeName(t.dtype()) << " has no torch equivalent";
    py::object obj = MakeFastWrapper(cls.ptr(), t, dtype, /*contiguous=*/false);
    PyObject** slot =
        reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj.ptr()) + st.array_offset);
    Py_XSETREF(*slot, py::reinterpret_borrow<py::object>(array).release().ptr());
    return obj;
  });
  // The addresses of CArrayTensor, CAttach and CShareArray, for the Python-key kernels.
  m.def("_eager_c_api", [] {
    return py::make_tuple(reinterpret_cast<uintptr_t>(&CArrayTensor),
                          reinterpret_cast<uintptr_t>(&CAttach),
                          reinterpret_cast<uintptr_t>(&CShareArray));
  });
  m.def("_eager_dispatch", [](py::handle func, py::handle args, py::handle kwargs) {
    return EagerDispatch(func, args, kwargs);
  });
  py::object dispatch = py::reinterpret_steal<py::object>(
      PyCFunction_NewEx(&kTorchDispatchDef, nullptr, m.attr("__name__").ptr()));
  if (!dispatch) throw py::error_already_set();
  m.attr("_torch_dispatch") = dispatch;
  // The registry _find_torch_dispatch_rule reads (torch._library.simple_registry.singleton).
  m.def("_set_dispatch_rule_registry",
        [](py::object registry) { State().rule_registry = std::move(registry); });
  py::object find_rule = py::reinterpret_steal<py::object>(
      PyCFunction_NewEx(&kFindRuleDef, nullptr, m.attr("__name__").ptr()));
  if (!find_rule) throw py::error_already_set();
  m.attr("_find_torch_dispatch_rule") = find_rule;
}

}  // namespace tb::py
