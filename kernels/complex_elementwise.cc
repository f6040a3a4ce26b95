// Element-wise kernels on complex64 / complex128 (declared in kernels/complex_internal.h): the
// unary functions by op name, add / sub / mul / div / pow, eq / ne, where and nonzero's mask.
// Also the complex-only ops: view_as_real, view_as_complex (views of the same memory),
// _conj / conj_physical / resolve_conj, angle (real dtypes too), complex and polar.
//
// Transcendental functions run in double (complex64 inputs widened exactly, the result rounded
// once), except pow and sinc, which round as torch's complex<float> forms do; + - * / follow
// c10::complex's formulas (torch's), so finite results match torch's.
#include <cmath>
#include <complex>
#include <limits>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"
#include "kernels/complex_internal.h"
#include "kernels/unary_internal.h"

namespace tb::kernels::complex {
namespace {

using Z = std::complex<double>;
using In = std::vector<Tensor>;

// c10::complex's division (numpy's scaling): no overflow in c^2 + d^2.
template <typename T>
std::complex<T> Div(std::complex<T> x, std::complex<T> y) {
  const T a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  const T abs_c = std::abs(c), abs_d = std::abs(d);
  if (abs_c >= abs_d) {
    if (abs_c == T(0) && abs_d == T(0)) return {a / abs_c, b / abs_d};
    const T rat = d / c, scl = T(1) / (c + d * rat);
    return {(a + b * rat) * scl, (b - a * rat) * scl};
  }
  const T rat = c / d, scl = T(1) / (d + c * rat);
  return {(a * rat + b) * scl, (b * rat - a) * scl};
}

// The textbook product (c10::complex's), without C99 Annex G's inf/NaN recovery.
template <typename T>
std::complex<T> Mul(std::complex<T> x, std::complex<T> y) {
  return {x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real()};
}

Z Expm1(Z z) {
  // exp(x) cos(y) - 1 = expm1(x) cos(y) - 2 sin(y/2)^2, exact near 0.
  const double x = z.real(), y = z.imag(), s = std::sin(y / 2);
  return {std::expm1(x) * std::cos(y) - 2 * s * s, std::exp(x) * std::sin(y)};
}

Z Log1p(Z z) {
  // c10's log1p: |1 + z| without cancellation when z is small.
  const double x = z.real(), y = z.imag();
  const double theta = std::atan2(y, x + 1);
  if (std::abs(z) < 0.5) {
    const double r = x * (2 + x) + y * y;
    if (r == 0) return {x, theta};
    return {0.5 * std::log1p(r), theta};
  }
  return {std::log(std::hypot(x + 1, y)), theta};
}

Z Sgn(Z z) {
  if (z == Z(0)) return 0;
  return z / std::abs(z);
}

template <typename C>
C Sinc(C z) {
  if (z == C(0)) return 1;
  const C p = z * typename C::value_type(M_PI);
  return std::sin(p) / p;
}

enum class Kind { kSame, kReal, kBool };
using Z32 = std::complex<float>;
struct UnaryFn {
  Kind kind;
  Z (*same)(Z) = nullptr;
  double (*real)(Z) = nullptr;
  bool (*pred)(Z) = nullptr;
  // complex64 in float where torch's result is float rounding (sinc's pi * z): matched.
  Z32 (*same32)(Z32) = nullptr;
};

UnaryFn Same(Z (*f)(Z), Z32 (*f32)(Z32) = nullptr) {
  return {Kind::kSame, f, nullptr, nullptr, f32};
}
UnaryFn Real(double (*f)(Z)) { return {Kind::kReal, nullptr, f, nullptr}; }
UnaryFn Pred(bool (*f)(Z)) { return {Kind::kBool, nullptr, nullptr, f}; }

const std::unordered_map<std::string_view, UnaryFn>& UnaryTable() {
  static const auto* table = new std::unordered_map<std::string_view, UnaryFn>{
      {"aten::neg", Same([](Z z) { return -z; })},
      {"aten::positive", Same([](Z z) { return z; })},
      {"aten::conj_physical", Same([](Z z) { return std::conj(z); })},
      {"aten::reciprocal", Same([](Z z) { return Div(Z(1), z); })},
      {"aten::exp", Same([](Z z) { return std::exp(z); })},
      {"aten::exp2", Same([](Z z) { return std::exp(z * M_LN2); })},
      {"aten::expm1", Same(&Expm1)},
      {"aten::log", Same([](Z z) { return std::log(z); })},
      {"aten::log2", Same([](Z z) { return std::log(z) / M_LN2; })},
      {"aten::log10", Same([](Z z) { return std::log10(z); })},
      {"aten::log1p", Same(&Log1p)},
      {"aten::sqrt", Same([](Z z) { return std::sqrt(z); })},
      {"aten::rsqrt", Same([](Z z) { return Div(Z(1), std::sqrt(z)); })},
      {"aten::sin", Same([](Z z) { return std::sin(z); })},
      {"aten::cos", Same([](Z z) { return std::cos(z); })},
      {"aten::tan", Same([](Z z) { return std::tan(z); })},
      {"aten::asin", Same([](Z z) { return std::asin(z); })},
      {"aten::acos", Same([](Z z) { return std::acos(z); })},
      {"aten::atan", Same([](Z z) { return std::atan(z); })},
      {"aten::sinh", Same([](Z z) { return std::sinh(z); })},
      {"aten::cosh", Same([](Z z) { return std::cosh(z); })},
      {"aten::tanh", Same([](Z z) { return std::tanh(z); })},
      {"aten::asinh", Same([](Z z) { return std::asinh(z); })},
      {"aten::acosh", Same([](Z z) { return std::acosh(z); })},
      {"aten::atanh", Same([](Z z) { return std::atanh(z); })},
      {"aten::sigmoid", Same([](Z z) { return Div(Z(1), Z(1) + std::exp(-z)); })},
      {"aten::silu", Same([](Z z) { return Div(z, Z(1) + std::exp(-z)); })},
      {"aten::sgn", Same(&Sgn)},
      {"aten::sinc", Same(&Sinc<Z>, &Sinc<Z32>)},
      {"aten::abs", Real([](Z z) { return std::abs(z); })},
      {"aten::angle", Real([](Z z) { return std::arg(z); })},
      {"aten::isnan", Pred([](Z z) { return std::isnan(z.real()) || std::isnan(z.imag()); })},
      {"aten::isinf", Pred([](Z z) { return std::isinf(z.real()) || std::isinf(z.imag()); })},
      {"aten::isfinite",
       Pred([](Z z) { return std::isfinite(z.real()) && std::isfinite(z.imag()); })},
      {"aten::logical_not", Pred([](Z z) { return z == Z(0); })},
  };
  return *table;
}

// float32 for complex64, float64 for complex128.
DType ValueType(DType t) { return t == DType::kComplex64 ? DType::kFloat32 : DType::kFloat64; }

// Runs body(TypeTag<std::complex<float|double>>) for a complex dtype.
template <typename Body>
void Dispatch(DType t, const char* op, Body&& body) {
  if (t == DType::kComplex64) return body(TypeTag<std::complex<float>>{});
  if (t == DType::kComplex128) return body(TypeTag<std::complex<double>>{});
  TB_DECLINE << op << ": dtype " << DTypeName(t) << " is not supported";
}

}  // namespace

Tensor Unary(const char* name, const char* op, const Tensor& self, bool inplace) {
  const auto& table = UnaryTable();
  const auto it = table.find(name);
  TB_CHECK_SUPPORTED(it != table.end())
      << op << ": dtype " << DTypeName(self.dtype()) << " is not supported";
  const UnaryFn fn = it->second;
  TB_CHECK(!(inplace && fn.kind == Kind::kReal), RuntimeError)
      << op << ": in-place " << name << " is not supported for complex tensors";
  const DType result = fn.kind == Kind::kSame   ? self.dtype()
                       : fn.kind == Kind::kReal ? ValueType(self.dtype())
                                                : DType::kBool;
  return unary::RunUnary(op, self, result, inplace, [&](const Tensor& out, const Tensor& src) {
    Dispatch(src.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using R = typename T::value_type;
      switch (fn.kind) {
        case Kind::kSame:
          if constexpr (std::is_same_v<T, Z32>) {
            if (fn.same32 != nullptr) return Map<T, T>(out, fn.same32, src);
          }
          return Map<T, T>(
              out, [f = fn.same](T x) { return T(f(Z(x))); }, src);
        case Kind::kReal:
          return Map<R, T>(
              out, [f = fn.real](T x) { return static_cast<R>(f(Z(x))); }, src);
        case Kind::kBool:
          return Map<bool, T>(
              out, [f = fn.pred](T x) { return f(Z(x)); }, src);
      }
    });
  });
}

