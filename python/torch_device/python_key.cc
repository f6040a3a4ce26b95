// Kernels on torch's Python dispatch key that run ops on tensorbridge.Tensors in C++.
//
// A tensorbridge.Tensor carries torch's Python key, so every op on it reaches torch's Python
// fallback (PythonFallbackKernel.cpp), which takes the GIL, boxes the arguments into Python
// objects and calls __torch_dispatch__. For each aten op the table serves with a kernel, this
// library registers a boxed kernel on the Python key in its place. When every argument that
// has the Python key is a tensorbridge.Tensor with data (its PyObject, read from the
// TensorImpl's slot, is of exactly that class), no TorchDispatchMode is active and no
// torch_dispatch rule is registered for the class, the kernel converts torch's stack to table
// values (the Array behind each tensorbridge.Tensor, zero-copy views of plain CPU tensors),
// runs the table's kernel without the GIL and makes the result wrappers in C++ (the GIL held
// only for their Python objects). Every other call does exactly what torch's Python fallback
// does: the top mode's or the subclass's __torch_dispatch__, so FakeTensor, FunctionalTensor,
// DTensor and other subclasses behave as before. Autograd sits above the Python key and
// records as before. Functional ops and aten::linear also have kernels above autograd (on the
// PythonTLSSnapshot key) for calls where autograd has nothing to record.
//
// It links libtorch, libtorch_python and the tensorbridge core (one torch release's C++ ABI).
// tensorbridge/_tensor.py loads it with ctypes where it was built against the running torch
// and hands it the class and the eager path's C functions (python/src/eager.cc).
#include <Python.h>

#include <ATen/core/PythonFallbackKernel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/PyInterpreter.h>
#include <c10/core/impl/PyInterpreterHooks.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bridge/error.h"
#include "convert.h"
#include "python/src/storage_ref.h"
#include "python_key.h"
#include "wrapper.h"

namespace tb_pykey {

using tb_torch::ArgKind;

// The eager path's C functions (python/src/eager.cc): the Tensor behind a
// tensorbridge.Tensor's `_array` (nullptr: none); attaching a new Array to a new wrapper (0, or
// -1 with a Python exception set; the GIL held); one wrapper's `_array` set to another's Array
// (the GIL held).
using ArrayTensorFn = const tb::Tensor* (*)(PyObject*);
using AttachFn = int (*)(PyObject*, const tb::Tensor*);
using ShareFn = void (*)(PyObject* from, PyObject* to);

PyTypeObject* g_cls = nullptr;  // tensorbridge.Tensor; set before any kernel is registered
ArrayTensorFn g_array_tensor = nullptr;
AttachFn g_attach = nullptr;
ShareFn g_share = nullptr;
// Whether the kernels are registered: the wrappers' detached copies are made in C++ only then.
std::atomic<bool> g_on{false};
// Whether detached copies are made in C++ at all (tb_python_key_fast_detach, for benchmarks and
// tests that compare both routes).
std::atomic<bool> g_fast_detach{true};
// torch_dispatch rules registered for tensorbridge.Tensor (torch.library's
// register_torch_dispatch): while there are some, every call takes the Python route, which
// looks them up.
std::atomic<int64_t> g_rules{0};
// Every call takes the Python route while set (tensorbridge._tensor._python_route(), for
// benchmarks that time both routes in one process).
std::atomic<bool> g_paused{false};

// ---- torch's Python fallback --------------------------------------------------------------

// Every key below Python.
constexpr c10::DispatchKeySet kAfterPython =
    c10::DispatchKeySet(c10::DispatchKeySet::FULL) ^
    (c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::Python) |
     c10::DispatchKeySet(c10::DispatchKey::Python));

