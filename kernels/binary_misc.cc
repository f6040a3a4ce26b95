// Element-wise binary odds and ends: aten::logaddexp, logaddexp2, heaviside, nextafter, gcd,
// lcm, ldexp and frexp, with their out= and in-place overloads.
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"
#include "kernels/complex_internal.h"

namespace tb {
namespace {

using kernels::BinaryMap;
using kernels::Elementwise;
using kernels::OnOpMath;
using kernels::opmath_t;

using In = std::vector<Tensor>;

DType Promote(const Tensor& a, const Tensor& b) { return ResultType({Operand(a), Operand(b)}); }

// ---- logaddexp, logaddexp2 (floating; integer inputs compute in float32) --------------------

template <bool kBase2>
Tensor LogAddExpImpl(const char* op, const Tensor& a, const Tensor& b, const Tensor* dest) {
  const DType dt = kernels::FloatResult(Promote(a, b));
  if (!kBase2 && IsComplex(dt)) return kernels::complex::LogAddExp(op, dt, a, b, dest);
  return Elementwise(op, {{&a, dt}, {&b, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
    TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using M = opmath_t<T>;
      BinaryMap<T, T, T>(out, in[0], in[1], OnOpMath<T>([](M x, M y) -> M {
                           if (std::isinf(x) && x == y) return x;
                           const M m = std::max(x, y);
                           if constexpr (kBase2) {
                             constexpr M kInvLog2 = M(1.44269504088896340736);
                             return m + std::log1p(std::exp2(-std::abs(x - y))) * kInvLog2;
                           } else {
                             return m + std::log1p(std::exp(-std::abs(x - y)));
                           }
                         }));
    });
  });
}
Tensor LogAddExp(const Tensor& a, const Tensor& b) {
  return LogAddExpImpl<false>("aten::logaddexp", a, b, nullptr);
}
Tensor LogAddExpOut(const Tensor& a, const Tensor& b, const Tensor& out) {
  return LogAddExpImpl<false>("aten::logaddexp.out", a, b, &out);
}
Tensor LogAddExp2(const Tensor& a, const Tensor& b) {
  return LogAddExpImpl<true>("aten::logaddexp2", a, b, nullptr);
}
Tensor LogAddExp2Out(const Tensor& a, const Tensor& b, const Tensor& out) {
  return LogAddExpImpl<true>("aten::logaddexp2.out", a, b, &out);
}

// ---- heaviside: values where self is 0, else self > 0 (one dtype for both operands) -------

Tensor HeavisideImpl(const char* op, const Tensor& self, const Tensor& values, const Tensor* dest) {
  TB_CHECK(self.dtype() == values.dtype(), TypeError)
      << op << ": heaviside is not yet implemented for tensors with different dtypes ("
      << DTypeName(self.dtype()) << " and " << DTypeName(values.dtype()) << ")";
  const DType dt = self.dtype();
  return Elementwise(op, {{&self, dt}, {&values, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) {
                       TB_DISPATCH_T(dt, op, TB_TYPES_ALL, [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T v) -> T {
                           if (x == T(0)) return v;
                           return static_cast<T>(x > T(0));
                         });
                       });
                     });
}
Tensor Heaviside(const Tensor& self, const Tensor& values) {
  return HeavisideImpl("aten::heaviside", self, values, nullptr);
}
Tensor HeavisideOut(const Tensor& self, const Tensor& values, const Tensor& out) {
  return HeavisideImpl("aten::heaviside.out", self, values, &out);
}
Tensor HeavisideInplace(const Tensor& self, const Tensor& values) {
  return HeavisideImpl("aten::heaviside_", self, values, &self);
}

// ---- nextafter (floating dtypes; the 16-bit types step on their own bit patterns) ---------

template <typename T>
T NextAfter(T from, T to) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::nextafter(from, to);
  } else {
    const float f = static_cast<float>(from), t = static_cast<float>(to);
    if (std::isnan(f) || std::isnan(t)) return T(std::numeric_limits<float>::quiet_NaN());
    if (f == t) return to;
    uint16_t bits;
    std::memcpy(&bits, &from, sizeof(bits));
    if (f == 0) {
      bits = 1;  // the smallest subnormal, with to's sign
      if (t < 0) bits |= 0x8000;
    } else if ((f < t) == (f > 0)) {
      ++bits;  // away from zero
    } else {
      --bits;
    }
    T r;
    std::memcpy(static_cast<void*>(&r), &bits, sizeof(bits));
    return r;
  }
}

