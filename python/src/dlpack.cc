// The DLPack Python protocol, consumer side: from_dlpack(x) takes Arrays, capsules (versioned
// and legacy), the producer's C exchange API (`type(x).__dlpack_c_exchange_api__`, looked up
// once per type) and otherwise `__dlpack__(max_version=(1, 3))`, with the legacy `__dlpack__()`
// on TypeError. from_dlpack is a plain CPython vectorcall function, not a pybind11 binding:
// pybind11's generic argument dispatch costs more than the conversion. (Array's producer side,
// __dlpack__ and its exchange API table, is in array.cc.)
#include <cstring>
#include <unordered_map>

#include "dlpack_py.h"

namespace tb::py {
namespace {

constexpr const char* kVersioned = "dltensor_versioned";
constexpr const char* kUsedVersioned = "used_dltensor_versioned";
constexpr const char* kLegacy = "dltensor";
constexpr const char* kUsedLegacy = "used_dltensor";
constexpr const char* kExchangeApi = "dlpack_exchange_api";

// Interned strings and constant arguments, made once by BindDLPack (and kept: the module is
// never unloaded).
struct Statics {
  PyObject* dlpack;               // "__dlpack__"
  PyObject* max_version;          // (1, 3)
  PyObject* kwnames[4];           // __dlpack__ keywords: max_version [, dl_device] [, copy]
  PyObject* from_dlpack_args[3];  // x, device, copy
};
Statics g;

}  // namespace

PyObject* Intern(const char* s) {
  PyObject* o = PyUnicode_InternFromString(s);
  if (o == nullptr) throw py::error_already_set();
  return o;
}

// ---- arguments of the vectorcall entry points ------------------------------------------------

void BindArgs(const char* fn, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
              PyObject* const* names, Py_ssize_t nnames, Py_ssize_t npos, PyObject** out) {
  if (nargs > npos) {
    TB_THROW(TypeError) << fn << "() takes " << npos << " positional argument"
                        << (npos == 1 ? "" : "s") << " but " << nargs << " were given";
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t j = 0;
    while (j < nnames && names[j] != key) ++j;  // interned: the usual case
    if (j == nnames) {
      j = 0;
      while (j < nnames && PyUnicode_Compare(names[j], key) != 0) ++j;
      PyErr_Clear();
    }
    if (j == nnames) {
      TB_THROW(TypeError) << fn << "() got an unexpected keyword argument '"
                          << py::str(key).cast<std::string>() << "'";
    }
    if (j < nargs) {
      TB_THROW(TypeError) << fn << "() got multiple values for argument '"
                          << py::str(key).cast<std::string>() << "'";
    }
    out[j] = args[nargs + k];
  }
}

std::optional<bool> ParseCopy(PyObject* copy) {
  if (copy == Py_None) return std::nullopt;
  if (copy == Py_True) return true;
  if (copy == Py_False) return false;
  try {
    return py::handle(copy).cast<bool>();  // numpy.bool_ and friends
  } catch (const py::cast_error&) {
    TB_THROW(TypeError) << "copy must be None, True or False, got "
                        << py::repr(copy).cast<std::string>();
  }
}

std::pair<int32_t, int32_t> ParseDevicePair(PyObject* device, const char* what) {
  try {
    return py::handle(device).cast<std::pair<int32_t, int32_t>>();
  } catch (const py::cast_error&) {
    TB_THROW(TypeError) << what << " must be a (device_type, device_id) pair, got "
                        << py::repr(device).cast<std::string>();
  }
}

void AddMethod(py::handle type, PyMethodDef* def) {
  PyObject* descr = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(type.ptr()), def);
  if (descr == nullptr) throw py::error_already_set();
  auto owner = py::reinterpret_steal<py::object>(descr);
  type.attr(def->ml_name) = owner;
}