// What torch's own Python-key fallback does (aten/src/ATen/core/PythonFallbackKernel.cpp),
// which a kernel registered for the key replaces for its op: the top TorchDispatchMode's
// __torch_dispatch__ if a mode is active, else the subclasses' __torch_dispatch__ (torch's
// one Python interpreter) if an argument has the Python key, else the keys below.
void PythonFallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                    torch::jit::Stack* stack) {
  c10::impl::ExcludeDispatchKeyGuard exclude(kAfterPython);
  const size_t n = op.schema().arguments().size();
  const int64_t modes = c10::impl::TorchDispatchModeTLS::stack_len();
  if (modes > 0) {
    RECORD_FUNCTION("PythonDispatchMode", torch::jit::last(*stack, n));
    c10::impl::TorchDispatchModeTLS::get_stack_at(modes - 1)->pyinterpreter()->dispatch(op, stack);
    return;
  }
  RECORD_FUNCTION("PythonSubclass", torch::jit::last(*stack, n));
  bool python_key = false;
  for (const c10::IValue& v : torch::jit::last(*stack, n)) {
    if (v.isTensor()) {
      python_key |= v.unsafeToTensorImpl()->key_set().has(c10::DispatchKey::Python);
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      for (const c10::IValue& item : v.toListRef()) {
        if (!item.isNone()) {
          python_key |= item.unsafeToTensorImpl()->key_set().has(c10::DispatchKey::Python);
        }
      }
    }
  }
  c10::impl::PyInterpreter* interpreter = c10::impl::getGlobalPyInterpreter();
  TORCH_INTERNAL_ASSERT(interpreter != nullptr, "Hit Python dispatch key without a Python");
  if (python_key) {
    (*interpreter)->dispatch(op, stack);
    return;
  }
  // No mode and no tensor with the Python key: the keys below, with Python left out of the
  // included set too (modes add it there).
  const c10::impl::LocalDispatchKeySet local = c10::impl::tls_local_dispatch_key_set();
  c10::impl::ForceDispatchKeyGuard no_python(local.included_.remove(c10::DispatchKey::Python),
                                             local.excluded_);
  op.redispatchBoxed(keys.remove(c10::DispatchKey::Python), stack);
}

// ---- the fast path ----------------------------------------------------------------------

// A Python error (set by libtorch_python or the eager path) as a C++ exception, the GIL held.
[[noreturn]] void ThrowPythonError(const char* what) {
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  std::string message = what;
  if (value != nullptr) {
    PyObject* s = PyObject_Str(value);
    const char* text = s != nullptr ? PyUnicode_AsUTF8(s) : nullptr;
    if (text != nullptr) message += std::string(": ") + text;
    Py_XDECREF(s);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  PyErr_Clear();
  TORCH_CHECK(false, "tensorbridge: ", message);
}

// A table error as the torch exception of the Python exception the eager path would raise.
[[noreturn]] void ThrowTableError(const tb::Error& e) {
  switch (e.kind()) {
    case tb::ErrorKind::kValueError: C10_THROW_ERROR(ValueError, e.message());
    case tb::ErrorKind::kTypeError: C10_THROW_ERROR(TypeError, e.message());
    case tb::ErrorKind::kIndexError: C10_THROW_ERROR(IndexError, e.message());
    case tb::ErrorKind::kNotImplementedError: C10_THROW_ERROR(NotImplementedError, e.message());
    default: C10_THROW_ERROR(Error, e.message());
  }
}

extern const tb_torch::WrapperHooks kHooks;

// A tensor argument as a table tensor: a tensorbridge.Tensor's Array (`*any_ours` set), or a
// zero-copy view of a plain dense CPU tensor; throws Decline for anything else.
tb::Tensor Convert(const at::Tensor& t, bool* any_ours) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const c10::DispatchKeySet keys = impl->key_set();
  if (keys.has(c10::DispatchKey::Python)) {
    PyObject* obj = impl->pyobj_slot()->load_pyobj();
    if (obj == nullptr || Py_TYPE(obj) != g_cls) throw Decline{};
    const tb::Tensor* array = g_array_tensor(obj);
    if (array == nullptr) throw Decline{};
    *any_ours = true;
    return *array;
  }
  tb::DType dtype;
  if (!kPlainKeys.isSupersetOf(keys) || !impl->has_storage() || t.layout() != c10::kStrided ||
      !tb_torch::ToTbDType(t.scalar_type(), &dtype)) {
    throw Decline{};
  }
  return tb_torch::ToTb(t);
}