Tensor Arithmetic(const char* op, Arith kind, DType dt, const Tensor& self, const Tensor& other,
                  const Scalar& alpha, const Tensor* dest) {
  return Elementwise(
      op, {{&self, dt}, {&other, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        Dispatch(dt, op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using R = typename T::value_type;
          switch (kind) {
            case Arith::kAdd: {
              const std::complex<double> a = alpha.to_complex();
              const T k(static_cast<R>(a.real()), static_cast<R>(a.imag()));
              if (k == T(1)) {
                return BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return x + y; });
              }
              if (a.imag() == 0) {  // a real alpha scales both parts
                return BinaryMap<T, T, T>(out, in[0], in[1],
                                          [r = k.real()](T x, T y) { return x + r * y; });
              }
              return BinaryMap<T, T, T>(out, in[0], in[1], [k](T x, T y) { return x + Mul(k, y); });
            }
            case Arith::kMul:
              return BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return Mul(x, y); });
            case Arith::kDiv:
              return BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return Div(x, y); });
            case Arith::kPow:
              return BinaryMap<T, T, T>(out, in[0], in[1], [](T x, T y) { return std::pow(x, y); });
          }
        });
      });
}

Tensor PowScalar(const char* op, DType dt, const Tensor& self, double e, const Tensor* dest) {
  return Elementwise(op, {{&self, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
    Dispatch(dt, op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using R = typename T::value_type;
      auto run = [&](auto f) { Map<T, T>(out, f, in[0]); };
      // torch's pow_tensor_scalar: exact forms for the common exponents, std::pow in the
      // dtype's precision otherwise.
      if (e == 0) return run([](T) { return T(1); });
      if (e == 1) return run([](T x) { return x; });
      if (e == 2) return run([](T x) { return Mul(x, x); });
      if (e == 3) return run([](T x) { return Mul(Mul(x, x), x); });
      if (e == 0.5) return run([](T x) { return std::sqrt(x); });
      if (e == -0.5) return run([](T x) { return Div(T(1), std::sqrt(x)); });
      if (e == -1) return run([](T x) { return Div(T(1), x); });
      if (e == -2) return run([](T x) { return Div(T(1), Mul(x, x)); });
      const T k(static_cast<R>(e));
      run([k](T x) { return std::pow(x, k); });
    });
  });
}