Tensor NextAfterImpl(const char* op, const Tensor& self, const Tensor& other, const Tensor* dest) {
  const DType dt = Promote(self, other);
  kernels::CheckFloating(op, dt);
  return Elementwise(
      op, {{&self, dt}, {&other, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
          using T = typename decltype(tag)::type;
          BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return NextAfter<T>(x, y); });
        });
      });
}
Tensor NextAfterK(const Tensor& self, const Tensor& other) {
  return NextAfterImpl("aten::nextafter", self, other, nullptr);
}
Tensor NextAfterOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return NextAfterImpl("aten::nextafter.out", self, other, &out);
}
Tensor NextAfterInplace(const Tensor& self, const Tensor& other) {
  return NextAfterImpl("aten::nextafter_", self, other, &self);
}

// ---- gcd, lcm (integer dtypes) --------------------------------------------------------------

template <typename T>
T Gcd(T a, T b) {
  a = a < 0 ? kernels::WrapSub<T>(0, a) : a;
  b = b < 0 ? kernels::WrapSub<T>(0, b) : b;
  while (a != 0) {
    const T c = a;
    a = static_cast<T>(b % a);
    b = c;
  }
  return b;
}
template <typename T>
T Lcm(T a, T b) {
  const T g = Gcd(a, b);
  if (g == 0) return 0;
  const T r = kernels::WrapMul<T>(static_cast<T>(a / g), b);
  return r < 0 ? kernels::WrapSub<T>(0, r) : r;
}

template <bool kLcm>
Tensor GcdImpl(const char* op, const Tensor& self, const Tensor& other, const Tensor* dest) {
  const DType dt = Promote(self, other);
  kernels::CheckIntegral(op, dt, /*allow_bool=*/false);
  return Elementwise(op, {{&self, dt}, {&other, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) {
                       TB_DISPATCH_T(dt, op, TB_TYPES_INT, [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) {
                           if constexpr (kLcm) {
                             return Lcm<T>(x, y);
                           } else {
                             return Gcd<T>(x, y);
                           }
                         });
                       });
                     });
}
Tensor GcdK(const Tensor& a, const Tensor& b) { return GcdImpl<false>("aten::gcd", a, b, nullptr); }
Tensor GcdOut(const Tensor& a, const Tensor& b, const Tensor& out) {
  return GcdImpl<false>("aten::gcd.out", a, b, &out);
}
Tensor GcdInplace(const Tensor& a, const Tensor& b) {
  return GcdImpl<false>("aten::gcd_", a, b, &a);
}
Tensor LcmK(const Tensor& a, const Tensor& b) { return GcdImpl<true>("aten::lcm", a, b, nullptr); }
Tensor LcmOut(const Tensor& a, const Tensor& b, const Tensor& out) {
  return GcdImpl<true>("aten::lcm.out", a, b, &out);
}
Tensor LcmInplace(const Tensor& a, const Tensor& b) {
  return GcdImpl<true>("aten::lcm_", a, b, &a);
}

// ---- ldexp: self * 2^other in the compute type (float for float16 / bfloat16), rounded once:
// 2^16 times a float16 mantissa stays finite, as in torch ---------------------------------

