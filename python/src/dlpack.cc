// The DLPack Python protocol, both directions:
//  - from_dlpack(x): capsules (versioned and legacy), `__dlpack__` negotiation, and the C
//    exchange API fast path (`type(x).__dlpack_c_exchange_api__`, cached per type);
//  - Array.__dlpack__ / __dlpack_device__, and Array's own exchange API table.
#include <cstring>
#include <unordered_map>

#include "interop/dlpack_convert.h"
#include "py_common.h"

namespace tb::py {
namespace {

constexpr const char* kVersioned = "dltensor_versioned";
constexpr const char* kUsedVersioned = "used_dltensor_versioned";
constexpr const char* kLegacy = "dltensor";
constexpr const char* kUsedLegacy = "used_dltensor";
constexpr const char* kExchangeApi = "dlpack_exchange_api";

// ---- capsules ------------------------------------------------------------------------------

// Destructor of the capsules we hand out. A consumer that took the tensor renamed the
// capsule to "used_*" and owns it now; otherwise the tensor was never taken and we free it.
// Runs with the GIL held; keeps any Python error that is in flight.
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
py::capsule MakeCapsule(Managed* managed) {
  constexpr bool kIsVersioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  PyObject* cap = PyCapsule_New(managed, kIsVersioned ? kVersioned : kLegacy,
                                &CapsuleDestructor<Managed>);
  if (cap == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

Tensor ImportCapsule(py::handle capsule) {
  PyObject* c = capsule.ptr();
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

// ---- the C exchange API, consumer side ---------------------------------------------------------

// The exchange API of a type, or null. Cached per type; the cache holds a reference to the
// type so that its address cannot be reused by another type. Guarded by the GIL.
const DLPackExchangeAPI* ExchangeApiOf(PyTypeObject* type) {
  static auto* cache = new std::unordered_map<PyTypeObject*, const DLPackExchangeAPI*>();
  auto it = cache->find(type);
  if (it != cache->end()) return it->second;
  const DLPackExchangeAPI* api = nullptr;
  PyObject* attr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type),
                                          "__dlpack_c_exchange_api__");
  if (attr == nullptr) {
    PyErr_Clear();
  } else {
    if (PyCapsule_IsValid(attr, kExchangeApi)) {
      auto* header = static_cast<DLPackExchangeAPIHeader*>(PyCapsule_GetPointer(attr, kExchangeApi));
      // Walk to a table of the major version we speak.
      while (header != nullptr && header->version.major != TB_DLPACK_MAJOR_VERSION) {
        header = header->prev_api;
      }
      api = reinterpret_cast<const DLPackExchangeAPI*>(header);
      if (api != nullptr && api->managed_tensor_from_py_object_no_sync == nullptr) api = nullptr;
    }
    Py_DECREF(attr);
  }
  Py_INCREF(type);
  cache->emplace(type, api);
  return api;
}

bool IsJaxArray(py::handle obj) {
  PyObject* module = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())),
                                            "__module__");
  if (module == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool jax = false;
  if (PyUnicode_Check(module)) {
    const char* s = PyUnicode_AsUTF8(module);
    jax = s != nullptr && (std::strncmp(s, "jax", 3) == 0);  // jax, jaxlib
  }
  Py_DECREF(module);
  return jax;
}

// Parses the `device` argument: None, "cpu", or a (device_type, index) pair.
std::optional<Device> ParseDevice(py::handle device) {
  if (device.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(device)) {
    std::string s = device.cast<std::string>();
    if (s == "cpu") return Device{DeviceType::kCPU, 0};
    TB_THROW(ValueError) << "from_dlpack: device '" << s
                         << "' is not supported; tensorbridge computes on 'cpu'";
  }
  auto pair = device.cast<std::pair<int32_t, int32_t>>();
  TB_CHECK(IsKnownDeviceType(pair.first), ValueError)
      << "from_dlpack: unknown DLPack device type " << pair.first;
  return Device{static_cast<DeviceType>(pair.first), pair.second};
}

// ---- the C exchange API, producer side (Array's own table) -------------------------------------

int ArrayToManaged(void* py_object, DLManagedTensorVersioned** out) {
  try {
    auto& a = py::handle(static_cast<PyObject*>(py_object)).cast<PyArray&>();
    *out = ExportDLPackVersioned(a.tensor);
    return 0;
  } catch (const tb::Error& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  }
  return -1;
}

int ArrayToDLTensor(void* py_object, DLTensor* out) {
  try {
    auto& a = py::handle(static_cast<PyObject*>(py_object)).cast<PyArray&>();
    if (a.tensor.read_only()) {
      PyErr_SetString(PyExc_BufferError,
                      "a read-only Array cannot be lent as a bare DLTensor, which cannot say "
                      "read-only; use managed_tensor_from_py_object_no_sync");
      return -1;
    }
    out->data = a.tensor.data();
    out->device = DeviceToDLPack(a.tensor.device());
    out->ndim = static_cast<int32_t>(a.tensor.ndim());
    out->dtype = DTypeToDLPack(a.tensor.dtype());
    // Valid while the Array lives, which the caller guarantees for the call.
    out->shape = const_cast<int64_t*>(a.tensor.shape().data());
    out->strides = const_cast<int64_t*>(a.tensor.strides().data());
    out->byte_offset = 0;
    return 0;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  }
  return -1;
}

int ManagedToArray(DLManagedTensorVersioned* managed, void** out_py_object) {
  try {
    py::object obj = WrapTensor(ImportDLPack(managed));
    *out_py_object = obj.release().ptr();
    return 0;
  } catch (const tb::Error& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  } catch (py::error_already_set& e) {
    e.restore();
  }
  return -1;
}

int AllocateManaged(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                    void (*set_error)(void*, const char*, const char*)) {
  try {
    TB_CHECK(prototype->device.device_type == kDLCPU, BufferError)
        << "tensorbridge allocates CPU memory only";
    DType dtype;
    TB_CHECK(DTypeFromDLPack(prototype->dtype, &dtype), BufferError) << "unsupported dtype";
    Tensor t = Tensor::Empty(IntArrayRef(prototype->shape, prototype->ndim), dtype);
    *out = ExportDLPackVersioned(t);
    return 0;
  } catch (const std::exception& e) {
    set_error(error_ctx, "BufferError", e.what());
  }
  return -1;
}

int CpuWorkStream(DLDeviceType, int32_t, void** out_stream) {
  *out_stream = nullptr;  // CPU: no stream
  return 0;
}

const DLPackExchangeAPI kArrayExchangeApi = {
    {{TB_DLPACK_MAJOR_VERSION, TB_DLPACK_MINOR_VERSION}, nullptr},
    &AllocateManaged,
    &ArrayToManaged,
    &ManagedToArray,
    &ArrayToDLTensor,
    &CpuWorkStream,
};

}  // namespace

