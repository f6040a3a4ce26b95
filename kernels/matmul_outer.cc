// aten::addr (beta * self + alpha * outer(vec1, vec2)) and its in-place and out= forms.
//
// As torch's CPU kernel: the arithmetic runs in the result dtype, each product rounded to it
// (float16 / bfloat16 per operation, as torch's vectorized half loops); beta == 0 ignores self
// (NaN in it does not propagate); bool computes (beta && self) || (alpha && vec1 && vec2);
// integers wrap; complex products are c10::complex's textbook ones.
#include <complex>
#include <cstdint>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"

namespace tb {
namespace {

using kernels::Elementwise;
using kernels::opmath_t;

using In = std::vector<Tensor>;

// (x * y) as c10::complex computes it.
template <typename T>
T CMul(T x, T y) {
  return {x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real()};
}

// beta * s + (alpha * a) * b (alpha * a * b when beta is 0) in the complex dtype `dt`.
Tensor ComplexAddr(const char* op, DType dt, const Tensor& s, const Tensor& a, const Tensor& b,
                   const Scalar& beta, const Scalar& alpha, const Tensor* dest) {
  const std::complex<double> bz = beta.to_complex(), az = alpha.to_complex();
  return Elementwise(
      op, {{&s, dt}, {&a, dt}, {&b, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        auto run = [&](auto zero) {
          using T = decltype(zero);
          using R = typename T::value_type;
          const T bv(static_cast<R>(bz.real()), static_cast<R>(bz.imag()));
          const T av(static_cast<R>(az.real()), static_cast<R>(az.imag()));
          if (bz == 0.0) {
            kernels::Map<T, T, T, T>(
                out, [av](T, T u, T v) { return CMul(CMul(av, u), v); }, in[0], in[1], in[2]);
          } else {
            kernels::Map<T, T, T, T>(
                out, [av, bv](T x, T u, T v) { return CMul(bv, x) + CMul(CMul(av, u), v); }, in[0],
                in[1], in[2]);
          }
        };
        if (dt == DType::kComplex64) {
          run(std::complex<float>());
        } else {
          run(std::complex<double>());
        }
      });
}

Tensor AddrImpl(const char* op, const Tensor& self, const Tensor& vec1, const Tensor& vec2,
                const Scalar& beta, const Scalar& alpha, const Tensor* dest) {
  TB_CHECK(vec1.ndim() == 1 && vec2.ndim() == 1, ValueError)
      << op << ": vec1 and vec2 should be 1-dimensional vectors, got " << vec1.ndim() << "-D and "
      << vec2.ndim() << "-D";
  // In place, torch's addr_ checks self's rank before broadcasting (a RuntimeError there).
  TB_CHECK(dest != &self || self.ndim() == 2, RuntimeError)
      << op << ": 2D tensor expected, got " << self.ndim() << "D tensor for input";
  const DType dt = ResultType({Operand(self), Operand(vec1), Operand(vec2)});
  if (dt != DType::kBool) {
    kernels::CheckAlpha(op, dt, beta, "beta");
    kernels::CheckAlpha(op, dt, alpha, "alpha");
  }
  const Dims shape = {vec1.size(0), vec2.size(0)};
  const Tensor a = vec1.unsqueeze(1).expand(shape);
  const Tensor b = vec2.unsqueeze(0).expand(shape);
  const Tensor s = self.expand(BroadcastShapes({self.shape(), shape}, op));
  TB_CHECK(s.ndim() == 2 && s.size(0) == shape[0] && s.size(1) == shape[1], ValueError)
      << op << ": self of shape " << ShapeString(self.shape())
      << " does not broadcast to the outer product's shape " << ShapeString(shape);
  if (IsComplex(dt)) return ComplexAddr(op, dt, s, a, b, beta, alpha, dest);
  const bool beta_zero = beta.to_double() == 0;
  return Elementwise(
      op, {{&s, dt}, {&a, dt}, {&b, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_same_v<T, bool>) {
            const bool bv = beta.to_double() != 0, av = alpha.to_double() != 0;
            kernels::Map<T, T, T, T>(
                out, [bv, av](T x, T u, T v) -> T { return (bv && x) || (av && u && v); }, in[0],
                in[1], in[2]);
          } else {
            using M = opmath_t<T>;
            const T bv = kernels::ScalarTo<T>(op, "beta", beta);
            const T av = kernels::ScalarTo<T>(op, "alpha", alpha);
            auto mul = [](T x, T y) { return static_cast<T>(kernels::WrapMul<M>(M(x), M(y))); };
            auto add = [](T x, T y) { return static_cast<T>(kernels::WrapAdd<M>(M(x), M(y))); };
            if (beta_zero) {
              kernels::Map<T, T, T, T>(
                  out, [=](T, T u, T v) { return mul(mul(av, u), v); }, in[0], in[1], in[2]);
            } else {
              kernels::Map<T, T, T, T>(
                  out, [=](T x, T u, T v) { return add(mul(bv, x), mul(mul(av, u), v)); }, in[0],
                  in[1], in[2]);
            }
          }
        });
      });
}

Tensor Addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta,
            const Scalar& alpha) {
  return AddrImpl("aten::addr", self, vec1, vec2, beta, alpha, nullptr);
}
Tensor AddrInplace(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta,
                   const Scalar& alpha) {
  return AddrImpl("aten::addr_", self, vec1, vec2, beta, alpha, &self);
}
Tensor AddrOut(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta,
               const Scalar& alpha, const Tensor& out) {
  return AddrImpl("aten::addr.out", self, vec1, vec2, beta, alpha, &out);
}

}  // namespace

TB_REGISTER_KERNELS(matmul_outer) {
  table.RegisterKernel("aten::addr", DeviceType::kCPU, Boxed<&Addr>(), TB_HERE);
  table.RegisterKernel("aten::addr_", DeviceType::kCPU, Boxed<&AddrInplace>(), TB_HERE);
  table.RegisterKernel("aten::addr.out", DeviceType::kCPU, Boxed<&AddrOut>(), TB_HERE);
}

}  // namespace tb