Tensor Equality(const char* op, bool equal, DType dt, const Tensor& self, const Tensor& other,
                const Tensor* dest) {
  return Elementwise(
      op, {{&self, dt}, {&other, dt}}, DType::kBool, dest, [&](const Tensor& out, const In& in) {
        Dispatch(dt, op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          BinaryMap<bool, T, T>(out, in[0], in[1], [equal](T x, T y) { return (x == y) == equal; });
        });
      });
}

Tensor Where(const char* op, DType dt, const Tensor& condition, const Tensor& self,
             const Tensor& other, const Tensor* dest) {
  return Elementwise(op, {{&condition, DType::kBool}, {&self, dt}, {&other, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) {
                       Dispatch(dt, op, [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         Map<T, bool, T, T>(
                             out, [](bool c, T x, T y) { return c ? x : y; }, in[0], in[1], in[2]);
                       });
                     });
}

std::complex<double> LogAddExpOne(std::complex<double> x, std::complex<double> y) {
  auto nan = [](Z z) { return std::isnan(z.real()) || std::isnan(z.imag()); };
  Z lo = y, hi = y;
  if (!nan(y)) {
    if (nan(x)) {
      lo = hi = x;
    } else if (x.real() < y.real()) {
      lo = x;
    } else {
      hi = x;
    }
  }
  if (nan(lo)) {
    const double q = std::numeric_limits<double>::quiet_NaN();
    return {q, q};
  }
  if (!std::isfinite(lo.real()) && lo.real() == hi.real()) {
    return lo.real() < 0 ? lo : std::log(std::exp(lo) + std::exp(hi));
  }
  return Log1p(std::exp(lo - hi)) + hi;
}

Tensor LogAddExp(const char* op, DType dt, const Tensor& self, const Tensor& other,
                 const Tensor* dest) {
  return Elementwise(op, {{&self, dt}, {&other, dt}}, dt, dest,
                     [&](const Tensor& out, const In& in) {
                       Dispatch(dt, op, [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         BinaryMap<T, T, T>(out, in[0], in[1],
                                            [](T x, T y) { return T(LogAddExpOne(Z(x), Z(y))); });
                       });
                     });
}

Tensor Addc(const char* op, bool divide, DType dt, const Tensor& self, const Tensor& t1,
            const Tensor& t2, const Scalar& value, const Tensor* dest) {
  return Elementwise(
      op, {{&self, dt}, {&t1, dt}, {&t2, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
        Dispatch(dt, op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using R = typename T::value_type;
          const std::complex<double> c = value.to_complex();
          const T v(static_cast<R>(c.real()), static_cast<R>(c.imag()));
          // torch's order: self + value * t1 * t2 (or / t2), c10::complex's products.
          if (divide) {
            Map<T, T, T, T>(
                out, [v](T s, T a, T b) { return s + Div(Mul(v, a), b); }, in[0], in[1], in[2]);
          } else {
            Map<T, T, T, T>(
                out, [v](T s, T a, T b) { return s + Mul(Mul(v, a), b); }, in[0], in[1], in[2]);
          }
        });
      });
}

namespace {
// torch's lerp: from the nearer end (|weight| < 0.5 picks self + weight * (end - self)).
template <typename T>
T LerpOne(T a, T b, T w) {
  using R = typename T::value_type;
  return std::abs(w) < R(0.5) ? a + Mul(w, b - a) : b - Mul(b - a, T(1) - w);
}
}  // namespace

Tensor Lerp(const char* op, DType dt, const Tensor& self, const Tensor& end, const Tensor* weight,
            const Scalar& scalar_weight, const Tensor* dest) {
  std::vector<Input> inputs = {{&self, dt}, {&end, dt}};
  if (weight != nullptr) inputs.push_back({weight, dt});
  return Elementwise(op, inputs, dt, dest, [&](const Tensor& out, const In& in) {
    Dispatch(dt, op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using R = typename T::value_type;
      if (weight != nullptr) {
        Map<T, T, T, T>(
            out, [](T a, T b, T w) { return LerpOne(a, b, w); }, in[0], in[1], in[2]);
        return;
      }
      const std::complex<double> c = scalar_weight.to_complex();
      const T w(static_cast<R>(c.real()), static_cast<R>(c.imag()));
      BinaryMap<T, T, T>(out, in[0], in[1], [w](T a, T b) { return LerpOne(a, b, w); });
    });
  });
}

Tensor NonzeroMask(const Tensor& self) {
  Tensor out = Tensor::Empty(self.shape(), DType::kBool);
  if (self.numel() == 0) return out;
  Dispatch(self.dtype(), "aten::nonzero", [&](auto tag) {
    using T = typename decltype(tag)::type;
    Map<bool, T>(
        out, [](T x) { return x != T(0); }, self);
  });
  return out;
}

}  // namespace tb::kernels::complex
