// tensorbridge.Array: the C++ tensor seen from Python, framework neutral, and its producer side
// of DLPack: __dlpack__ / __dlpack_device__ (plain CPython methods: pybind11's generic dispatch
// costs more than the export) and the C exchange API table `Array.__dlpack_c_exchange_api__`.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <string_view>

#include "dlpack_py.h"

namespace tb::py {

PyTypeObject* g_array_type = nullptr;

// The PyArray inside a tensorbridge.Array. For the exact type, pybind11's simple instance
// layout is read directly (pybind11's cast first looks the type up in its registry).
PyArray* ArrayOf(PyObject* obj) {
  if (Py_TYPE(obj) == g_array_type) {
    auto* inst = reinterpret_cast<py::detail::instance*>(obj);
    if (inst->simple_layout && inst->simple_holder_constructed) {
      return static_cast<PyArray*>(inst->simple_value_holder[0]);
    }
  }
  if (!PyType_IsSubtype(Py_TYPE(obj), g_array_type)) {
    TB_THROW(TypeError) << "expected a tensorbridge.Array, got " << Py_TYPE(obj)->tp_name;
  }
  return &py::handle(obj).cast<PyArray&>();  // subclasses; an error for uninitialised ones
}

namespace {

py::tuple ToTuple(IntArrayRef v) {
  py::tuple t(v.size());
  for (size_t i = 0; i < v.size(); ++i) t[i] = v[i];
  return t;
}

std::vector<int64_t> Ints(const py::args& args) {
  // Accepts f(2, 3) and f((2, 3)).
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) {
    return args[0].cast<std::vector<int64_t>>();
  }
  return args.cast<std::vector<int64_t>>();
}

PyObject* g_dunder_args[4];  // stream, max_version, dl_device, copy

// True for a legacy export: max_version None or of major version 0.
bool WantsLegacy(PyObject* max_version) {
  if (max_version == Py_None) return true;
  if (PyTuple_CheckExact(max_version) && PyTuple_GET_SIZE(max_version) == 2 &&
      PyLong_CheckExact(PyTuple_GET_ITEM(max_version, 0))) {
    int overflow = 0;
    long major = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(max_version, 0), &overflow);
    return overflow == 0 ? major < 1 : overflow < 0;
  }
  try {
    return py::handle(max_version).cast<std::pair<int64_t, int64_t>>().first < 1;
  } catch (const py::cast_error&) {
    TB_THROW(TypeError) << "__dlpack__: max_version must be None or a (major, minor) pair, got "
                        << py::repr(max_version).cast<std::string>();
  }
}

// ---- export: Array.__dlpack__ and __dlpack_device__ -------------------------------------------

