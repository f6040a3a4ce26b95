// Arithmetic: aten::add, sub, rsub, mul, div (true, "trunc" and "floor" rounding),
// true_divide and floor_divide, with their Scalar, in-place and out= overloads. Types promote
// as torch's do (kernels/promote_broadcast.h); Half/BFloat16 compute in float and round once.
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"
#include "kernels/complex_internal.h"

namespace tb {
namespace {

using kernels::BinaryMap;
using kernels::Elementwise;
using kernels::Input;
using kernels::kIsReducedFloat;
using kernels::LoopFlag;
using kernels::OnOpMath;
using kernels::opmath_t;
using kernels::WrapScalar;

using In = std::vector<Tensor>;
namespace cplx = kernels::complex;

// torch's mul, div and rounded div read a broadcast-scalar second operand of a Half/BFloat16
// op at its own precision (as float) instead of rounding it to the result type first.
std::optional<float> ReducedScalar(const Tensor& other, DType result) {
  if (!(result == DType::kBFloat16 || result == DType::kFloat16)) return std::nullopt;
  if (other.numel() != 1) return std::nullopt;
  float v = 0;
  TB_DISPATCH(other.dtype(), "scalar", TB_TYPES_ALL,
              [&] { v = kernels::Convert<float>(*other.data_as<const scalar_t>()); });
  return v;
}

// Runs f(x, b) in float over `self` (Half/BFloat16), b the scalar of ReducedScalar; `other`
// still takes part in broadcasting and the overlap checks.
template <typename F>
Tensor ReducedScalarOp(const char* op, const Tensor& self, const Tensor& other, DType dt, float b,
                       const Tensor* dest, F f) {
  return Elementwise(
      op, {{&self, dt}, {&other, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (kIsReducedFloat<T>) {
            kernels::Map<T, T>(
                out, [f, b](T x) { return static_cast<T>(f(static_cast<float>(x), b)); }, in[0]);
          }
        });
      });
}

// torch's div_floor_floating on Half/BFloat16 tensors: every step rounded to T.
template <typename T>
T FloorDivRounded(T a, T b) {
  auto r = [](float x) { return static_cast<float>(static_cast<T>(x)); };
  const float x = static_cast<float>(a), y = static_cast<float>(b);
  if (y == 0) return static_cast<T>(x / y);
  const float mod = r(std::fmod(x, y));
  float div = r(r(x - mod) / y);
  if (mod != 0 && (y < 0) != (mod < 0)) div = r(div - 1);
  if (div == 0) return static_cast<T>(std::copysign(0.f, r(x / y)));
  float floordiv = std::floor(div);
  if (r(div - floordiv) > 0.5f) floordiv = r(floordiv + 1);
  return static_cast<T>(floordiv);
}

// ---- add / sub / rsub -------------------------------------------------------------------------

// out = a + alpha * b in dtype dt.
void AddKernel(const char* op, DType dt, const Scalar& alpha, const Tensor& out, const In& in) {
  TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      const bool k = alpha.to_double() != 0;
      BinaryMap<T, T, T>(out, in[0], in[1], [k](bool x, bool y) { return x || (k && y); });
    } else if constexpr (std::is_integral_v<T>) {
      const T k = kernels::ScalarTo<T>(op, "alpha", alpha);
      if (k == 1) {
        BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return kernels::WrapAdd(x, y); });
      } else {
        BinaryMap<T, T, T>(out, in[0], in[1],
                           [k](T x, T y) { return kernels::WrapAdd(x, kernels::WrapMul(k, y)); });
      }
    } else {
      // alpha is rounded to the tensor type first, as torch does.
      const M k = static_cast<M>(kernels::ScalarTo<T>(op, "alpha", alpha));
      if (k == 1) {
        BinaryMap<T, T, T>(out, in[0], in[1], OnOpMath<T>([](M x, M y) { return x + y; }));
      } else if constexpr (kIsReducedFloat<T>) {
        // x + k * y in float, rounded once into T, as torch's vectorized loop computes it (a
        // fused multiply-add); torch's scalar loop, which it runs on the few elements past its
        // last whole vector, rounds k * y into T first, so those may differ by one ulp.
        BinaryMap<T, T, T>(out, in[0], in[1], [k](T x, T y) {
          return static_cast<T>(std::fma(k, static_cast<M>(y), static_cast<M>(x)));
        });
      } else {
        BinaryMap<T, T, T>(out, in[0], in[1], OnOpMath<T>([k](M x, M y) { return x + k * y; }));
      }
    }
  });
}