// A new tensorbridge.Tensor over a table result, the GIL held: its TensorImpl (wrapper.h),
// its Python object of the class, and the object's Array. The object lives as long as the
// TensorImpl is referenced (torch's PyObject preservation).
at::Tensor MakeResult(const tb::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "tensorbridge: a result on ", tb::DeviceString(t.device()));
  const auto nd = static_cast<int64_t>(t.ndim());
  bool contiguous = true;
  int64_t expected = 1;
  for (int64_t i = nd - 1; i >= 0; --i) {
    contiguous &= t.strides()[i] == expected;
    expected *= std::max<int64_t>(t.shape()[i], 1);
  }
  at::Tensor w =
      tb_torch::MakeWrapperTensor(tb_torch::ToTorchDType(t.dtype()), nd, t.shape().data(),
                                  contiguous ? nullptr : t.strides().data(), t.data(),
                                  tb::NewStorageRef(t), &tb::ReleaseStorageRef, &kHooks);
  PyObject* obj = THPVariable_Wrap(w, g_cls);
  if (obj == nullptr) ThrowPythonError("making a result wrapper failed");
  if (g_attach(obj, &t) != 0) {
    Py_DECREF(obj);
    ThrowPythonError("attaching a result's array failed");
  }
  Py_DECREF(obj);
  return w;
}

c10::IValue ToIValue(const tb::Value& v) {
  return tb_torch::ToIValue(v, [](const tb::Tensor& t) { return MakeResult(t); });
}

struct Entry {
  tb::OpId id = 0;
  std::vector<ArgKind> kinds;
  // For each return: the argument it writes and returns (in-place), or -1.
  std::vector<int> returns_arg;
  bool new_results = false;  // some return is a new tensor (its wrapper needs the GIL)
  bool view = false;         // returns a view of an argument
  // Returns new tensors, writes no argument, and is no decomposition: served above autograd
  // too (a second kernel, on the PythonTLSSnapshot key).
  bool functional = false;
};

// ---- above autograd -----------------------------------------------------------------------

std::atomic<int64_t> g_above_calls{0};  // calls of functional ops served above autograd (tests)

bool NoTangent(const at::Tensor& t) {
  if (!t.defined()) return true;
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->key_set().has(c10::DispatchKey::Python)) {
    PyObject* obj = impl->pyobj_slot()->load_pyobj();
    if (obj == nullptr || Py_TYPE(obj) != g_cls) return false;
  }
  return !t._fw_grad(/*level=*/0).defined();
}

bool NoAutograd(const at::Tensor& t) {
  return NoTangent(t) && !(t.defined() && c10::GradMode::is_enabled() && t.requires_grad());
}

// NoAutograd for every tensor among the last `n` values of the stack (lists' items too).
bool NoAutogradArgs(const torch::jit::Stack& stack, size_t n) {
  for (const c10::IValue& v : torch::jit::last(stack, n)) {
    if (v.isTensor()) {
      if (!NoAutograd(v.toTensor())) return false;
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      for (const c10::IValue& item : v.toListRef()) {
        if (item.isTensor() && !NoAutograd(item.toTensor())) return false;
      }
    }
  }
  return true;
}

// torch's PythonTLSSnapshot fallback (PythonFallbackKernel.cpp): the keys below, with the
// Python TLS snapshot taken where this is the outermost call.
void SnapshotFallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                      torch::jit::Stack* stack) {
  at::impl::MaybeSetTLSOnEntryGuard guard;
  op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER,
                                                c10::DispatchKey::PythonTLSSnapshot),
                     stack);
}