// __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None)
PyObject* ArrayDLPack(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    PyObject* a[4] = {Py_None, Py_None, Py_None, Py_None};
    BindArgs("__dlpack__", args, nargs, kwnames, g_dunder_args, 4, 0, a);
    PyObject *stream = a[0], *max_version = a[1], *dl_device = a[2];
    const Tensor& t = ArrayOf(self)->tensor;
    if (stream != Py_None && t.device().is_cpu()) {
      // The array API standard: no stream on CPU (-1, "no synchronization", is tolerated).
      int overflow = 0;
      if (!(PyLong_Check(stream) && PyLong_AsLongAndOverflow(stream, &overflow) == -1 &&
            overflow == 0)) {
        TB_THROW(ValueError) << "__dlpack__: stream must be None for a CPU array";
      }
    }
    std::optional<bool> want_copy = ParseCopy(a[3]);
    bool must_copy = false;
    if (dl_device != Py_None) {
      auto d = ParseDevicePair(dl_device, "__dlpack__: dl_device");
      Device target{static_cast<DeviceType>(d.first), d.second};
      if (target != t.device()) {
        if (!(target.is_cpu() && t.device().is_host_accessible())) {
          TB_THROW(BufferError) << "__dlpack__: cannot export an array on "
                                << DeviceString(t.device()) << " to device (" << d.first << ", "
                                << d.second << ")";
        }
        must_copy = true;
      }
    }
    if (must_copy && want_copy == false) {
      TB_THROW(BufferError) << "__dlpack__: exporting to the requested device needs a copy, "
                               "and copy=False forbids it";
    }
    const bool do_copy = must_copy || want_copy.value_or(false);
    const bool legacy = WantsLegacy(max_version);
    if (legacy) return NewCapsule(ExportDLPackLegacy(do_copy ? t.clone() : t));
    return NewCapsule(ExportDLPackVersioned(t, do_copy));
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

PyObject* ArrayDLPackDevice(PyObject* self, PyObject*) {
  try {
    Device d = ArrayOf(self)->tensor.device();
    return Py_BuildValue("(ii)", static_cast<int>(d.type), static_cast<int>(d.index));
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// ---- the C exchange API, producer side (Array's own table) ------------------------------------
// C entry points: no exception leaves them; failures set a Python error and return -1.

int ArrayToManaged(void* py_object, DLManagedTensorVersioned** out) {
  try {
    *out = ExportDLPackVersioned(ArrayOf(static_cast<PyObject*>(py_object))->tensor);
    return 0;
  } catch (...) {
    py::detail::try_translate_exceptions();
  }
  return -1;
}

int ArrayToDLTensor(void* py_object, DLTensor* out) {
  try {
    const Tensor& t = ArrayOf(static_cast<PyObject*>(py_object))->tensor;
    if (t.read_only()) {
      TB_THROW(BufferError) << "a read-only Array cannot be lent as a bare DLTensor, which "
                               "cannot say read-only; use managed_tensor_from_py_object_no_sync, "
                               "or a copy (from_dlpack(x, copy=True))";
    }
    out->data = t.data();
    out->device = DeviceToDLPack(t.device());
    out->ndim = static_cast<int32_t>(t.ndim());
    out->dtype = DTypeToDLPack(t.dtype());
    // The Array's own arrays: valid while it lives, which the caller guarantees for the call.
    out->shape = const_cast<int64_t*>(t.shape().data());
    out->strides = const_cast<int64_t*>(t.strides().data());
    out->byte_offset = 0;
    return 0;
  } catch (...) {
    py::detail::try_translate_exceptions();
  }
  return -1;
}

int ManagedToArray(DLManagedTensorVersioned* managed, void** out_py_object) {
  try {
    *out_py_object = WrapTensor(ImportDLPack(managed)).release().ptr();  // owns `managed` now
    return 0;
  } catch (...) {
    py::detail::try_translate_exceptions();
  }
  return -1;
}

int AllocateManaged(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                    void (*set_error)(void*, const char*, const char*)) {
  try {
    *out = nullptr;
    TB_CHECK(prototype->device.device_type == kDLCPU, BufferError)
        << "tensorbridge allocates CPU memory only";
    TB_CHECK(prototype->ndim >= 0 && (prototype->ndim == 0 || prototype->shape != nullptr),
             BufferError)
        << "malformed prototype DLTensor";
    DType dtype;
    TB_CHECK(DTypeFromDLPack(prototype->dtype, &dtype), BufferError) << "unsupported dtype";
    Tensor t = Tensor::Empty(IntArrayRef(prototype->shape, prototype->ndim), dtype);
    *out = ExportDLPackVersioned(t);
    return 0;
  } catch (const std::exception& e) {
    set_error(error_ctx, "BufferError", e.what());
  } catch (...) {
    set_error(error_ctx, "BufferError", "tensorbridge: allocation failed");
  }
  return -1;
}

int CpuWorkStream(DLDeviceType, int32_t, void** out_stream) {
  *out_stream = nullptr;  // CPU: no stream
  return 0;
}

constexpr DLPackExchangeAPI kArrayExchangeApi = {
    {{TB_DLPACK_MAJOR_VERSION, TB_DLPACK_MINOR_VERSION}, nullptr},
    &AllocateManaged,
    &ArrayToManaged,
    &ManagedToArray,
    &ArrayToDLTensor,
    &CpuWorkStream,
};

PyMethodDef kDLPackDef = {
    "__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&ArrayDLPack)),
    METH_FASTCALL | METH_KEYWORDS,
    "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
    "Exports this array as a DLPack capsule: legacy ('dltensor') when max_version is None or "
    "of\nmajor version 0, versioned ('dltensor_versioned', version 1.3) otherwise."};

PyMethodDef kDLPackDeviceDef = {"__dlpack_device__", &ArrayDLPackDevice, METH_NOARGS,
                                "__dlpack_device__($self, /)\n--\n\n"
                                "The (DLPack device type, device id) of this array."};

// ---- pickling: by value ----------------------------------------------------------------------

// True when the elements fill their memory span exactly once with positive strides: C order or
// a permutation of it (what torch's clone(memory_format=preserve_format) keeps).
bool IsDensePermutation(const Tensor& t) {
  if (IsSubByte(t.dtype())) return t.is_contiguous();
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dimensions of size > 1
  for (int64_t i = 0; i < t.ndim(); ++i) {
    if (t.shape()[i] == 0) return false;
    if (t.shape()[i] != 1) dims.emplace_back(t.strides()[i], t.shape()[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// Array.__reduce__: (tensorbridge._serialization.rebuild_array, (bytes, shape, strides, dtype)),
// a Python function, which pickle names by module and name (for torch's weights_only allow-list).
// The bytes are the elements in the array's own layout when IsDensePermutation, in C order
// otherwise; native byte order. Unpickling gives an Array over new memory of its own (writable,
// whatever the source).
py::tuple ArrayReduce(const PyArray& a) {
  const Tensor& t = a.tensor;
  TB_CHECK(t.device().is_host_accessible(), BufferError)
      << "pickle: a tensorbridge.Array on " << DeviceString(t.device())
      << " cannot be read from the host; copy it to the CPU first";
  const Tensor src = IsDensePermutation(t) ? t : t.contiguous();
  py::bytes data(static_cast<const char*>(src.data()), static_cast<size_t>(src.nbytes()));
  py::object rebuild = py::module_::import("tensorbridge._serialization").attr("rebuild_array");
  return py::make_tuple(rebuild, py::make_tuple(data, ToTuple(src.shape()), ToTuple(src.strides()),
                                                std::string(DTypeName(src.dtype()))));
}

PyArray ArrayFromBytes(const py::bytes& data, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides, const std::string& dtype_name) {
  DType dtype;
  TB_CHECK(DTypeFromName(dtype_name, &dtype), ValueError)
      << "_array_from_bytes: unknown dtype '" << dtype_name << "'";
  TB_CHECK(shape.size() == strides.size(), ValueError)
      << "_array_from_bytes: shape " << ShapeString(shape) << " and strides "
      << ShapeString(strides) << " differ in length";
  Tensor t = Tensor::Empty(shape, dtype);
  if (t.numel() > 0 && strides != std::vector<int64_t>(t.strides().begin(), t.strides().end())) {
    t = t.as_strided(shape, strides, 0);
    TB_CHECK(IsDensePermutation(t), ValueError)
        << "_array_from_bytes: strides " << ShapeString(strides) << " do not lay out shape "
        << ShapeString(shape) << " densely";
  }
  std::string_view bytes = data;
  TB_CHECK(static_cast<int64_t>(bytes.size()) == t.nbytes(), ValueError)
      << "_array_from_bytes: " << bytes.size() << " bytes for shape " << ShapeString(shape)
      << " of " << dtype_name << ", which takes " << t.nbytes();
  if (!bytes.empty()) std::memcpy(t.mutable_data(), bytes.data(), bytes.size());
  return PyArray{t};
}

}  // namespace

const DLPackExchangeAPI* ArrayExchangeApi() { return &kArrayExchangeApi; }

py::object WrapTensor(Tensor t) { return py::cast(PyArray{std::move(t)}); }

void BindArray(py::module_& m) {
  py::class_<PyArray> array(m, "Array", R"doc(
A tensor over memory that tensorbridge or another framework owns, described by shape,
strides (in elements), dtype, device and a read-only flag. Made by ``tensorbridge.from_dlpack``;
a DLPack producer itself (``numpy.from_dlpack(a)``, ``torch.from_dlpack(a)`` share its memory).
)doc");
  array.def_property_readonly("shape", [](const PyArray& a) { return ToTuple(a.tensor.shape()); })
      .def_property_readonly(
          "strides", [](const PyArray& a) { return ToTuple(a.tensor.strides()); },
          "Strides in elements (not bytes), as torch reports them.")
      .def_property_readonly(
          "dtype", [](const PyArray& a) { return std::string(DTypeName(a.tensor.dtype())); })
      .def_property_readonly("device",
                             [](const PyArray& a) { return DeviceString(a.tensor.device()); })
      .def_property_readonly(
          "data_ptr", [](const PyArray& a) { return reinterpret_cast<uintptr_t>(a.tensor.data()); })
      .def_property_readonly("read_only", [](const PyArray& a) { return a.tensor.read_only(); })
      .def_property_readonly("ndim", [](const PyArray& a) { return a.tensor.ndim(); })
      .def_property_readonly("size", [](const PyArray& a) { return a.tensor.numel(); })
      .def_property_readonly("nbytes", [](const PyArray& a) { return a.tensor.nbytes(); })
      .def_property_readonly("itemsize", [](const PyArray& a) { return a.tensor.element_size(); })
      .def("is_contiguous", [](const PyArray& a) { return a.tensor.is_contiguous(); })
      .def(
          "_dlpack_for_jax",
          [](const PyArray& a) {
            return py::reinterpret_steal<py::object>(
                NewCapsule(ExportDLPackLegacy(a.tensor, /*immutable_consumer=*/true)));
          },
          "A legacy DLPack capsule for JAX, read-only memory included: JAX never writes into "
          "the arrays it imports, and its importer takes only legacy capsules.")
      .def("__len__",
           [](const PyArray& a) {
             if (a.tensor.ndim() == 0) throw py::type_error("len() of a 0-d Array");
             return a.tensor.size(0);
           })
      .def(
          "numpy",
          [](const py::object& self) {
            return py::module_::import("numpy").attr("from_dlpack")(self);
          },
          "A numpy array over the same memory (read-only if this Array is).")
      // ---- views: same memory ----
      .def("transpose", [](const PyArray& a, int64_t d0,
                           int64_t d1) { return PyArray{a.tensor.transpose(d0, d1)}; })
      .def_property_readonly("T",
                             [](const PyArray& a) {
                               Dims dims(a.tensor.ndim());
                               for (int64_t i = 0; i < a.tensor.ndim(); ++i)
                                 dims[i] = a.tensor.ndim() - 1 - i;
                               return PyArray{a.tensor.permute(dims)};
                             })
      .def("permute", [](const PyArray& a,
                         const py::args& dims) { return PyArray{a.tensor.permute(Ints(dims))}; })
      .def("view", [](const PyArray& a,
                      const py::args& shape) { return PyArray{a.tensor.view(Ints(shape))}; })
      .def("reshape", [](const PyArray& a,
                         const py::args& shape) { return PyArray{a.tensor.reshape(Ints(shape))}; })
      .def("expand", [](const PyArray& a,
                        const py::args& shape) { return PyArray{a.tensor.expand(Ints(shape))}; })
      .def(
          "slice",
          [](const PyArray& a, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> stop,
             int64_t step) { return PyArray{a.tensor.slice(dim, start, stop, step)}; },
          py::arg("dim"), py::arg("start") = py::none(), py::arg("stop") = py::none(),
          py::arg("step") = 1)
      .def("select", [](const PyArray& a, int64_t dim,
                        int64_t index) { return PyArray{a.tensor.select(dim, index)}; })
      .def(
          "squeeze",
          [](const PyArray& a, std::optional<int64_t> dim) {
            return PyArray{dim ? a.tensor.squeeze(*dim) : a.tensor.squeeze()};
          },
          py::arg("dim") = py::none())
      .def("unsqueeze",
           [](const PyArray& a, int64_t dim) { return PyArray{a.tensor.unsqueeze(dim)}; })
      .def(
          "diagonal",
          [](const PyArray& a, int64_t offset, int64_t d1, int64_t d2) {
            return PyArray{a.tensor.diagonal(offset, d1, d2)};
          },
          py::arg("offset") = 0, py::arg("dim1") = 0, py::arg("dim2") = 1)
      .def(
          "as_strided",
          [](const PyArray& a, const std::vector<int64_t>& shape,
             const std::vector<int64_t>& strides,
             int64_t offset) { return PyArray{a.tensor.as_strided(shape, strides, offset)}; },
          py::arg("shape"), py::arg("strides"), py::arg("storage_offset") = 0)
      // ---- copies ----
      .def("contiguous", [](const PyArray& a) { return PyArray{a.tensor.contiguous()}; })
      .def("clone", [](const PyArray& a) { return PyArray{a.tensor.clone()}; })
      // ---- pickle and copy: pickling is by value (ArrayReduce); copy.copy shares the memory
      // as an Array is a view, copy.deepcopy copies it into new memory of our own ----
      .def("__reduce__", &ArrayReduce)
      .def("__copy__", [](const PyArray& a) { return PyArray{a.tensor}; })
      .def(
          "__deepcopy__", [](const PyArray& a, py::handle) { return PyArray{a.tensor.clone()}; },
          py::arg("memo"))
      .def("__repr__", [](const PyArray& a) {
        std::ostringstream os;
        os << "tensorbridge.Array(shape=" << ShapeString(a.tensor.shape())
           << ", dtype=" << DTypeName(a.tensor.dtype())
           << ", device=" << DeviceString(a.tensor.device())
           << (a.tensor.read_only() ? ", read_only=True" : "") << ")";
        return os.str();
      });

  m.def("_array_from_bytes", &ArrayFromBytes, py::arg("data"), py::arg("shape"), py::arg("strides"),
        py::arg("dtype"),
        "An Array over new memory holding `data`, the bytes of a pickled Array (its inverse: "
        "Array.__reduce__).");

  g_array_type = reinterpret_cast<PyTypeObject*>(array.ptr());
  const char* names[] = {"stream", "max_version", "dl_device", "copy"};
  for (int i = 0; i < 4; ++i) g_dunder_args[i] = Intern(names[i]);
  AddMethod(array, &kDLPackDef);
  AddMethod(array, &kDLPackDeviceDef);
  array.attr("__dlpack_c_exchange_api__") =
      py::capsule(const_cast<DLPackExchangeAPI*>(&kArrayExchangeApi), "dlpack_exchange_api");
}

}  // namespace tb::py