namespace {

// from_dlpack's `device`: None, "cpu", or a DLPack (device_type, device_id) pair.
std::optional<Device> ParseDevice(PyObject* device) {
  if (device == Py_None) return std::nullopt;
  if (PyUnicode_Check(device)) {
    std::string s = py::handle(device).cast<std::string>();
    if (s == "cpu") return Device{DeviceType::kCPU, 0};
    TB_THROW(ValueError) << "from_dlpack: device '" << s
                         << "' is not supported; tensorbridge computes on 'cpu'";
  }
  auto pair = ParseDevicePair(device, "from_dlpack: device");
  TB_CHECK(IsKnownDeviceType(pair.first), ValueError)
      << "from_dlpack: unknown DLPack device type " << pair.first;
  return Device{static_cast<DeviceType>(pair.first), pair.second};
}

// ---- capsules --------------------------------------------------------------------------------

// Destructor of the capsules we hand out. A consumer that took the tensor renamed the capsule
// to "used_*" and owns it now; otherwise the tensor was never taken and we free it. Python
// runs it with the GIL held (also while finalizing); it keeps any Python error in flight.
template <typename Managed>
void CapsuleDestructor(PyObject* capsule) noexcept {
  constexpr bool kIsVersioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  const char* name = kIsVersioned ? kVersioned : kLegacy;
  if (!PyCapsule_IsValid(capsule, name)) return;  // consumed
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

template <typename Managed>
PyObject* NewCapsuleOf(Managed* managed) {
  constexpr bool kIsVersioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  PyObject* cap =
      PyCapsule_New(managed, kIsVersioned ? kVersioned : kLegacy, &CapsuleDestructor<Managed>);
  if (cap == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return cap;
}

}  // namespace

PyObject* NewCapsule(DLManagedTensorVersioned* managed) { return NewCapsuleOf(managed); }
PyObject* NewCapsule(DLManagedTensor* managed) { return NewCapsuleOf(managed); }

namespace {

Tensor ImportCapsule(PyObject* c) {
  if (!PyCapsule_CheckExact(c)) {
    TB_THROW(TypeError) << "__dlpack__ returned a " << Py_TYPE(c)->tp_name
                        << ", not a DLPack capsule";
  }
  if (PyCapsule_IsValid(c, kVersioned)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersioned));
    // From here the tensor is ours: the producer's capsule destructor must not free it, and
    // ImportDLPack calls the deleter itself if it refuses the tensor.
    if (PyCapsule_SetName(c, kUsedVersioned) != 0) throw py::error_already_set();
    return ImportDLPack(m);
  }
  if (PyCapsule_IsValid(c, kLegacy)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacy));
    if (PyCapsule_SetName(c, kUsedLegacy) != 0) throw py::error_already_set();
    return ImportDLPack(m);
  }
  const char* name = PyCapsule_GetName(c);
  PyErr_Clear();
  if (name != nullptr && std::strncmp(name, "used_", 5) == 0) {
    TB_THROW(BufferError) << "this DLPack capsule ('" << name
                          << "') was already consumed; a capsule can be imported once";
  }
  TB_THROW(TypeError) << "a PyCapsule named '" << (name ? name : "<null>")
                      << "' is not a DLPack capsule ('dltensor' or 'dltensor_versioned')";
}

// ---- what we know of a producer type ---------------------------------------------------------

struct TypeInfo {
  bool is_array = false;                   // tensorbridge.Array or a subclass
  bool immutable = false;                  // JAX: read-only by contract, whatever its capsule says
  const DLPackExchangeAPI* api = nullptr;  // its C exchange API, when that may be used
  PyObject* is_conj = nullptr;             // torch: Tensor.is_conj / is_neg (CheckTorchBits)
  PyObject* is_neg = nullptr;
};

// Index in type's MRO of the first class that defines `name` itself, or -1.
Py_ssize_t DefinedAt(PyTypeObject* type, const char* name) {
  PyObject* mro = type->tp_mro;
  for (Py_ssize_t i = 0; mro != nullptr && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* dict = PyObject_GetAttrString(PyTuple_GET_ITEM(mro, i), "__dict__");
    int has = dict == nullptr ? 0 : PyMapping_HasKeyString(dict, name);
    Py_XDECREF(dict);
    PyErr_Clear();
    if (has) return i;
  }
  return -1;
}

