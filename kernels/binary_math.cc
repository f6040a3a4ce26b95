// Element-wise binary math: aten::pow, maximum, minimum, fmax, fmin, fmod, remainder, atan2,
// hypot, copysign and xlogy, with their Scalar, in-place and out= overloads.
#include <cmath>
#include <limits>
#include <type_traits>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"
#include "kernels/complex_internal.h"

namespace tb {
namespace {

using kernels::BinaryMap;
using kernels::Elementwise;
using kernels::kIsFloating;
using kernels::LoopFlag;
using kernels::OnOpMath;
using kernels::opmath_t;
using kernels::ScalarOperand;
using kernels::WrapScalar;

using In = std::vector<Tensor>;

// Two inputs read in `dt`, a result of `dt`.
template <typename Body>
Tensor Binary(const char* op, const Tensor& a, const Tensor& b, DType dt, const Tensor* dest,
              Body body) {
  return Elementwise(op, {{&a, dt}, {&b, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) { body(out, in[0], in[1]); });
}

DType Promote(const Tensor& a, const Tensor& b) { return ResultType({Operand(a), Operand(b)}); }

// ---- pow -----------------------------------------------------------------------------------

// torch's powi: exponentiation by squaring with wrapping; negative exponents give 0 except
// for bases 1 and -1.
template <typename T>
T PowInt(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  while (exp != 0) {
    if (exp & 1) result = kernels::WrapMul(result, base);
    exp = static_cast<T>(exp / 2);
    base = kernels::WrapMul(base, base);
  }
  return result;
}

// Fills `out` (of dtype dt) with ones.
void FillOnes(const char* op, DType dt, const Tensor& out) {
  TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T one = static_cast<T>(1);
    kernels::Map<T, T>(
        out, [one](T) { return one; }, out);
  });
}

Tensor PowTensorTensor(const char* op, const Tensor& self, const Tensor& exponent,
                       const Tensor* dest) {
  const DType dt = Promote(self, exponent);
  kernels::CheckNotBool(op, dt);
  if (IsComplex(dt)) {
    return kernels::complex::Arithmetic(op, kernels::complex::Arith::kPow, dt, self, exponent, 1,
                                        dest);
  }
  return Binary(
      op, self, exponent, dt, dest, [&](const Tensor& out, const Tensor& a, const Tensor& b) {
        TB_DISPATCH_T(dt, op, TB_TYPES_NUMERIC, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using M = opmath_t<T>;
          if constexpr (std::is_integral_v<T>) {
            BinaryMap<T, T, T>(out, a, b, [](T x, T y) { return PowInt(x, y); });
          } else {
            BinaryMap<T, T, T>(out, a, b, OnOpMath<T>([](M x, M y) { return std::pow(x, y); }));
          }
        });
      });
}

Tensor PowTensorScalar(const char* op, const Tensor& self, const Scalar& exponent,
                       const Tensor* dest) {
  const DType dt = ResultType({Operand(self), ScalarOperand(exponent)});
  kernels::CheckNotBool(op, dt);
  TB_CHECK(!(IsIntegral(dt, true) && !exponent.is_floating_point() && exponent.to_int() < 0),
           ValueError)
      << op << ": integers to negative integer powers are not allowed (exponent "
      << exponent.to_int() << ", dtype " << DTypeName(dt) << ")";
  if (exponent.is_complex() && exponent.to_complex().imag() != 0) {
    return kernels::complex::Arithmetic(op, kernels::complex::Arith::kPow, dt, self,
                                        WrapScalar(exponent), 1, dest);
  }
  const double e = exponent.to_complex().real();
  if (IsComplex(dt)) return kernels::complex::PowScalar(op, dt, self, e, dest);
  return Elementwise(op, {{&self, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
    if (e == 0) return FillOnes(op, dt, out);
    TB_DISPATCH_T(dt, op, TB_TYPES_NUMERIC, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using M = opmath_t<T>;
      auto run = [&](auto f) {
        kernels::Map<T, T>(
            out, [f](T x) { return static_cast<T>(f(static_cast<M>(x))); }, in[0]);
      };
      if constexpr (std::is_integral_v<T>) {
        const T k = kernels::ScalarTo<T>(op, "exponent", exponent);
        if (k == 1) return run([](M x) { return x; });
        if (k == 2) return run([](M x) { return kernels::WrapMul(x, x); });
        run([k](M x) { return PowInt<T>(x, k); });
      } else {
        if (e == 1) return run([](M x) { return x; });
        if (e == 2) return run([](M x) { return x * x; });
        if (e == 3) return run([](M x) { return x * x * x; });
        if (e == 0.5) return run([](M x) { return std::sqrt(x); });
        if (e == -0.5) return run([](M x) { return M(1) / std::sqrt(x); });
        if (e == -1) return run([](M x) { return M(1) / x; });
        if (e == -2) return run([](M x) { return M(1) / (x * x); });
        const M k = static_cast<M>(e);
        run([k](M x) { return std::pow(x, k); });
      }
    });
  });
}