// The kernel of one op on the Python key, or (`above_autograd`, a functional op) on the
// PythonTLSSnapshot key.
class PythonKeyOp final : public c10::OperatorKernel {
 public:
  PythonKeyOp(Entry entry, bool above_autograd)
      : e_(std::move(entry)), above_autograd_(above_autograd) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    if (above_autograd_) {
      if (kAboveAutogradKeys.isSupersetOf(keys) && NoAutogradArgs(*stack, e_.kinds.size()) &&
          Fast(stack)) {
        g_above_calls.fetch_add(1, std::memory_order_relaxed);
      } else {
        SnapshotFallback(op, keys, stack);
      }
      return;
    }
    if (!Fast(stack)) PythonFallback(op, keys, stack);
  }

 private:
  // Runs the op in C++ and returns true, or returns false (the stack untouched) where the
  // call must take the Python route.
  bool Fast(torch::jit::Stack* stack) const {
    if (g_rules.load(std::memory_order_relaxed) > 0 || g_paused.load(std::memory_order_relaxed) ||
        c10::impl::TorchDispatchModeTLS::stack_len() > 0) {
      return false;
    }
    // A view in inference mode: the eager path makes its wrapper outside inference mode
    // where the base is a normal tensor.
    if (e_.view && c10::InferenceMode::is_enabled()) return false;
    const size_t n = e_.kinds.size();
    const size_t first = stack->size() - n;
    bool any_ours = false;
    auto convert = [&any_ours](const at::Tensor& t) { return Convert(t, &any_ours); };
    tb::Stack s;
    s.reserve(n);
    try {
      for (size_t i = 0; i < n; ++i) {
        const c10::IValue& v = (*stack)[first + i];
        if (e_.kinds[i] == ArgKind::kDevice && v.isDevice() && !v.toDevice().is_cpu()) {
          return false;
        }
        s.push_back(tb_torch::ToValue(v, e_.kinds[i], convert));
      }
    } catch (const Decline&) {
      return false;
    } catch (const c10::Error&) {
      return false;  // an argument the conversion does not take: the eager path's error
    }
    if (!any_ours) return false;  // torch's fallback: no mode, no subclass, the keys below
    {
      GilRelease release;
      try {
        tb::OpTable::Global().Call(e_.id, s);
      } catch (const tb::Error& e) {
        // torch has no BufferError (a read-only source written to): the Python route raises
        // it (the kernel refused before writing).
        if (e.kind() == tb::ErrorKind::kBufferError) return false;
        ThrowTableError(e);
      } catch (const std::exception&) {
        // Not the table's own error (a Python exception from its fallback handler, memory):
        // the Python route raises it as the Python exception it is.
        return false;
      }
    }
    const size_t nret = e_.returns_arg.size();
    std::optional<GilAcquire> gil;
    if (e_.new_results) gil.emplace();
    auto result = [&](size_t r) {
      const int arg = e_.returns_arg[r];
      return arg >= 0 ? (*stack)[first + arg] : ToIValue(s.at(r));
    };
    if (nret == 1) {  // most ops: no vector of results
      c10::IValue out = result(0);
      gil.reset();
      torch::jit::drop(*stack, n);
      stack->push_back(std::move(out));
      return true;
    }
    std::vector<c10::IValue> results;
    results.reserve(nret);
    for (size_t r = 0; r < nret; ++r) results.push_back(result(r));
    gil.reset();
    torch::jit::drop(*stack, n);
    for (auto& r : results) stack->push_back(std::move(r));
    return true;
  }

  const Entry e_;
  const bool above_autograd_;
};

// In-place ops that change the tensor itself (shape, strides, memory): the eager path's
// Python handler changes the wrapper's metadata too.
constexpr const char* kMetadataOps[] = {"aten::as_strided_", "aten::squeeze_",   "aten::unsqueeze_",
                                        "aten::t_",          "aten::transpose_", "aten::swapdims_",
                                        "aten::swapaxes_",   "aten::resize_",    "aten::resize_as_",
                                        "aten::set_"};

// Whether the fast path can hand this return type back.
bool ReturnTaken(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::NumberType: return true;
    case c10::TypeKind::ListType:
      return type->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType;
    default: return false;
  }
}