TypeInfo Inspect(PyTypeObject* type) {
  TypeInfo info;
  auto* t = reinterpret_cast<PyObject*>(type);
  info.is_array = PyType_IsSubtype(type, g_array_type) != 0;
  if (info.is_array) return info;
  if (PyObject* module = PyObject_GetAttrString(t, "__module__")) {  // jax.*, jaxlib.*
    const char* s = PyUnicode_Check(module) ? PyUnicode_AsUTF8(module) : nullptr;
    info.immutable = s != nullptr && std::strncmp(s, "jax", 3) == 0 &&
                     (s[3] == '\0' || s[3] == '.' || std::strncmp(s + 3, "lib", 3) == 0);
    Py_DECREF(module);
  }
  PyErr_Clear();
  PyObject* cap = PyObject_GetAttrString(t, "__dlpack_c_exchange_api__");
  if (cap == nullptr) {
    PyErr_Clear();
    return info;
  }
  // A subclass that overrides __dlpack__ below the class that provides the table exports its
  // own way: the inherited table would bypass that.
  Py_ssize_t dunder_at = DefinedAt(type, "__dlpack__");
  Py_ssize_t api_at = DefinedAt(type, "__dlpack_c_exchange_api__");
  if (PyCapsule_IsValid(cap, kExchangeApi) && !(dunder_at >= 0 && api_at > dunder_at)) {
    auto* header = static_cast<DLPackExchangeAPIHeader*>(PyCapsule_GetPointer(cap, kExchangeApi));
    while (header != nullptr && header->version.major != TB_DLPACK_MAJOR_VERSION) {
      header = header->prev_api;  // walk to a table of the major version we speak
    }
    info.api = reinterpret_cast<const DLPackExchangeAPI*>(header);
    if (info.api != nullptr && info.api->managed_tensor_from_py_object_no_sync == nullptr) {
      info.api = nullptr;
    }
  }
  Py_DECREF(cap);  // the table is static in its producer, and we keep the type alive
  PyErr_Clear();
  if (info.api == nullptr) return info;
  // torch (already imported, since one of its tensors is here): its table skips the checks
  // of its __dlpack__ for lazily conjugated / negated views; CheckTorchBits makes them.
  if (PyObject* torch = PyImport_GetModule(py::str("torch").ptr())) {
    PyObject* tensor = PyObject_GetAttrString(torch, "Tensor");
    if (tensor != nullptr && PyType_Check(tensor) &&
        PyType_IsSubtype(type, reinterpret_cast<PyTypeObject*>(tensor))) {
      info.is_conj = PyObject_GetAttrString(tensor, "is_conj");
      info.is_neg = PyObject_GetAttrString(tensor, "is_neg");
      if (info.is_conj == nullptr || info.is_neg == nullptr) info.api = nullptr;  // be safe
    }
    Py_XDECREF(tensor);
    Py_DECREF(torch);
  }
  PyErr_Clear();
  return info;
}

// Per-type facts, computed once. The cache holds a reference to each type, so that its address
// cannot be reused by another type. Guarded by the GIL.
const TypeInfo& InfoOf(PyTypeObject* type) {
  static PyTypeObject* last_type = nullptr;
  static const TypeInfo* last_info = nullptr;
  if (type == last_type) return *last_info;
  static auto* cache = new std::unordered_map<PyTypeObject*, TypeInfo>();  // never destroyed
  auto it = cache->find(type);
  if (it == cache->end()) {
    // Inspect may run Python code, and so let another thread in first: insert once.
    auto [pos, inserted] = cache->emplace(type, Inspect(type));
    if (inserted) Py_INCREF(type);
    it = pos;  // node-based map: the reference stays valid
  }
  last_type = type;
  last_info = &it->second;
  return it->second;
}

// ---- import ----------------------------------------------------------------------------------

enum class Path { kArray, kCapsule, kExchangeApi, kDLPack, kDLPackLegacy };

const char* PathName(Path p) {
  switch (p) {
    case Path::kArray: return "array";
    case Path::kCapsule: return "capsule";
    case Path::kExchangeApi: return "exchange_api";
    case Path::kDLPack: return "dlpack";
    case Path::kDLPackLegacy: return "dlpack_legacy";
  }
  return "?";
}

struct Options {
  std::optional<Device> device;
  std::optional<bool> copy;
};

bool CallFlag(PyObject* fn, PyObject* obj) {
  // A C method without arguments (torch's is_conj / is_neg): called as CPython's own
  // method_vectorcall_NOARGS would, without its checks, which hold here (`obj` is a torch
  // tensor, and the call takes no arguments).
  PyObject* r;
  if (Py_IS_TYPE(fn, &PyMethodDescr_Type) &&
      reinterpret_cast<PyMethodDescrObject*>(fn)->d_method->ml_flags == METH_NOARGS) {
    r = reinterpret_cast<PyMethodDescrObject*>(fn)->d_method->ml_meth(obj, nullptr);
  } else {
    r = PyObject_Vectorcall(fn, &obj, 1, nullptr);
  }
  if (r == nullptr) throw py::error_already_set();
  bool set = r == Py_True;
  Py_DECREF(r);
  return set;
}