Tensor PowScalarTensor(const char* op, const Scalar& self, const Tensor& exponent,
                       const Tensor* dest) {
  const DType dt = ResultType({ScalarOperand(self), Operand(exponent)});
  if (!self.is_bool() && self.to_complex() == std::complex<double>(1.0)) {
    kernels::CheckNotBool(op, dt);
    return Elementwise(op, {{&exponent, dt}}, dt, dest,
                       [&](const Tensor& out, const In&) { FillOnes(op, dt, out); });
  }
  return PowTensorTensor(op, WrapScalar(self), exponent, dest);
}

Tensor Pow(const Tensor& self, const Tensor& exponent) {
  return PowTensorTensor("aten::pow.Tensor_Tensor", self, exponent, nullptr);
}
Tensor PowTS(const Tensor& self, const Scalar& exponent) {
  return PowTensorScalar("aten::pow.Tensor_Scalar", self, exponent, nullptr);
}
Tensor PowST(const Scalar& self, const Tensor& exponent) {
  return PowScalarTensor("aten::pow.Scalar", self, exponent, nullptr);
}
Tensor PowOut(const Tensor& self, const Tensor& exponent, const Tensor& out) {
  return PowTensorTensor("aten::pow.Tensor_Tensor_out", self, exponent, &out);
}
Tensor PowTSOut(const Tensor& self, const Scalar& exponent, const Tensor& out) {
  return PowTensorScalar("aten::pow.Tensor_Scalar_out", self, exponent, &out);
}
Tensor PowSTOut(const Scalar& self, const Tensor& exponent, const Tensor& out) {
  return PowScalarTensor("aten::pow.Scalar_out", self, exponent, &out);
}
Tensor PowInplace(const Tensor& self, const Tensor& exponent) {
  return PowTensorTensor("aten::pow_.Tensor", self, exponent, &self);
}
Tensor PowScalarInplace(const Tensor& self, const Scalar& exponent) {
  return PowTensorScalar("aten::pow_.Scalar", self, exponent, &self);
}

// ---- maximum / minimum / fmax / fmin -------------------------------------------------------

enum class Extremum { kMaximum, kMinimum, kFmax, kFmin };

Tensor ExtremumImpl(const char* op, Extremum kind, const Tensor& self, const Tensor& other,
                    const Tensor* dest) {
  const DType dt = Promote(self, other);
  return Binary(
      op, self, other, dt, dest, [&](const Tensor& out, const Tensor& a, const Tensor& b) {
        TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using M = opmath_t<T>;
          if constexpr (kIsFloating<T>) {
            const M nan = std::numeric_limits<M>::quiet_NaN();
            switch (kind) {
              case Extremum::kMaximum:
                return BinaryMap<T, T, T>(out, a, b, OnOpMath<T>([nan](M x, M y) {
                                            return (x != x || y != y) ? nan : (x < y ? y : x);
                                          }));
              case Extremum::kMinimum:
                return BinaryMap<T, T, T>(out, a, b, OnOpMath<T>([nan](M x, M y) {
                                            return (x != x || y != y) ? nan : (y < x ? y : x);
                                          }));
              case Extremum::kFmax:
                return BinaryMap<T, T, T>(out, a, b,
                                          OnOpMath<T>([](M x, M y) { return std::fmax(x, y); }));
              case Extremum::kFmin:
                return BinaryMap<T, T, T>(out, a, b,
                                          OnOpMath<T>([](M x, M y) { return std::fmin(x, y); }));
            }
          } else if (kind == Extremum::kMaximum || kind == Extremum::kFmax) {
            BinaryMap<T, T, T>(out, a, b, [](T x, T y) { return x < y ? y : x; });
          } else {
            BinaryMap<T, T, T>(out, a, b, [](T x, T y) { return y < x ? y : x; });
          }
        });
      });
}