// The kernel's entry for an op, or false where the op keeps torch's fallback: not aten, a
// Python-key kernel of torch's own, a metadata op, no returns or returns the fast path does not
// make, no kernel in the table. out= variants are taken as the Python route takes them: the
// table writes into the out= tensor (a tensorbridge.Tensor's memory or a plain tensor's), which
// is returned; an out= tensor of another shape is the table's error there too.
bool Eligible(const c10::OperatorName& name, const c10::OperatorHandle& handle, Entry* out) {
  if (name.name.rfind("aten::", 0) != 0) return false;
  if (handle.hasKernelForDispatchKey(c10::DispatchKey::Python)) return false;
  for (const char* m : kMetadataOps) {
    if (name.name == m) return false;
  }
  const c10::FunctionSchema& schema = handle.schema();
  if (schema.returns().empty() || schema.is_vararg() || schema.is_varret()) return false;
  Entry e;
  for (const auto& r : schema.returns()) {
    if (!ReturnTaken(r.real_type())) return false;
    if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) e.view = true;
  }
  e.returns_arg = tb_torch::WrittenReturns(schema);
  for (int arg : e.returns_arg) e.new_results |= arg < 0;
  for (size_t r = 0; r < e.returns_arg.size(); ++r) {
    const c10::AliasInfo* ra = schema.returns()[r].alias_info();
    if (ra != nullptr && ra->isWrite() && e.returns_arg[r] < 0) return false;
  }
  const std::string qualified =
      name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  tb::OpTable& table = tb::OpTable::Global();
  auto id = table.Find(qualified);
  if (!id) return false;
  const tb::ServedBy by = table.Resolve(*id, tb::DeviceType::kCPU).served_by;
  if (by != tb::ServedBy::kKernel && by != tb::ServedBy::kComposite) return false;
  e.id = *id;
  bool aliases = false;
  for (const auto& a : schema.arguments()) {
    e.kinds.push_back(tb_torch::KindOf(a.real_type()));
    aliases |= a.alias_info() != nullptr;
  }
  bool writes = false;
  for (int arg : e.returns_arg) writes |= arg >= 0;
  e.functional = !e.view && !writes && !aliases && !schema.is_mutable() &&
                 !handle.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
                 !handle.hasKernelForDispatchKey(c10::DispatchKey::PythonTLSSnapshot);
  *out = std::move(e);
  return true;
}

// ---- the wrappers' shallow copies (wrapper.h's WrapperImpl) --------------------------------

// The tensorbridge.Tensor of `impl` with an Array, or nullptr (another class, a subclass, a
// traced stand-in, no Python object). Reads pointers only: the caller holds `impl`, whose
// Python object keeps its Array alive.
PyObject* OurObject(const c10::TensorImpl& impl) {
  if (!impl.key_set().has(c10::DispatchKey::Python)) return nullptr;
  PyObject* obj = impl.pyobj_slot()->load_pyobj();
  if (obj == nullptr || Py_TYPE(obj) != g_cls || g_array_tensor(obj) == nullptr) return nullptr;
  return obj;
}

const tb::Tensor* OurArray(const at::Tensor& t) {
  PyObject* obj = OurObject(*t.unsafeGetTensorImpl());
  return obj == nullptr ? nullptr : g_array_tensor(obj);
}

bool MayServe() {
  return g_rules.load(std::memory_order_relaxed) == 0 &&
         !g_paused.load(std::memory_order_relaxed) &&
         c10::impl::TorchDispatchModeTLS::stack_len() == 0;
}

// What torch's TensorImpl::shallow_copy_and_detach would hand to the interpreter's detach
// (aten::detach through __torch_dispatch__, whose answer is a wrapper of the class over the
// same memory) is made in C++ where no TorchDispatchMode is active, the Python key is not
// excluded (torch then copies without a Python object itself), no torch_dispatch rule is
// registered for the class and the tensor is a tensorbridge.Tensor with data.
bool MayDetach(const tb_torch::WrapperImpl& self) {
  return g_on.load(std::memory_order_relaxed) && g_fast_detach.load(std::memory_order_relaxed) &&
         g_rules.load(std::memory_order_relaxed) == 0 &&
         !g_paused.load(std::memory_order_relaxed) &&
         c10::impl::TorchDispatchModeTLS::stack_len() == 0 &&
         !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::Python) &&
         OurObject(self) != nullptr;
}

void AttachCopy(const tb_torch::WrapperImpl& self,
                const c10::intrusive_ptr<c10::TensorImpl>& copy) {
  GilAcquire gil;
  PyObject* obj = THPVariable_Wrap(at::Tensor(copy), g_cls);
  if (obj == nullptr) ThrowPythonError("making a detached wrapper failed");
  g_share(self.pyobj_slot()->load_pyobj(), obj);
  Py_DECREF(obj);  // the TensorImpl keeps it (torch's PyObject preservation)
}

