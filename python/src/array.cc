// tensorbridge.Array: the C++ tensor seen from Python, framework neutral.
#include <sstream>

#include "interop/dlpack_convert.h"
#include "py_common.h"

namespace tb::py {
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

}  // namespace

py::object WrapTensor(Tensor t) { return py::cast(PyArray{std::move(t)}); }

void BindArray(py::module_& m) {
  py::class_<PyArray>(m, "Array", R"doc(
A tensor over memory that tensorbridge or another framework owns, described by shape,
strides (in elements), dtype, device and a read-only flag. Made by ``tensorbridge.from_dlpack``;
a DLPack producer itself (``numpy.from_dlpack(a)``, ``torch.from_dlpack(a)`` share its memory).
)doc")
      .def_property_readonly("shape", [](const PyArray& a) { return ToTuple(a.tensor.shape()); })
      .def_property_readonly("strides",
                             [](const PyArray& a) { return ToTuple(a.tensor.strides()); },
                             "Strides in elements (not bytes), as torch reports them.")
      .def_property_readonly("dtype",
                             [](const PyArray& a) { return std::string(DTypeName(a.tensor.dtype())); })
      .def_property_readonly("device",
                             [](const PyArray& a) { return DeviceString(a.tensor.device()); })
      .def_property_readonly("data_ptr", [](const PyArray& a) {
        return reinterpret_cast<uintptr_t>(a.tensor.data());
      })
      .def_property_readonly("read_only", [](const PyArray& a) { return a.tensor.read_only(); })
      .def_property_readonly("ndim", [](const PyArray& a) { return a.tensor.ndim(); })
      .def_property_readonly("size", [](const PyArray& a) { return a.tensor.numel(); })
      .def_property_readonly("nbytes", [](const PyArray& a) { return a.tensor.nbytes(); })
      .def_property_readonly("itemsize", [](const PyArray& a) { return a.tensor.element_size(); })
      .def("is_contiguous", [](const PyArray& a) { return a.tensor.is_contiguous(); })
      .def("__len__", [](const PyArray& a) {
        if (a.tensor.ndim() == 0) throw py::type_error("len() of a 0-d Array");
        return a.tensor.size(0);
      })
      .def("numpy", [](py::object self) {
        return py::module_::import("numpy").attr("from_dlpack")(self);
      }, "A numpy array over the same memory (read-only if this Array is).")
      // ---- views: same memory ----
      .def("transpose", [](const PyArray& a, int64_t d0, int64_t d1) {
        return PyArray{a.tensor.transpose(d0, d1)};
      })
      .def_property_readonly("T", [](const PyArray& a) {
        Dims dims(a.tensor.ndim());
        for (int64_t i = 0; i < a.tensor.ndim(); ++i) dims[i] = a.tensor.ndim() - 1 - i;
        return PyArray{a.tensor.permute(dims)};
      })
      .def("permute", [](const PyArray& a, py::args dims) { return PyArray{a.tensor.permute(Ints(dims))}; })
      .def("view", [](const PyArray& a, py::args shape) { return PyArray{a.tensor.view(Ints(shape))}; })
      .def("reshape", [](const PyArray& a, py::args shape) { return PyArray{a.tensor.reshape(Ints(shape))}; })
      .def("expand", [](const PyArray& a, py::args shape) { return PyArray{a.tensor.expand(Ints(shape))}; })
      .def("slice", [](const PyArray& a, int64_t dim, std::optional<int64_t> start,
                       std::optional<int64_t> stop, int64_t step) {
        return PyArray{a.tensor.slice(dim, start, stop, step)};
      }, py::arg("dim"), py::arg("start") = py::none(), py::arg("stop") = py::none(), py::arg("step") = 1)
      .def("select", [](const PyArray& a, int64_t dim, int64_t index) {
        return PyArray{a.tensor.select(dim, index)};
      })
      .def("squeeze", [](const PyArray& a, std::optional<int64_t> dim) {
        return PyArray{dim ? a.tensor.squeeze(*dim) : a.tensor.squeeze()};
      }, py::arg("dim") = py::none())
      .def("unsqueeze", [](const PyArray& a, int64_t dim) { return PyArray{a.tensor.unsqueeze(dim)}; })
      .def("diagonal", [](const PyArray& a, int64_t offset, int64_t d1, int64_t d2) {
        return PyArray{a.tensor.diagonal(offset, d1, d2)};
      }, py::arg("offset") = 0, py::arg("dim1") = 0, py::arg("dim2") = 1)
      .def("as_strided", [](const PyArray& a, std::vector<int64_t> shape,
                            std::vector<int64_t> strides, int64_t offset) {
        return PyArray{a.tensor.as_strided(shape, strides, offset)};
      }, py::arg("shape"), py::arg("strides"), py::arg("storage_offset") = 0)
      // ---- copies ----
      .def("contiguous", [](const PyArray& a) { return PyArray{a.tensor.contiguous()}; })
      .def("clone", [](const PyArray& a) { return PyArray{a.tensor.clone()}; })
      .def("__repr__", [](const PyArray& a) {
        std::ostringstream os;
        os << "tensorbridge.Array(shape=" << ShapeString(a.tensor.shape())
           << ", dtype=" << DTypeName(a.tensor.dtype())
           << ", device=" << DeviceString(a.tensor.device())
           << (a.tensor.read_only() ? ", read_only=True" : "") << ")";
        return os.str();
      });
}

}  // namespace tb::py