Tensor AddImpl(const char* op, const Tensor& self, const Tensor& other, const Scalar& alpha,
               const Tensor* dest) {
  const DType dt = ResultType({Operand(self), Operand(other)});
  kernels::CheckAlpha(op, dt, alpha);
  if (IsComplex(dt)) return cplx::Arithmetic(op, cplx::Arith::kAdd, dt, self, other, alpha, dest);
  return Elementwise(op, {{&self, dt}, {&other, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) { AddKernel(op, dt, alpha, out, in); });
}

void CheckSub(const char* op, const Tensor& self, const Tensor& other) {
  TB_CHECK(self.dtype() != DType::kBool || other.dtype() != DType::kBool, TypeError)
      << op << ": subtraction, the `-` operator, with two bool tensors is not supported. "
      << "Use the `^` or `logical_xor()` operator instead.";
  TB_CHECK(self.dtype() != DType::kBool && other.dtype() != DType::kBool, TypeError)
      << op << ": subtraction, the `-` operator, with a bool tensor is not supported. "
      << "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.";
}

Scalar Negate(const Scalar& s) {
  if (s.is_complex()) return Scalar(-s.to_complex());
  if (s.is_floating_point()) return Scalar(-s.to_double());
  return Scalar(static_cast<int64_t>(0ULL - static_cast<uint64_t>(s.to_int())));
}

// self - alpha * other (rsub passes the operands swapped).
Tensor SubImpl(const char* op, const Tensor& self, const Tensor& other, const Scalar& alpha,
               const Tensor* dest) {
  CheckSub(op, self, other);
  const DType dt = ResultType({Operand(self), Operand(other)});
  kernels::CheckAlpha(op, dt, alpha);
  const Scalar neg = Negate(alpha);
  if (IsComplex(dt)) return cplx::Arithmetic(op, cplx::Arith::kAdd, dt, self, other, neg, dest);
  return Elementwise(op, {{&self, dt}, {&other, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) { AddKernel(op, dt, neg, out, in); });
}

Tensor Add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return AddImpl("aten::add.Tensor", self, other, alpha, nullptr);
}
Tensor AddScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return AddImpl("aten::add.Scalar", self, WrapScalar(other), alpha, nullptr);
}
Tensor AddOut(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  return AddImpl("aten::add.out", self, other, alpha, &out);
}
Tensor AddScalarOut(const Tensor& self, const Scalar& other, const Scalar& alpha,
                    const Tensor& out) {
  return AddImpl("aten::add.Scalar_out", self, WrapScalar(other), alpha, &out);
}
Tensor AddInplace(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return AddImpl("aten::add_.Tensor", self, other, alpha, &self);
}
Tensor AddScalarInplace(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return AddImpl("aten::add_.Scalar", self, WrapScalar(other), alpha, &self);
}

Tensor Sub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return SubImpl("aten::sub.Tensor", self, other, alpha, nullptr);
}
Tensor SubScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return SubImpl("aten::sub.Scalar", self, WrapScalar(other), alpha, nullptr);
}
Tensor SubOut(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  return SubImpl("aten::sub.out", self, other, alpha, &out);
}
Tensor SubScalarOut(const Tensor& self, const Scalar& other, const Scalar& alpha,
                    const Tensor& out) {
  return SubImpl("aten::sub.Scalar_out", self, WrapScalar(other), alpha, &out);
}
Tensor SubInplace(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return SubImpl("aten::sub_.Tensor", self, other, alpha, &self);
}
Tensor SubScalarInplace(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return SubImpl("aten::sub_.Scalar", self, WrapScalar(other), alpha, &self);
}