Tensor LdexpImpl(const char* op, const Tensor& self, const Tensor& other, const Tensor* dest) {
  const DType dt = kernels::FloatResult(Promote(self, other));
  if (IsComplex(dt)) {
    // torch's mul(self, pow(2, other)): a real power of two scales both parts; a complex
    // exponent gives std::pow(2, e) in the dtype and the textbook product.
    const bool real_exponent = !IsComplex(other.dtype());
    const DType rt = dt == DType::kComplex64 ? DType::kFloat32 : DType::kFloat64;
    return Elementwise(op, {{&self, dt}, {&other, real_exponent ? rt : dt}}, dt, dest,
                       [&](const Tensor& out, const In& in) {
                         auto run = [&](auto zero) {
                           using R = decltype(zero);
                           using Z = std::complex<R>;
                           if (real_exponent) {
                             BinaryMap<Z, Z, R>(out, in[0], in[1],
                                                [](Z x, R e) { return x * std::exp2(e); });
                             return;
                           }
                           BinaryMap<Z, Z, Z>(out, in[0], in[1], [](Z x, Z e) {
                             const Z p = std::pow(Z(2), e);
                             return Z(x.real() * p.real() - x.imag() * p.imag(),
                                      x.real() * p.imag() + x.imag() * p.real());
                           });
                         };
                         dt == DType::kComplex64 ? run(float{}) : run(double{});
                       });
  }
  return Elementwise(op, {{&self, dt}, {&other, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) {
                       TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         using M = opmath_t<T>;
                         BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T e) {
                           return static_cast<T>(static_cast<M>(x) * std::exp2(static_cast<M>(e)));
                         });
                       });
                     });
}
Tensor Ldexp(const Tensor& self, const Tensor& other) {
  return LdexpImpl("aten::ldexp.Tensor", self, other, nullptr);
}
Tensor LdexpOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  return LdexpImpl("aten::ldexp.out", self, other, &out);
}
Tensor LdexpInplace(const Tensor& self, const Tensor& other) {
  return LdexpImpl("aten::ldexp_", self, other, &self);
}

// ---- frexp: mantissa in (-1, -0.5] u [0.5, 1) of self's dtype, exponent as int32 -----------

std::tuple<Tensor, Tensor> Frexp(const Tensor& self) {
  const char* op = "aten::frexp.Tensor";
  TB_CHECK(IsFloatingPoint(self.dtype()), TypeError)
      << op << ": torch.frexp() only supports floating-point dtypes (got "
      << DTypeName(self.dtype()) << ")";
  const Tensor src = Cast(self, self.dtype());
  Tensor mantissa = Tensor::Empty(self.shape(), self.dtype());
  Tensor exponent = Tensor::Empty(self.shape(), DType::kInt32);
  if (self.numel() == 0) return {mantissa, exponent};
  TB_DISPATCH_T(self.dtype(), op, TB_TYPES_FLOAT, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using M = opmath_t<T>;
    kernels::Map<T, T>(
        mantissa,
        [](T x) {
          int e;
          return static_cast<T>(std::frexp(static_cast<M>(x), &e));
        },
        src);
    kernels::Map<int32_t, T>(
        exponent,
        [](T x) {
          int e = 0;
          std::frexp(static_cast<M>(x), &e);
          return static_cast<int32_t>(e);
        },
        src);
  });
  return {mantissa, exponent};
}

}  // namespace

TB_REGISTER_KERNELS(binary_misc) {
  const DeviceType cpu = DeviceType::kCPU;
#define TB_REG(NAME, FN) table.RegisterKernel("aten::" NAME, cpu, Boxed<&FN>(), TB_HERE)
  TB_REG("logaddexp", LogAddExp);
  TB_REG("logaddexp.out", LogAddExpOut);
  TB_REG("logaddexp2", LogAddExp2);
  TB_REG("logaddexp2.out", LogAddExp2Out);
  TB_REG("heaviside", Heaviside);
  TB_REG("heaviside.out", HeavisideOut);
  TB_REG("heaviside_", HeavisideInplace);
  TB_REG("nextafter", NextAfterK);
  TB_REG("nextafter.out", NextAfterOut);
  TB_REG("nextafter_", NextAfterInplace);
  TB_REG("gcd", GcdK);
  TB_REG("gcd.out", GcdOut);
  TB_REG("gcd_", GcdInplace);
  TB_REG("lcm", LcmK);
  TB_REG("lcm.out", LcmOut);
  TB_REG("lcm_", LcmInplace);
  TB_REG("ldexp.Tensor", Ldexp);
  TB_REG("ldexp.out", LdexpOut);
  TB_REG("ldexp_", LdexpInplace);
  TB_REG("frexp.Tensor", Frexp);
#undef TB_REG
}

}  // namespace tb