Tensor Maximum(const Tensor& self, const Tensor& other) {
  return ExtremumImpl("aten::maximum", Extremum::kMaximum, self, other, nullptr);
}
Tensor MaximumOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return ExtremumImpl("aten::maximum.out", Extremum::kMaximum, self, other, &out);
}
Tensor Minimum(const Tensor& self, const Tensor& other) {
  return ExtremumImpl("aten::minimum", Extremum::kMinimum, self, other, nullptr);
}
Tensor MinimumOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return ExtremumImpl("aten::minimum.out", Extremum::kMinimum, self, other, &out);
}
Tensor Fmax(const Tensor& self, const Tensor& other) {
  return ExtremumImpl("aten::fmax", Extremum::kFmax, self, other, nullptr);
}
Tensor FmaxOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return ExtremumImpl("aten::fmax.out", Extremum::kFmax, self, other, &out);
}
Tensor Fmin(const Tensor& self, const Tensor& other) {
  return ExtremumImpl("aten::fmin", Extremum::kFmin, self, other, nullptr);
}
Tensor FminOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return ExtremumImpl("aten::fmin.out", Extremum::kFmin, self, other, &out);
}

// ---- fmod / remainder -----------------------------------------------------------------------

// fmod (C's truncated remainder, the sign of the dividend) or remainder (Python's, the sign
// of the divisor). Integer division by zero raises like torch.
Tensor ModImpl(const char* op, bool python_mod, const Tensor& self, const Tensor& other,
               const Tensor* dest) {
  const DType dt = Promote(self, other);
  kernels::CheckNotBool(op, dt);
  return Binary(
      op, self, other, dt, dest, [&](const Tensor& out, const Tensor& a, const Tensor& b) {
        TB_DISPATCH_T(dt, op, TB_TYPES_NUMERIC, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using M = opmath_t<T>;
          if constexpr (std::is_integral_v<T>) {
            LoopFlag zero;
            BinaryMap<T, T, T>(out, a, b, [&zero, python_mod](T x, T y) {
              if (y == 0) {
                zero.Set();
                return T(0);
              }
              return python_mod ? kernels::FloorModInt(x, y) : kernels::TruncModInt(x, y);
            });
            TB_CHECK(!zero.get(), RuntimeError)
                << op << ": ZeroDivisionError (integer modulo by zero)";
          } else if (python_mod) {
            BinaryMap<T, T, T>(out, a, b,
                               OnOpMath<T>([](M x, M y) { return kernels::FloorModFloat(x, y); }));
          } else {
            BinaryMap<T, T, T>(out, a, b, OnOpMath<T>([](M x, M y) { return std::fmod(x, y); }));
          }
        });
      });
}