// `self.data = src` (torch's set_data): src is a tensorbridge.Tensor (its Array is shared) or
// a plain dense CPU tensor (an Array over its memory); others have no memory an Array can
// describe.
void CopyFrom(tb_torch::WrapperImpl& self, const c10::intrusive_ptr<c10::TensorImpl>& src) {
  PyObject* from = OurObject(*src);
  std::optional<tb::Tensor> plain;
  if (from == nullptr) {
    const c10::DispatchKeySet keys = src->key_set();
    tb::DType dtype;
    TORCH_CHECK_NOT_IMPLEMENTED(
        kPlainKeys.isSupersetOf(keys) && src->has_storage() && src->layout() == c10::kStrided &&
            tb_torch::ToTbDType(src->dtype().toScalarType(), &dtype),
        "tensorbridge: setting a tensorbridge.Tensor's .data to a tensor without plain CPU "
        "memory (",
        src->key_set(), ") is not supported");
    plain = tb_torch::ToTb(at::Tensor(src));
  }
  self.CopyMetadataFrom(src);
  PyObject* obj = self.pyobj_slot()->load_pyobj();
  if (obj == nullptr || !PyObject_TypeCheck(obj, g_cls)) return;  // no Python object yet
  GilAcquire gil;
  if (from != nullptr) {
    g_share(from, obj);
  } else if (g_attach(obj, &*plain) != 0) {
    ThrowPythonError("attaching the new memory's array failed");
  }
}

const tb_torch::WrapperHooks kHooks = {&MayDetach, &AttachCopy, &CopyFrom};

// ---- torch's __torch_function__ check ---------------------------------------------------

// torch's argument parser asks every tensor argument of a subclass for its __torch_function__
// (python_arg_parser.h's check_has_torch_function) through PyObject_FastGetAttrString, which
// on Python < 3.13 calls the type's tp_getattr with the C string where the type has one, and
// otherwise makes a new str of the name and looks that up (a decode, a hash and a free per
// tensor argument of every op). tensorbridge.Tensor's tp_getattr does what its tp_getattro
// does, with __torch_function__ and __torch_dispatch__ looked up as strs made once.
PyObject* InternedName(const char* name) {
  static PyObject* torch_function = PyUnicode_InternFromString("__torch_function__");
  static PyObject* torch_dispatch = PyUnicode_InternFromString("__torch_dispatch__");
  if (std::strcmp(name, "__torch_function__") == 0) return Py_NewRef(torch_function);
  if (std::strcmp(name, "__torch_dispatch__") == 0) return Py_NewRef(torch_dispatch);
  return PyUnicode_FromString(name);
}

PyObject* GetAttrString(PyObject* self, char* name) {
  PyObject* key = InternedName(name);
  if (key == nullptr) return nullptr;
  PyObject* value = Py_TYPE(self)->tp_getattro(self, key);
  Py_DECREF(key);
  return value;
}

std::mutex g_mu;
std::unique_ptr<torch::Library> g_lib;        // guarded by g_mu; its destruction deregisters
std::unique_ptr<torch::Library> g_above_lib;  // the kernels above autograd; guarded by g_mu
std::unique_ptr<torch::Library> g_c10d_lib;   // the collectives' kernels; guarded by g_mu
int64_t g_registered = 0;                     // guarded by g_mu

}  // namespace tb_pykey

