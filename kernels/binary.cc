// Binary arithmetic: aten::add.Tensor, aten::sub.Tensor, aten::mul.Tensor.
#include "dispatch/op_table.h"
#include "kernels/elementwise_internal.h"

namespace tb {
namespace {

template <typename F>
Tensor Binary(const char* op, const Tensor& self, const Tensor& other, F&& body) {
  TB_CHECK(self.dtype() == other.dtype(), NotImplementedError)
      << op << ": mixed dtypes " << DTypeName(self.dtype()) << " and " << DTypeName(other.dtype())
      << " are not supported yet";
  Dims shape = kernels::BroadcastShapes(self.shape(), other.shape(), op);
  Tensor out = Tensor::Empty(shape, self.dtype());
  Tensor a = self.expand(shape), b = other.expand(shape);
  TB_DISPATCH_NUMERIC(self.dtype(), op, [&] { body(scalar_t{}, out, a, b); });
  return out;
}

Tensor Add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return Binary("aten::add.Tensor", self, other, [&](auto zero, auto& out, auto& a, auto& b) {
    using T = decltype(zero);
    if (alpha.to_double() == 1.0) {
      kernels::BinaryLoop<T>(out, a, b, [](T x, T y) { return static_cast<T>(x + y); });
    } else {
      T k = static_cast<T>(alpha.is_floating_point() ? alpha.to_double() : alpha.to_int());
      kernels::BinaryLoop<T>(out, a, b, [k](T x, T y) { return static_cast<T>(x + k * y); });
    }
  });
}

Tensor Sub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return Binary("aten::sub.Tensor", self, other, [&](auto zero, auto& out, auto& a, auto& b) {
    using T = decltype(zero);
    T k = static_cast<T>(alpha.is_floating_point() ? alpha.to_double() : alpha.to_int());
    kernels::BinaryLoop<T>(out, a, b, [k](T x, T y) { return static_cast<T>(x - k * y); });
  });
}

Tensor Mul(const Tensor& self, const Tensor& other) {
  return Binary("aten::mul.Tensor", self, other, [&](auto zero, auto& out, auto& a, auto& b) {
    using T = decltype(zero);
    kernels::BinaryLoop<T>(out, a, b, [](T x, T y) { return static_cast<T>(x * y); });
  });
}

}  // namespace

TB_REGISTER_KERNELS(binary) {
  table.RegisterKernel("aten::add.Tensor", DeviceType::kCPU, Boxed<&Add>(), TB_HERE);
  table.RegisterKernel("aten::sub.Tensor", DeviceType::kCPU, Boxed<&Sub>(), TB_HERE);
  table.RegisterKernel("aten::mul.Tensor", DeviceType::kCPU, Boxed<&Mul>(), TB_HERE);
}

}  // namespace tb