Tensor Fmod(const Tensor& self, const Tensor& other) {
  return ModImpl("aten::fmod.Tensor", false, self, other, nullptr);
}
Tensor FmodScalar(const Tensor& self, const Scalar& other) {
  return ModImpl("aten::fmod.Scalar", false, self, WrapScalar(other), nullptr);
}
Tensor FmodOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return ModImpl("aten::fmod.Tensor_out", false, self, other, &out);
}
Tensor FmodScalarOut(const Tensor& self, const Scalar& other, const Tensor& out) {
  return ModImpl("aten::fmod.Scalar_out", false, self, WrapScalar(other), &out);
}
Tensor FmodInplace(const Tensor& self, const Tensor& other) {
  return ModImpl("aten::fmod_.Tensor", false, self, other, &self);
}
Tensor FmodScalarInplace(const Tensor& self, const Scalar& other) {
  return ModImpl("aten::fmod_.Scalar", false, self, WrapScalar(other), &self);
}
Tensor Remainder(const Tensor& self, const Tensor& other) {
  return ModImpl("aten::remainder.Tensor", true, self, other, nullptr);
}
Tensor RemainderScalar(const Tensor& self, const Scalar& other) {
  return ModImpl("aten::remainder.Scalar", true, self, WrapScalar(other), nullptr);
}
Tensor RemainderScalarTensor(const Scalar& self, const Tensor& other) {
  return ModImpl("aten::remainder.Scalar_Tensor", true, WrapScalar(self), other, nullptr);
}
Tensor RemainderOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return ModImpl("aten::remainder.Tensor_out", true, self, other, &out);
}
Tensor RemainderScalarOut(const Tensor& self, const Scalar& other, const Tensor& out) {
  return ModImpl("aten::remainder.Scalar_out", true, self, WrapScalar(other), &out);
}
Tensor RemainderInplace(const Tensor& self, const Tensor& other) {
  return ModImpl("aten::remainder_.Tensor", true, self, other, &self);
}
Tensor RemainderScalarInplace(const Tensor& self, const Scalar& other) {
  return ModImpl("aten::remainder_.Scalar", true, self, WrapScalar(other), &self);
}

// ---- float ops: atan2, hypot, copysign, xlogy ------------------------------------------------

enum class FloatOp { kAtan2, kHypot, kCopysign, kXlogy };

template <typename M>
M Xlogy(M x, M y) {
  if (std::isnan(y)) return y;
  if (x == 0) return 0;
  return x * std::log(y);
}

// Integral and bool inputs compute in float32, except hypot, which torch implements for
// floating types only.
Tensor FloatOpImpl(const char* op, FloatOp kind, const Tensor& self, const Tensor& other,
                   const Tensor* dest) {
  DType dt = Promote(self, other);
  if (kind == FloatOp::kHypot) kernels::CheckFloating(op, dt);
  dt = kernels::FloatResult(dt);
  return Binary(op, self, other, dt, dest,
                [&](const Tensor& out, const Tensor& a, const Tensor& b) {
                  TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
                    using T = typename decltype(tag)::type;
                    using M = opmath_t<T>;
                    switch (kind) {
                      case FloatOp::kAtan2:
                        return BinaryMap<T, T, T>(
                            out, a, b, OnOpMath<T>([](M x, M y) { return std::atan2(x, y); }));
                      case FloatOp::kHypot:
                        return BinaryMap<T, T, T>(
                            out, a, b, OnOpMath<T>([](M x, M y) { return std::hypot(x, y); }));
                      case FloatOp::kCopysign:
                        return BinaryMap<T, T, T>(
                            out, a, b, OnOpMath<T>([](M x, M y) { return std::copysign(x, y); }));
                      case FloatOp::kXlogy:
                        return BinaryMap<T, T, T>(
                            out, a, b, OnOpMath<T>([](M x, M y) { return Xlogy(x, y); }));
                    }
                  });
                });
}