Tensor TensorFromObject(py::handle obj, py::handle device, py::handle copy) {
  std::optional<Device> want = ParseDevice(device);
  std::optional<bool> want_copy;
  if (!copy.is_none()) want_copy = copy.cast<bool>();
  auto finish = [&](Tensor t, bool copied) {
    if (want && t.device() != *want) {
      TB_THROW(BufferError) << "from_dlpack: the producer gave a tensor on "
                            << DeviceString(t.device()) << ", not on " << DeviceString(*want);
    }
    if (want_copy.value_or(false) && !copied) t = t.clone();
    return t;
  };
  if (py::isinstance<PyArray>(obj)) {
    return finish(obj.cast<PyArray&>().tensor, false);
  }
  if (PyCapsule_CheckExact(obj.ptr())) {
    return finish(ImportCapsule(obj), false);
  }
  const bool read_only_source = IsJaxArray(obj);
  // Fast path: the producer's C exchange API, when no device move or copy is asked for.
  if (!want && !want_copy.value_or(false)) {
    if (const DLPackExchangeAPI* api = ExchangeApiOf(Py_TYPE(obj.ptr()))) {
      DLManagedTensorVersioned* managed = nullptr;
      if (api->managed_tensor_from_py_object_no_sync(obj.ptr(), &managed) != 0) {
        throw py::error_already_set();
      }
      Tensor t = ImportDLPack(managed);
      return finish(read_only_source ? t.with_read_only(true) : t, false);
    }
  }
  if (!py::hasattr(obj, "__dlpack__")) {
    TB_THROW(TypeError) << "from_dlpack: expected an object with __dlpack__ (numpy, torch, JAX, "
                           "CuPy, ...), a DLPack capsule or a tensorbridge.Array, got "
                        << py::str(py::type::of(obj)).cast<std::string>();
  }
  py::object capsule;
  bool copied = false;
  {
    py::dict kwargs;
    kwargs["max_version"] = py::make_tuple(TB_DLPACK_MAJOR_VERSION, TB_DLPACK_MINOR_VERSION);
    if (want) kwargs["dl_device"] = py::make_tuple(static_cast<int>(want->type), want->index);
    if (want_copy) kwargs["copy"] = *want_copy;
    try {
      capsule = obj.attr("__dlpack__")(**kwargs);
      copied = want_copy.value_or(false);
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_TypeError)) throw;
      // A producer of the legacy protocol: no keywords, no versioned capsule.
      capsule = obj.attr("__dlpack__")();
    }
  }
  Tensor t = ImportCapsule(capsule);
  return finish(read_only_source ? t.with_read_only(true) : t, copied);
}