// rsub(self, other, alpha) = other - alpha * self.
Tensor Rsub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return SubImpl("aten::rsub.Tensor", other, self, alpha, nullptr);
}
Tensor RsubScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return SubImpl("aten::rsub.Scalar", WrapScalar(other), self, alpha, nullptr);
}
Tensor RsubOut(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  return SubImpl("aten::rsub.Tensor_out", other, self, alpha, &out);
}

// ---- mul ----------------------------------------------------------------------------------------

Tensor MulImpl(const char* op, const Tensor& self, const Tensor& other, const Tensor* dest) {
  const DType dt = ResultType({Operand(self), Operand(other)});
  if (IsComplex(dt)) return cplx::Arithmetic(op, cplx::Arith::kMul, dt, self, other, 1, dest);
  if (auto b = ReducedScalar(other, dt)) {
    return ReducedScalarOp(op, self, other, dt, *b, dest, [](float x, float y) { return x * y; });
  }
  return Elementwise(
      op, {{&self, dt}, {&other, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using M = opmath_t<T>;
          if constexpr (std::is_same_v<T, bool>) {
            BinaryMap<T, T, T>(out, in[0], in[1], [](bool x, bool y) { return x && y; });
          } else if constexpr (std::is_integral_v<T>) {
            BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return kernels::WrapMul(x, y); });
          } else {
            BinaryMap<T, T, T>(out, in[0], in[1], OnOpMath<T>([](M x, M y) { return x * y; }));
          }
        });
      });
}

Tensor Mul(const Tensor& self, const Tensor& other) {
  return MulImpl("aten::mul.Tensor", self, other, nullptr);
}
Tensor MulScalar(const Tensor& self, const Scalar& other) {
  return MulImpl("aten::mul.Scalar", self, WrapScalar(other), nullptr);
}
Tensor MulOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return MulImpl("aten::mul.out", self, other, &out);
}
Tensor MulScalarOut(const Tensor& self, const Scalar& other, const Tensor& out) {
  return MulImpl("aten::mul.Scalar_out", self, WrapScalar(other), &out);
}
Tensor MulInplace(const Tensor& self, const Tensor& other) {
  return MulImpl("aten::mul_.Tensor", self, other, &self);
}
Tensor MulScalarInplace(const Tensor& self, const Scalar& other) {
  return MulImpl("aten::mul_.Scalar", self, WrapScalar(other), &self);
}

// ---- div ----------------------------------------------------------------------------------------

enum class Rounding { kNone, kTrunc, kFloor };

Rounding ParseRounding(const char* op, const std::optional<std::string>& mode) {
  if (!mode) return Rounding::kNone;
  if (*mode == "trunc") return Rounding::kTrunc;
  if (*mode == "floor") return Rounding::kFloor;
  TB_THROW(ValueError) << op << ": expected rounding_mode to be one of None, 'trunc', or "
                       << "'floor' but found '" << *mode << "'";
}

Tensor TrueDivide(const char* op, const Tensor& self, const Tensor& other, const Tensor* dest) {
  const DType dt = kernels::FloatResult(ResultType({Operand(self), Operand(other)}));
  if (IsComplex(dt)) return cplx::Arithmetic(op, cplx::Arith::kDiv, dt, self, other, 1, dest);
  if (auto b = ReducedScalar(other, dt)) {
    return ReducedScalarOp(op, self, other, dt, *b, dest, [](float x, float y) { return x / y; });
  }
  return Elementwise(
      op, {{&self, dt}, {&other, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using M = opmath_t<T>;
          BinaryMap<T, T, T>(out, in[0], in[1], OnOpMath<T>([](M x, M y) { return x / y; }));
        });
      });
}