Tensor Atan2(const Tensor& self, const Tensor& other) {
  return FloatOpImpl("aten::atan2", FloatOp::kAtan2, self, other, nullptr);
}
Tensor Atan2Out(const Tensor& self, const Tensor& other, const Tensor& out) {
  return FloatOpImpl("aten::atan2.out", FloatOp::kAtan2, self, other, &out);
}
Tensor Atan2Inplace(const Tensor& self, const Tensor& other) {
  return FloatOpImpl("aten::atan2_", FloatOp::kAtan2, self, other, &self);
}
Tensor Hypot(const Tensor& self, const Tensor& other) {
  return FloatOpImpl("aten::hypot", FloatOp::kHypot, self, other, nullptr);
}
Tensor HypotOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return FloatOpImpl("aten::hypot.out", FloatOp::kHypot, self, other, &out);
}
Tensor HypotInplace(const Tensor& self, const Tensor& other) {
  return FloatOpImpl("aten::hypot_", FloatOp::kHypot, self, other, &self);
}
Tensor Copysign(const Tensor& self, const Tensor& other) {
  return FloatOpImpl("aten::copysign.Tensor", FloatOp::kCopysign, self, other, nullptr);
}
Tensor CopysignScalar(const Tensor& self, const Scalar& other) {
  return FloatOpImpl("aten::copysign.Scalar", FloatOp::kCopysign, self, WrapScalar(other), nullptr);
}
Tensor CopysignOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return FloatOpImpl("aten::copysign.out", FloatOp::kCopysign, self, other, &out);
}
Tensor CopysignInplace(const Tensor& self, const Tensor& other) {
  return FloatOpImpl("aten::copysign_.Tensor", FloatOp::kCopysign, self, other, &self);
}
Tensor CopysignScalarInplace(const Tensor& self, const Scalar& other) {
  return FloatOpImpl("aten::copysign_.Scalar", FloatOp::kCopysign, self, WrapScalar(other), &self);
}
Tensor XlogyTT(const Tensor& self, const Tensor& other) {
  return FloatOpImpl("aten::xlogy.Tensor", FloatOp::kXlogy, self, other, nullptr);
}
Tensor XlogyST(const Scalar& self, const Tensor& other) {
  return FloatOpImpl("aten::xlogy.Scalar_Self", FloatOp::kXlogy, WrapScalar(self), other, nullptr);
}
Tensor XlogyTS(const Tensor& self, const Scalar& other) {
  return FloatOpImpl("aten::xlogy.Scalar_Other", FloatOp::kXlogy, self, WrapScalar(other), nullptr);
}
Tensor XlogyOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return FloatOpImpl("aten::xlogy.OutTensor", FloatOp::kXlogy, self, other, &out);
}
Tensor XlogyInplace(const Tensor& self, const Tensor& other) {
  return FloatOpImpl("aten::xlogy_.Tensor", FloatOp::kXlogy, self, other, &self);
}
Tensor XlogyScalarInplace(const Tensor& self, const Scalar& other) {
  return FloatOpImpl("aten::xlogy_.Scalar_Other", FloatOp::kXlogy, self, WrapScalar(other), &self);
}

}  // namespace