// torch's views whose conjugation or negation is a pending bit (x.conj(), x.conj().imag) hold
// values their memory does not: torch's exchange table hands that memory out all the same
// (its __dlpack__ refuses the conjugate bit, and loses the negative one). We refuse both.
void CheckTorchBits(PyObject* obj, const TypeInfo& info, const Tensor& t) {
  if (IsComplex(t.dtype()) && CallFlag(info.is_conj, obj)) {
    TB_THROW(BufferError) << "from_dlpack: this torch tensor has the conjugate bit set (a lazy "
                             "conj()); call .resolve_conj() first";
  }
  if (CallFlag(info.is_neg, obj)) {
    TB_THROW(BufferError) << "from_dlpack: this torch tensor has the negative bit set (a lazy "
                             "negation, e.g. conj().imag); call .resolve_neg() first";
  }
}

// The import through the producer's table; nullopt when the producer refuses or gives a tensor
// we refuse: its __dlpack__, the protocol's definition, then decides, with its own error if it
// refuses too. (A storage-less torch wrapper subclass exports through __torch_function__, which
// the table bypasses: torch's table hands out a null data pointer for it.)
std::optional<Tensor> TryImportViaExchangeApi(PyObject* obj, const TypeInfo& info) {
  DLManagedTensorVersioned* managed = nullptr;
  if (info.api->managed_tensor_from_py_object_no_sync(obj, &managed) != 0 || managed == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::optional<Tensor> t;
  try {
    t.emplace(ImportDLPack(managed));  // on refusal, it has called the deleter
  } catch (const tb::Error& e) {
    if (e.kind() != ErrorKind::kBufferError) throw;
    return std::nullopt;
  }
  if (info.is_neg != nullptr) CheckTorchBits(obj, info, *t);
  return t;
}

// `__dlpack__(max_version=(1, 3)[, dl_device=...][, copy=...])`, then `__dlpack__()` when the
// producer refuses those keywords with TypeError. `copied`: the producer was asked to copy.
Tensor ImportViaDunder(PyObject* obj, const Options& o, bool* copied, Path* path) {
  PyObject* buf[5] = {nullptr, obj, g.max_version, nullptr, nullptr};
  int mask = 0, nkw = 1;
  py::object dl_device;
  if (o.device) {
    dl_device = py::make_tuple(static_cast<int>(o.device->type), o.device->index);
    buf[2 + nkw++] = dl_device.ptr();
    mask |= 1;
  }
  if (o.copy) {
    buf[2 + nkw++] = *o.copy ? Py_True : Py_False;
    mask |= 2;
  }
  constexpr size_t kSelf = 1 | PY_VECTORCALL_ARGUMENTS_OFFSET;
  PyObject* cap = PyObject_VectorcallMethod(g.dlpack, buf + 1, kSelf, g.kwnames[mask]);
  *copied = o.copy.value_or(false);
  *path = Path::kDLPack;
  if (cap == nullptr && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();  // a producer of the legacy protocol: no keywords, no versioned capsule
    cap = PyObject_VectorcallMethod(g.dlpack, buf + 1, kSelf, nullptr);
    *copied = false;
    *path = Path::kDLPackLegacy;
  }
  if (cap == nullptr) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      if (PyObject_HasAttr(obj, g.dlpack) == 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        TB_THROW(TypeError) << "from_dlpack: expected an object with __dlpack__ (numpy, torch, "
                               "JAX, CuPy, ...), a DLPack capsule or a tensorbridge.Array, got "
                            << Py_TYPE(obj)->tp_name;
      }
      PyErr_Restore(type, value, tb);
    }
    throw py::error_already_set();
  }
  auto owner = py::reinterpret_steal<py::object>(cap);
  return ImportCapsule(cap);
}

std::string DeviceDesc(Device d) {
  return DeviceString(d) + " (" + std::to_string(static_cast<int>(d.type)) + ", " +
         std::to_string(d.index) + ")";
}

Tensor Finish(Tensor t, const Options& o, bool immutable, bool copied) {
  if (o.device && t.device() != *o.device) {
    TB_THROW(BufferError) << "from_dlpack: the producer gave a tensor on " << DeviceDesc(t.device())
                          << ", not on " << DeviceDesc(*o.device);
  }
  if (immutable && !copied) t = t.with_read_only(true);
  if (o.copy.value_or(false) && !copied) t = t.clone();  // clone() is writable
  return t;
}