// Division rounded toward zero or down; integer division by zero raises like torch.
Tensor RoundedDivide(const char* op, const Tensor& self, const Tensor& other, Rounding mode,
                     const Tensor* dest) {
  const DType dt = ResultType({Operand(self), Operand(other)});
  kernels::CheckNotBool(op, dt);
  if (auto b = ReducedScalar(other, dt)) {
    if (mode == Rounding::kTrunc) {
      return ReducedScalarOp(op, self, other, dt, *b, dest,
                             [](float x, float y) { return std::trunc(x / y); });
    }
    return ReducedScalarOp(op, self, other, dt, *b, dest,
                           [](float x, float y) { return kernels::FloorDivFloat(x, y); });
  }
  return Elementwise(
      op, {{&self, dt}, {&other, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_NUMERIC, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using M = opmath_t<T>;
          if constexpr (std::is_integral_v<T>) {
            LoopFlag zero;
            if (mode == Rounding::kTrunc) {
              BinaryMap<T, T, T>(out, in[0], in[1], [&zero](T x, T y) {
                if (y == 0) {
                  zero.Set();
                  return T(0);
                }
                return kernels::TruncDivInt(x, y);
              });
            } else {
              BinaryMap<T, T, T>(out, in[0], in[1], [&zero](T x, T y) {
                if (y == 0) {
                  zero.Set();
                  return T(0);
                }
                return kernels::FloorDivInt(x, y);
              });
            }
            TB_CHECK(!zero.get(), RuntimeError)
                << op << ": ZeroDivisionError (integer division by zero)";
          } else if (kIsReducedFloat<T>) {
            // As torch: the quotient is rounded to T before it is truncated; floor rounds each
            // step.
            if (mode == Rounding::kTrunc) {
              BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) {
                const T q = static_cast<T>(static_cast<M>(x) / static_cast<M>(y));
                return static_cast<T>(std::trunc(static_cast<M>(q)));
              });
            } else {
              BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return FloorDivRounded(x, y); });
            }
          } else if (mode == Rounding::kTrunc) {
            BinaryMap<T, T, T>(out, in[0], in[1],
                               OnOpMath<T>([](M x, M y) { return std::trunc(x / y); }));
          } else {
            BinaryMap<T, T, T>(out, in[0], in[1],
                               OnOpMath<T>([](M x, M y) { return kernels::FloorDivFloat(x, y); }));
          }
        });
      });
}

Tensor DivImpl(const char* op, const Tensor& self, const Tensor& other,
               const std::optional<std::string>& rounding_mode, const Tensor* dest) {
  Rounding mode = ParseRounding(op, rounding_mode);
  if (mode == Rounding::kNone) return TrueDivide(op, self, other, dest);
  return RoundedDivide(op, self, other, mode, dest);
}

Tensor Div(const Tensor& self, const Tensor& other) {
  return DivImpl("aten::div.Tensor", self, other, std::nullopt, nullptr);
}
Tensor DivScalar(const Tensor& self, const Scalar& other) {
  return DivImpl("aten::div.Scalar", self, WrapScalar(other), std::nullopt, nullptr);
}
Tensor DivMode(const Tensor& self, const Tensor& other, const std::optional<std::string>& mode) {
  return DivImpl("aten::div.Tensor_mode", self, other, mode, nullptr);
}
Tensor DivScalarMode(const Tensor& self, const Scalar& other,
                     const std::optional<std::string>& mode) {
  return DivImpl("aten::div.Scalar_mode", self, WrapScalar(other), mode, nullptr);
}
Tensor DivOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return DivImpl("aten::div.out", self, other, std::nullopt, &out);
}
Tensor DivOutMode(const Tensor& self, const Tensor& other, const std::optional<std::string>& mode,
                  const Tensor& out) {
  return DivImpl("aten::div.out_mode", self, other, mode, &out);
}
Tensor DivScalarOut(const Tensor& self, const Scalar& other, const Tensor& out) {
  return DivImpl("aten::div.Scalar_out", self, WrapScalar(other), std::nullopt, &out);
}
Tensor DivInplace(const Tensor& self, const Tensor& other) {
  return DivImpl("aten::div_.Tensor", self, other, std::nullopt, &self);
}
Tensor DivScalarInplace(const Tensor& self, const Scalar& other) {
  return DivImpl("aten::div_.Scalar", self, WrapScalar(other), std::nullopt, &self);
}
Tensor DivModeInplace(const Tensor& self, const Tensor& other,
                      const std::optional<std::string>& mode) {
  return DivImpl("aten::div_.Tensor_mode", self, other, mode, &self);
}
Tensor DivScalarModeInplace(const Tensor& self, const Scalar& other,
                            const std::optional<std::string>& mode) {
  return DivImpl("aten::div_.Scalar_mode", self, WrapScalar(other), mode, &self);
}