TB_REGISTER_KERNELS(binary_math) {
  const DeviceType cpu = DeviceType::kCPU;
  table.RegisterKernel("aten::pow.Tensor_Tensor", cpu, Boxed<&Pow>(), TB_HERE);
  table.RegisterKernel("aten::pow.Tensor_Scalar", cpu, Boxed<&PowTS>(), TB_HERE);
  table.RegisterKernel("aten::pow.Scalar", cpu, Boxed<&PowST>(), TB_HERE);
  table.RegisterKernel("aten::pow.Tensor_Tensor_out", cpu, Boxed<&PowOut>(), TB_HERE);
  table.RegisterKernel("aten::pow.Tensor_Scalar_out", cpu, Boxed<&PowTSOut>(), TB_HERE);
  table.RegisterKernel("aten::pow.Scalar_out", cpu, Boxed<&PowSTOut>(), TB_HERE);
  table.RegisterKernel("aten::pow_.Tensor", cpu, Boxed<&PowInplace>(), TB_HERE);
  table.RegisterKernel("aten::pow_.Scalar", cpu, Boxed<&PowScalarInplace>(), TB_HERE);
  table.RegisterKernel("aten::maximum", cpu, Boxed<&Maximum>(), TB_HERE);
  table.RegisterKernel("aten::maximum.out", cpu, Boxed<&MaximumOut>(), TB_HERE);
  table.RegisterKernel("aten::minimum", cpu, Boxed<&Minimum>(), TB_HERE);
  table.RegisterKernel("aten::minimum.out", cpu, Boxed<&MinimumOut>(), TB_HERE);
  table.RegisterKernel("aten::fmax", cpu, Boxed<&Fmax>(), TB_HERE);
  table.RegisterKernel("aten::fmax.out", cpu, Boxed<&FmaxOut>(), TB_HERE);
  table.RegisterKernel("aten::fmin", cpu, Boxed<&Fmin>(), TB_HERE);
  table.RegisterKernel("aten::fmin.out", cpu, Boxed<&FminOut>(), TB_HERE);
  table.RegisterKernel("aten::fmod.Tensor", cpu, Boxed<&Fmod>(), TB_HERE);
  table.RegisterKernel("aten::fmod.Scalar", cpu, Boxed<&FmodScalar>(), TB_HERE);
  table.RegisterKernel("aten::fmod.Tensor_out", cpu, Boxed<&FmodOut>(), TB_HERE);
  table.RegisterKernel("aten::fmod.Scalar_out", cpu, Boxed<&FmodScalarOut>(), TB_HERE);
  table.RegisterKernel("aten::fmod_.Tensor", cpu, Boxed<&FmodInplace>(), TB_HERE);
  table.RegisterKernel("aten::fmod_.Scalar", cpu, Boxed<&FmodScalarInplace>(), TB_HERE);
  table.RegisterKernel("aten::remainder.Tensor", cpu, Boxed<&Remainder>(), TB_HERE);
  table.RegisterKernel("aten::remainder.Scalar", cpu, Boxed<&RemainderScalar>(), TB_HERE);
  table.RegisterKernel("aten::remainder.Scalar_Tensor", cpu, Boxed<&RemainderScalarTensor>(),
                       TB_HERE);
  table.RegisterKernel("aten::remainder.Tensor_out", cpu, Boxed<&RemainderOut>(), TB_HERE);
  table.RegisterKernel("aten::remainder.Scalar_out", cpu, Boxed<&RemainderScalarOut>(), TB_HERE);
  table.RegisterKernel("aten::remainder_.Tensor", cpu, Boxed<&RemainderInplace>(), TB_HERE);
  table.RegisterKernel("aten::remainder_.Scalar", cpu, Boxed<&RemainderScalarInplace>(), TB_HERE);
  table.RegisterKernel("aten::atan2", cpu, Boxed<&Atan2>(), TB_HERE);
  table.RegisterKernel("aten::atan2.out", cpu, Boxed<&Atan2Out>(), TB_HERE);
  table.RegisterKernel("aten::atan2_", cpu, Boxed<&Atan2Inplace>(), TB_HERE);
  table.RegisterKernel("aten::hypot", cpu, Boxed<&Hypot>(), TB_HERE);
  table.RegisterKernel("aten::hypot.out", cpu, Boxed<&HypotOut>(), TB_HERE);
  table.RegisterKernel("aten::hypot_", cpu, Boxed<&HypotInplace>(), TB_HERE);
  table.RegisterKernel("aten::copysign.Tensor", cpu, Boxed<&Copysign>(), TB_HERE);
  table.RegisterKernel("aten::copysign.Scalar", cpu, Boxed<&CopysignScalar>(), TB_HERE);
  table.RegisterKernel("aten::copysign.out", cpu, Boxed<&CopysignOut>(), TB_HERE);
  table.RegisterKernel("aten::copysign_.Tensor", cpu, Boxed<&CopysignInplace>(), TB_HERE);
  table.RegisterKernel("aten::copysign_.Scalar", cpu, Boxed<&CopysignScalarInplace>(), TB_HERE);
  table.RegisterKernel("aten::xlogy.Tensor", cpu, Boxed<&XlogyTT>(), TB_HERE);
  table.RegisterKernel("aten::xlogy.Scalar_Self", cpu, Boxed<&XlogyST>(), TB_HERE);
  table.RegisterKernel("aten::xlogy.Scalar_Other", cpu, Boxed<&XlogyTS>(), TB_HERE);
  table.RegisterKernel("aten::xlogy.OutTensor", cpu, Boxed<&XlogyOut>(), TB_HERE);
  table.RegisterKernel("aten::xlogy_.Tensor", cpu, Boxed<&XlogyInplace>(), TB_HERE);
  table.RegisterKernel("aten::xlogy_.Scalar_Other", cpu, Boxed<&XlogyScalarInplace>(), TB_HERE);
}

}  // namespace tb