Tensor Import(PyObject* obj, const Options& o, Path* path) {
  if (PyCapsule_CheckExact(obj)) {
    *path = Path::kCapsule;
    return Finish(ImportCapsule(obj), o, false, false);
  }
  const TypeInfo& info = InfoOf(Py_TYPE(obj));
  if (info.is_array) {
    *path = Path::kArray;
    return Finish(ArrayOf(obj)->tensor, o, false, false);
  }
  if (info.api != nullptr) {
    std::optional<Tensor> t = TryImportViaExchangeApi(obj, info);
    if (t && (!o.device || t->device() == *o.device)) {
      *path = Path::kExchangeApi;
      return Finish(std::move(*t), o, info.immutable, false);
    }
    // Refused, or another device was asked for: the producer's __dlpack__ decides.
  }
  bool copied = false;
  Tensor t = ImportViaDunder(obj, o, &copied, path);
  return Finish(std::move(t), o, info.immutable, copied);
}

// from_dlpack(x, *, device=None, copy=None)
PyObject* FromDLPack(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    PyObject* a[3] = {nullptr, Py_None, Py_None};
    BindArgs("from_dlpack", args, nargs, kwnames, g.from_dlpack_args, 3, 1, a);
    if (a[0] == nullptr) TB_THROW(TypeError) << "from_dlpack() missing required argument 'x'";
    Options o{ParseDevice(a[1]), ParseCopy(a[2])};
    Path path;
    return WrapTensor(Import(a[0], o, &path)).release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

PyMethodDef kFromDLPackDef = {
    "from_dlpack", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&FromDLPack)),
    METH_FASTCALL | METH_KEYWORDS,
    "from_dlpack(x, *, device=None, copy=None)\n--\n\n"
    "Wraps `x` as a tensorbridge.Array without copying.\n\n"
    "`x` is any object with ``__dlpack__`` (numpy, torch, JAX, CuPy, ...), a DLPack capsule, or "
    "an\nArray. The producer's C exchange API is used when its type has one; otherwise\n"
    "``__dlpack__(max_version=(1, 3))``, falling back to the legacy protocol. ``copy=True`` asks "
    "for\na copy, ``copy=False`` forbids one (BufferError when the producer would need to copy);\n"
    "``device`` asks the producer for memory on that device. JAX arrays arrive read-only."};

}  // namespace

Tensor TensorFromObject(py::handle obj, py::handle device, py::handle copy) {
  Options o{ParseDevice(device.ptr()), ParseCopy(copy.ptr())};
  Path path;
  return Import(obj.ptr(), o, &path);
}

void BindDLPack(py::module_& m) {
  g.dlpack = Intern("__dlpack__");
  g.max_version = Py_BuildValue("(ii)", TB_DLPACK_MAJOR_VERSION, TB_DLPACK_MINOR_VERSION);
  if (g.max_version == nullptr) throw py::error_already_set();
  for (int mask = 0; mask < 4; ++mask) {
    py::list names;
    names.append("max_version");
    if (mask & 1) names.append("dl_device");
    if (mask & 2) names.append("copy");
    g.kwnames[mask] = py::tuple(names).release().ptr();
  }
  const char* fa[] = {"x", "device", "copy"};
  for (int i = 0; i < 3; ++i) g.from_dlpack_args[i] = Intern(fa[i]);

  PyObject* fn = PyCFunction_NewEx(&kFromDLPackDef, nullptr, m.attr("__name__").ptr());
  if (fn == nullptr) throw py::error_already_set();
  m.add_object("from_dlpack", py::reinterpret_steal<py::object>(fn));

  m.def(
      "_import_path",
      [](py::handle x, py::handle device, py::handle copy) {
        Options o{ParseDevice(device.ptr()), ParseCopy(copy.ptr())};
        Path path;
        Import(x.ptr(), o, &path);
        return PathName(path);
      },
      py::arg("x"), py::kw_only(), py::arg("device") = py::none(), py::arg("copy") = py::none(),
      "Debugging: imports `x` as from_dlpack would and says how: 'array', 'capsule', "
      "'exchange_api', 'dlpack' or 'dlpack_legacy'.");
}

}  // namespace tb::py