Tensor TrueDivideTensor(const Tensor& self, const Tensor& other) {
  return TrueDivide("aten::true_divide.Tensor", self, other, nullptr);
}
Tensor TrueDivideScalar(const Tensor& self, const Scalar& other) {
  return TrueDivide("aten::true_divide.Scalar", self, WrapScalar(other), nullptr);
}
Tensor TrueDivideInplace(const Tensor& self, const Tensor& other) {
  return TrueDivide("aten::true_divide_.Tensor", self, other, &self);
}
Tensor TrueDivideScalarInplace(const Tensor& self, const Scalar& other) {
  return TrueDivide("aten::true_divide_.Scalar", self, WrapScalar(other), &self);
}

Tensor FloorDivide(const Tensor& self, const Tensor& other) {
  return RoundedDivide("aten::floor_divide", self, other, Rounding::kFloor, nullptr);
}
Tensor FloorDivideScalar(const Tensor& self, const Scalar& other) {
  return RoundedDivide("aten::floor_divide.Scalar", self, WrapScalar(other), Rounding::kFloor,
                       nullptr);
}
Tensor FloorDivideOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return RoundedDivide("aten::floor_divide.out", self, other, Rounding::kFloor, &out);
}
Tensor FloorDivideInplace(const Tensor& self, const Tensor& other) {
  return RoundedDivide("aten::floor_divide_.Tensor", self, other, Rounding::kFloor, &self);
}
Tensor FloorDivideScalarInplace(const Tensor& self, const Scalar& other) {
  return RoundedDivide("aten::floor_divide_.Scalar", self, WrapScalar(other), Rounding::kFloor,
                       &self);
}

}  // namespace