// Registers the kernels (on != 0) or removes them (on == 0). `cls` is tensorbridge.Tensor,
// the three addresses the eager path's C functions (_C._eager_c_api()). Returns the number of
// ops registered, or -1 with a Python exception set. Called with the GIL held (ctypes.PyDLL).
extern "C" __attribute__((visibility("default"))) int64_t tb_python_key_kernels(
    PyObject* cls, uintptr_t array_tensor, uintptr_t attach, uintptr_t share, int on) {
  using namespace tb_pykey;
  try {
    std::lock_guard<std::mutex> lock(g_mu);
    g_on.store(false, std::memory_order_relaxed);
    g_c10d_lib.reset();
    g_above_lib.reset();
    g_lib.reset();
    g_registered = 0;
    if (on == 0) return 0;
    if (g_cls == nullptr) {
      Py_INCREF(cls);  // lives for the process, as the class does
      g_cls = reinterpret_cast<PyTypeObject*>(cls);
      g_array_tensor = reinterpret_cast<ArrayTensorFn>(array_tensor);
      g_attach = reinterpret_cast<AttachFn>(attach);
      g_share = reinterpret_cast<ShareFn>(share);
    }
    TORCH_CHECK(reinterpret_cast<PyObject*>(g_cls) == cls, "tensorbridge: another tensor class");
    // Subclasses made from now on inherit it with tp_getattro (both were unset there).
    if (g_cls->tp_getattro != nullptr) g_cls->tp_getattr = &GetAttrString;
    auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                c10::DispatchKey::Python, __FILE__, __LINE__);
    auto above = std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", c10::DispatchKey::PythonTLSSnapshot, __FILE__, __LINE__);
    for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
      auto handle = c10::Dispatcher::singleton().findOp(name);
      Entry e;
      if (!handle || !Eligible(name, *handle, &e)) continue;
      const std::string unqualified =
          name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
      if (e.functional) {
        above->impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                             std::make_unique<PythonKeyOp>(e, true)));
      }
      lib->impl(unqualified.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                         std::make_unique<PythonKeyOp>(std::move(e), false)));
      ++g_registered;
    }
    RegisterLinear(above.get());
    auto c10d = std::make_unique<torch::Library>(torch::Library::IMPL, "c10d",
                                                 c10::DispatchKey::Python, __FILE__, __LINE__);
    RegisterCollectives(c10d.get());
    g_c10d_lib = std::move(c10d);
    g_above_lib = std::move(above);
    g_lib = std::move(lib);
    g_on.store(true, std::memory_order_relaxed);
    return g_registered;
  } catch (const std::exception& e) {
    PyErr_SetString(
        PyExc_RuntimeError,
        (std::string("tensorbridge: registering the Python-key kernels failed: ") + e.what())
            .c_str());
    return -1;
  }
}

// Counts torch_dispatch rules registered (+1) or removed (-1) for tensorbridge.Tensor.
extern "C" __attribute__((visibility("default"))) void tb_python_key_rules(int delta) {
  tb_pykey::g_rules.fetch_add(delta, std::memory_order_relaxed);
}

// Sends every call to the Python route while `paused` is nonzero (benchmarks).
extern "C" __attribute__((visibility("default"))) void tb_python_key_pause(int paused) {
  tb_pykey::g_paused.store(paused != 0, std::memory_order_relaxed);
}

// Makes the wrappers' detached copies in C++ (on != 0, the default) or through torch's route
// (the interpreter's detach, __torch_dispatch__) while `on` is 0.
extern "C" __attribute__((visibility("default"))) void tb_python_key_fast_detach(int on) {
  tb_pykey::g_fast_detach.store(on != 0, std::memory_order_relaxed);
}

// wrapper.cc's tb_torch_make_wrapper for the wrappers of this library (their shallow copies
// take its hooks: detached copies made in C++ while the kernels are registered): a new wrapper
// of type `cls` over the memory at `data`, which `context` keeps alive (torch calls
// `deleter(context)` once, also when this call fails). A new reference, or nullptr with a
// Python exception set.
extern "C" __attribute__((visibility("default"))) PyObject* tb_python_key_make_wrapper(
    PyObject* cls, int64_t ndim, const int64_t* sizes, const int64_t* strides, PyObject* dtype,
    void* data, void* context, void (*deleter)(void*)) {
  return tb_torch::MakeWrapperObject(cls, ndim, sizes, strides, dtype, data, context, deleter,
                                     &tb_pykey::kHooks);
}

// How many aten::linear calls the kernel on the PythonTLSSnapshot key served (tests).
extern "C" __attribute__((visibility("default"))) int64_t tb_python_key_linear_calls() {
  return tb_pykey::LinearCalls();
}

// How many calls of functional ops the kernels on the PythonTLSSnapshot key served (tests).
extern "C" __attribute__((visibility("default"))) int64_t tb_python_key_above_calls() {
  return tb_pykey::g_above_calls.load(std::memory_order_relaxed);
}