void BindDLPack(py::module_& m) {
  m.def("from_dlpack", [](py::handle x, py::handle device, py::handle copy) {
    return PyArray{TensorFromObject(x, device, copy)};
  }, py::arg("x"), py::kw_only(), py::arg("device") = py::none(), py::arg("copy") = py::none(),
  R"doc(Wraps `x` as a tensorbridge.Array without copying.

`x` is any object with ``__dlpack__`` (numpy, torch, JAX, CuPy, ...), a DLPack capsule, or an
Array. The producer's C exchange API is used when its type has one; otherwise
``__dlpack__(max_version=(1, 3))``, falling back to the legacy protocol. ``copy=True`` asks for
a copy, ``copy=False`` forbids one (BufferError when the producer would need to copy);
``device`` asks the producer for memory on that device. JAX arrays arrive read-only.)doc");

  auto array = py::type::of<PyArray>();
  array.attr("__dlpack_c_exchange_api__") =
      py::capsule(const_cast<DLPackExchangeAPI*>(&kArrayExchangeApi), kExchangeApi);

  array.attr("__dlpack_device__") = py::cpp_function(
      [](const PyArray& a) {
        return py::make_tuple(static_cast<int>(a.tensor.device().type), a.tensor.device().index);
      },
      py::is_method(array));

  array.attr("__dlpack__") = py::cpp_function(
      [](const PyArray& a, py::handle stream, py::handle max_version, py::handle dl_device,
         py::handle copy) -> py::object {
        const Tensor& t = a.tensor;
        if (!stream.is_none() && t.device().is_cpu()) {
          // The array API standard: on CPU the stream is None (-1 is tolerated as "no sync").
          if (!(py::isinstance<py::int_>(stream) && stream.cast<int64_t>() == -1)) {
            TB_THROW(ValueError) << "__dlpack__: stream must be None for a CPU array";
          }
        }
        std::optional<bool> want_copy;
        if (!copy.is_none()) want_copy = copy.cast<bool>();
        bool must_copy = false;
        if (!dl_device.is_none()) {
          auto d = dl_device.cast<std::pair<int32_t, int32_t>>();
          Device target{static_cast<DeviceType>(d.first), d.second};
          if (target != t.device()) {
            if (target.is_cpu() && t.device().is_host_accessible()) {
              must_copy = true;
            } else {
              TB_THROW(BufferError) << "__dlpack__: cannot export an array on "
                                    << DeviceString(t.device()) << " to device ("
                                    << d.first << ", " << d.second << ")";
            }
          }
        }
        if (must_copy && want_copy == false) {
          TB_THROW(BufferError) << "__dlpack__: exporting to the requested device needs a copy, "
                                   "and copy=False forbids it";
        }
        const bool do_copy = must_copy || want_copy.value_or(false);
        bool legacy = max_version.is_none();
        if (!legacy) {
          auto mv = max_version.cast<std::pair<int64_t, int64_t>>();
          legacy = mv.first < 1;
        }
        if (legacy) {
          Tensor src = do_copy ? t.clone() : t;
          return MakeCapsule(ExportDLPackLegacy(src));
        }
        return MakeCapsule(ExportDLPackVersioned(t, do_copy));
      },
      py::is_method(array), py::kw_only(), py::arg("stream") = py::none(),
      py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
      py::arg("copy") = py::none());
}

}  // namespace tb::py