TB_REGISTER_KERNELS(binary) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::add.Tensor", cpu, Boxed<&Add>(), TB_HERE);
  table.RegisterKernel("aten::add.Scalar", cpu, Boxed<&AddScalar>(), TB_HERE);
  table.RegisterKernel("aten::add.out", cpu, Boxed<&AddOut>(), TB_HERE);
  table.RegisterKernel("aten::add.Scalar_out", cpu, Boxed<&AddScalarOut>(), TB_HERE);
  table.RegisterKernel("aten::add_.Tensor", cpu, Boxed<&AddInplace>(), TB_HERE);
  table.RegisterKernel("aten::add_.Scalar", cpu, Boxed<&AddScalarInplace>(), TB_HERE);
  table.RegisterKernel("aten::sub.Tensor", cpu, Boxed<&Sub>(), TB_HERE);
  table.RegisterKernel("aten::sub.Scalar", cpu, Boxed<&SubScalar>(), TB_HERE);
  table.RegisterKernel("aten::sub.out", cpu, Boxed<&SubOut>(), TB_HERE);
  table.RegisterKernel("aten::sub.Scalar_out", cpu, Boxed<&SubScalarOut>(), TB_HERE);
  table.RegisterKernel("aten::sub_.Tensor", cpu, Boxed<&SubInplace>(), TB_HERE);
  table.RegisterKernel("aten::sub_.Scalar", cpu, Boxed<&SubScalarInplace>(), TB_HERE);
  table.RegisterKernel("aten::rsub.Tensor", cpu, Boxed<&Rsub>(), TB_HERE);
  table.RegisterKernel("aten::rsub.Scalar", cpu, Boxed<&RsubScalar>(), TB_HERE);
  table.RegisterKernel("aten::rsub.Tensor_out", cpu, Boxed<&RsubOut>(), TB_HERE);
  table.RegisterKernel("aten::mul.Tensor", cpu, Boxed<&Mul>(), TB_HERE);
  table.RegisterKernel("aten::mul.Scalar", cpu, Boxed<&MulScalar>(), TB_HERE);
  table.RegisterKernel("aten::mul.out", cpu, Boxed<&MulOut>(), TB_HERE);
  table.RegisterKernel("aten::mul.Scalar_out", cpu, Boxed<&MulScalarOut>(), TB_HERE);
  table.RegisterKernel("aten::mul_.Tensor", cpu, Boxed<&MulInplace>(), TB_HERE);
  table.RegisterKernel("aten::mul_.Scalar", cpu, Boxed<&MulScalarInplace>(), TB_HERE);
  table.RegisterKernel("aten::div.Tensor", cpu, Boxed<&Div>(), TB_HERE);
  table.RegisterKernel("aten::div.Scalar", cpu, Boxed<&DivScalar>(), TB_HERE);
  table.RegisterKernel("aten::div.Tensor_mode", cpu, Boxed<&DivMode>(), TB_HERE);
  table.RegisterKernel("aten::div.Scalar_mode", cpu, Boxed<&DivScalarMode>(), TB_HERE);
  table.RegisterKernel("aten::div.out", cpu, Boxed<&DivOut>(), TB_HERE);
  table.RegisterKernel("aten::div.out_mode", cpu, Boxed<&DivOutMode>(), TB_HERE);
  table.RegisterKernel("aten::div.Scalar_out", cpu, Boxed<&DivScalarOut>(), TB_HERE);
  table.RegisterKernel("aten::div_.Tensor", cpu, Boxed<&DivInplace>(), TB_HERE);
  table.RegisterKernel("aten::div_.Scalar", cpu, Boxed<&DivScalarInplace>(), TB_HERE);
  table.RegisterKernel("aten::div_.Tensor_mode", cpu, Boxed<&DivModeInplace>(), TB_HERE);
  table.RegisterKernel("aten::div_.Scalar_mode", cpu, Boxed<&DivScalarModeInplace>(), TB_HERE);
  table.RegisterKernel("aten::true_divide.Tensor", cpu, Boxed<&TrueDivideTensor>(), TB_HERE);
  table.RegisterKernel("aten::true_divide.Scalar", cpu, Boxed<&TrueDivideScalar>(), TB_HERE);
  table.RegisterKernel("aten::true_divide_.Tensor", cpu, Boxed<&TrueDivideInplace>(), TB_HERE);
  table.RegisterKernel("aten::true_divide_.Scalar", cpu, Boxed<&TrueDivideScalarInplace>(),
                       TB_HERE);
  table.RegisterKernel("aten::floor_divide", cpu, Boxed<&FloorDivide>(), TB_HERE);
  table.RegisterKernel("aten::floor_divide.Scalar", cpu, Boxed<&FloorDivideScalar>(), TB_HERE);
  table.RegisterKernel("aten::floor_divide.out", cpu, Boxed<&FloorDivideOut>(), TB_HERE);
  table.RegisterKernel("aten::floor_divide_.Tensor", cpu, Boxed<&FloorDivideInplace>(), TB_HERE);
  table.RegisterKernel("aten::floor_divide_.Scalar", cpu, Boxed<&FloorDivideScalarInplace>(),
                       TB_HERE);
}

}  // namespace tb
