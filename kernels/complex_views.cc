// The complex-only ops: aten::view_as_real and aten::view_as_complex (views of the same memory,
// as torch's), aten::_conj, conj_physical(_) and resolve_conj, aten::angle (real dtypes too),
// aten::complex and aten::polar.
//
// tensorbridge tensors carry no conjugate bit: aten::_conj returns the conjugated values in new
// memory (is_conj() is false on the result), so resolve_conj has nothing left to resolve.
#include <cmath>
#include <complex>
#include <optional>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"
#include "kernels/complex_internal.h"
#include "kernels/unary_internal.h"

namespace tb {
namespace {

using kernels::Map;
using kernels::TypeTag;

std::optional<DType> ComplexOf(DType t) {
  if (t == DType::kFloat32) return DType::kComplex64;
  if (t == DType::kFloat64) return DType::kComplex128;
  return std::nullopt;
}

DType RealOf(DType t) { return t == DType::kComplex64 ? DType::kFloat32 : DType::kFloat64; }

// Elements of `t` from the start of its storage, as torch's storage_offset().
int64_t StorageOffset(const Tensor& t) {
  const char* base = static_cast<const char*>(t.storage()->data());
  return (static_cast<const char*>(t.data()) - base) / t.element_size();
}

}  // namespace

Tensor kernels::complex::AsReal(const Tensor& self) {
  TB_CHECK(IsComplex(self.dtype()), RuntimeError)
      << "aten::view_as_real: is only supported for complex tensors, got "
      << DTypeName(self.dtype());
  const int64_t nd = self.ndim();
  Dims shape(static_cast<size_t>(nd + 1), 2), strides(static_cast<size_t>(nd + 1), 1);
  for (int64_t d = 0; d < nd; ++d) {
    shape[d] = self.shape()[d];
    strides[d] = 2 * self.strides()[d];
  }
  return Tensor(self.storage(), self.data(), shape, strides, RealOf(self.dtype()), self.device(),
                self.read_only());
}

namespace {

Tensor ViewAsReal(const Tensor& self) { return kernels::complex::AsReal(self); }

Tensor ViewAsComplex(const Tensor& self) {
  TB_CHECK(self.dtype() != DType::kFloat16, NotImplementedError)
      << "aten::view_as_complex: float16 pairs would be complex32, a dtype tensorbridge does "
         "not have";
  const std::optional<DType> c = ComplexOf(self.dtype());
  TB_CHECK(c.has_value(), RuntimeError)
      << "aten::view_as_complex: is only supported for float and double tensors, but got a "
         "tensor of scalar type: "
      << DTypeName(self.dtype());
  const int64_t nd = self.ndim();
  TB_CHECK(nd > 0 && self.shape()[nd - 1] == 2, RuntimeError)
      << "aten::view_as_complex: Tensor must have a last dimension of size 2, got shape "
      << ShapeString(self.shape());
  TB_CHECK(self.strides()[nd - 1] == 1, RuntimeError)
      << "aten::view_as_complex: Tensor must have a last dimension with stride 1";
  Dims shape(static_cast<size_t>(nd - 1)), strides(static_cast<size_t>(nd - 1));
  for (int64_t d = 0; d + 1 < nd; ++d) {
    shape[d] = self.shape()[d];
    TB_CHECK(self.strides()[d] % 2 == 0, RuntimeError)
        << "aten::view_as_complex: Tensor must have a stride divisible by 2 for all but last "
           "dimension";
    strides[d] = self.strides()[d] / 2;
  }
  TB_CHECK(StorageOffset(self) % 2 == 0, RuntimeError)
      << "aten::view_as_complex: Tensor must have a storage_offset divisible by 2";
  return Tensor(self.storage(), self.data(), shape, strides, *c, self.device(), self.read_only());
}

}  // namespace

Tensor kernels::complex::AsComplex(const Tensor& self) {
  const int64_t nd = self.ndim();
  bool viewable = nd > 0 && self.strides()[nd - 1] == 1 && StorageOffset(self) % 2 == 0;
  for (int64_t d = 0; d + 1 < nd; ++d) viewable = viewable && self.strides()[d] % 2 == 0;
  if (viewable) return ViewAsComplex(self);
  Tensor dense = Tensor::Empty(self.shape(), self.dtype());
  dense.copy_from(self);
  return ViewAsComplex(dense);
}

namespace {

Tensor Conj(const Tensor& self) {
  if (!IsComplex(self.dtype())) return self;
  return kernels::complex::Unary("aten::conj_physical", "aten::_conj", self, false);
}

Tensor ConjPhysical(const Tensor& self) {
  if (!IsComplex(self.dtype())) return self.clone();
  return kernels::complex::Unary("aten::conj_physical", "aten::conj_physical", self, false);
}

Tensor ConjPhysicalInplace(const Tensor& self) {
  if (!IsComplex(self.dtype())) return self;
  return kernels::complex::Unary("aten::conj_physical", "aten::conj_physical_", self, true);
}

Tensor ResolveConj(const Tensor& self) { return self; }

// angle: arg(z) for complex; 0 / pi (NaN kept) for real numbers, as a float result.
Tensor Angle(const Tensor& self) {
  if (IsComplex(self.dtype())) {
    return kernels::complex::Unary("aten::angle", "aten::angle", self, false);
  }
  const char* op = "aten::angle";
  kernels::unary::CheckReal(op, self.dtype());
  const DType result = IsFloatingPoint(self.dtype()) ? self.dtype() : DType::kFloat32;
  const Tensor src = Cast(self, result);
  Tensor out = Tensor::Empty(self.shape(), result);
  if (out.numel() == 0) return out;
  TB_DISPATCH(result, op, TB_TYPES_FLOAT, [&] {
    using T = scalar_t;
    using M = kernels::opmath_t<T>;
    Map<T, T>(
        out,
        [](T x) {
          const M v = static_cast<M>(x);
          if (std::isnan(v)) return x;
          return static_cast<T>(v < 0 ? kernels::unary::kPi<M> : M(0));
        },
        src);
  });
  return out;
}

// complex(real, imag): both float32 or both float64, broadcast.
Tensor Complex(const Tensor& real, const Tensor& imag) {
  const char* op = "aten::complex";
  TB_CHECK(real.dtype() == imag.dtype(), RuntimeError)
      << op << ": Expected object of scalar type " << DTypeName(real.dtype())
      << " but got scalar type " << DTypeName(imag.dtype()) << " for second argument";
  TB_CHECK(real.dtype() != DType::kFloat16, NotImplementedError)
      << op << ": float16 parts would give complex32, a dtype tensorbridge does not have";
  const std::optional<DType> c = ComplexOf(real.dtype());
  TB_CHECK(c.has_value(), RuntimeError)
      << op << ": Expected both inputs to be Half, Float or Double tensors but got "
      << DTypeName(real.dtype()) << " and " << DTypeName(imag.dtype());
  const DType r = real.dtype();
  return kernels::Elementwise(op, {{&real, r}, {&imag, r}}, *c, nullptr,
                              [&](const Tensor& out, const std::vector<Tensor>& in) {
                                TB_DISPATCH(r, op, TB_TYPES_F32_F64, [&] {
                                  using T = scalar_t;
                                  kernels::BinaryMap<std::complex<T>, T, T>(
                                      out, in[0], in[1],
                                      [](T x, T y) { return std::complex<T>(x, y); });
                                });
                              });
}

// polar(abs, angle) = abs * (cos(angle) + i sin(angle)).
Tensor Polar(const Tensor& abs, const Tensor& angle) {
  const char* op = "aten::polar";
  TB_CHECK(abs.dtype() == angle.dtype(), RuntimeError)
      << op << ": Expected object of scalar type " << DTypeName(abs.dtype())
      << " but got scalar type " << DTypeName(angle.dtype()) << " for second argument";
  const std::optional<DType> c = ComplexOf(abs.dtype());
  TB_CHECK(c.has_value(), RuntimeError)
      << op << ": Expected both inputs to be Float or Double tensors but got "
      << DTypeName(abs.dtype()) << " and " << DTypeName(angle.dtype());
  const DType r = abs.dtype();
  return kernels::Elementwise(op, {{&abs, r}, {&angle, r}}, *c, nullptr,
                              [&](const Tensor& out, const std::vector<Tensor>& in) {
                                TB_DISPATCH(r, op, TB_TYPES_F32_F64, [&] {
                                  using T = scalar_t;
                                  kernels::BinaryMap<std::complex<T>, T, T>(
                                      out, in[0], in[1], [](T m, T a) {
                                        return std::complex<T>(m * std::cos(a), m * std::sin(a));
                                      });
                                });
                              });
}

}  // namespace

TB_REGISTER_KERNELS(complex_views) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::view_as_real", cpu, Boxed<&ViewAsReal>(), TB_HERE);
  table.RegisterKernel("aten::view_as_complex", cpu, Boxed<&ViewAsComplex>(), TB_HERE);
  table.RegisterKernel("aten::_conj", cpu, Boxed<&Conj>(), TB_HERE);
  table.RegisterKernel("aten::conj_physical", cpu, Boxed<&ConjPhysical>(), TB_HERE);
  table.RegisterKernel("aten::_conj_physical", cpu, Boxed<&ConjPhysical>(), TB_HERE);
  table.RegisterKernel("aten::conj_physical_", cpu, Boxed<&ConjPhysicalInplace>(), TB_HERE);
  table.RegisterKernel("aten::resolve_conj", cpu, Boxed<&ResolveConj>(), TB_HERE);
  table.RegisterKernel("aten::angle", cpu, Boxed<&Angle>(), TB_HERE);
  table.RegisterKernel("aten::complex", cpu, Boxed<&Complex>(), TB_HERE);
  table.RegisterKernel("aten::polar", cpu, Boxed<&Polar>(), TB_HERE);
}

}  // namespace tb
