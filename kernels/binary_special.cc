// Binary special functions: aten::igamma / igammac (the regularized incomplete gamma
// functions), special_zeta (Hurwitz), special_xlog1py, polygamma, mvlgamma and the orthogonal
// polynomials special_{chebyshev,shifted_chebyshev}_polynomial_{t,u,v,w},
// special_hermite_polynomial_{h,he}, special_laguerre_polynomial_l and
// special_legendre_polynomial_p, with their Scalar, out= and in-place overloads.
//
// Integer and bool inputs compute in float32. The transcendental functions evaluate in double
// and round once; the polynomials run torch's recurrences in the op's compute type (float for
// float16 / bfloat16), since their cancellations must round as torch's do.
#include <cmath>
#include <cstdint>
#include <limits>

#include "dispatch/op_table.h"
#include "kernels/binary_internal.h"
#include "kernels/special_math_internal.h"

namespace tb {
namespace {

using kernels::Elementwise;
using kernels::opmath_t;
using kernels::WrapScalar;
namespace sp = kernels::special;

using In = std::vector<Tensor>;

// out = f(a, b) in the floating result dtype of a and b; f takes and returns opmath values.
template <typename F>
Tensor FloatBinary(const char* op, const Tensor& a, const Tensor& b, const Tensor* dest, F f) {
  const DType dt = kernels::FloatResult(ResultType({Operand(a), Operand(b)}));
  return Elementwise(op, {{&a, dt}, {&b, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
    TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using M = opmath_t<T>;
      kernels::BinaryMap<T, T, T>(out, in[0], in[1], [f](T x, T y) {
        return static_cast<T>(f(static_cast<M>(x), static_cast<M>(y)));
      });
    });
  });
}

// ---- igamma, igammac, zeta, xlog1py --------------------------------------------------------

template <typename M>
M Igamma(M a, M x) {
  return static_cast<M>(sp::Igamma(a, x));
}
template <typename M>
M Igammac(M a, M x) {
  return static_cast<M>(sp::Igammac(a, x));
}
template <typename M>
M Zeta(M x, M q) {
  return sp::Zeta<M>(x, q);  // in the compute type, as torch's zeta
}
template <typename M>
M Xlog1py(M x, M y) {
  if (std::isnan(y)) return y;
  if (x == 0) return 0;
  return x * std::log1p(y);
}

#define TB_BINARY_FN(FN, NAME, F)                                                                 \
  Tensor FN(const Tensor& a, const Tensor& b) {                                                   \
    return FloatBinary("aten::" NAME, a, b, nullptr, [](auto x, auto y) { return F(x, y); });     \
  }                                                                                               \
  Tensor FN##Out(const Tensor& a, const Tensor& b, const Tensor& out) {                           \
    return FloatBinary("aten::" NAME ".out", a, b, &out, [](auto x, auto y) { return F(x, y); }); \
  }
#define TB_BINARY_INPLACE(FN, NAME, F)                                                       \
  Tensor FN##Inplace(const Tensor& a, const Tensor& b) {                                     \
    return FloatBinary("aten::" NAME "_", a, b, &a, [](auto x, auto y) { return F(x, y); }); \
  }
#define TB_BINARY_SCALARS(FN, NAME, F, SELF, OTHER)                        \
  Tensor FN##SelfScalar(const Scalar& a, const Tensor& b) {                \
    return FloatBinary("aten::" NAME "." SELF, WrapScalar(a), b, nullptr,  \
                       [](auto x, auto y) { return F(x, y); });            \
  }                                                                        \
  Tensor FN##OtherScalar(const Tensor& a, const Scalar& b) {               \
    return FloatBinary("aten::" NAME "." OTHER, a, WrapScalar(b), nullptr, \
                       [](auto x, auto y) { return F(x, y); });            \
  }

TB_BINARY_FN(IgammaK, "igamma", Igamma)
TB_BINARY_INPLACE(IgammaK, "igamma", Igamma)
TB_BINARY_FN(IgammacK, "igammac", Igammac)
TB_BINARY_INPLACE(IgammacK, "igammac", Igammac)
TB_BINARY_FN(ZetaK, "special_zeta", Zeta)
TB_BINARY_SCALARS(ZetaK, "special_zeta", Zeta, "self_scalar", "other_scalar")
TB_BINARY_FN(Xlog1pyK, "special_xlog1py", Xlog1py)
TB_BINARY_SCALARS(Xlog1pyK, "special_xlog1py", Xlog1py, "self_scalar", "other_scalar")

// ---- orthogonal polynomials (torch's recurrences; n is truncated to an integer) ---------

// a * b - c with one rounding: torch's CPU kernels are built with FMA contraction, which fuses
// each recurrence step this way; the same rounding keeps float32 results equal to torch's.
template <typename T>
T Fms(T a, T b, T c) {
  return std::fma(a, b, -c);
}

// The Chebyshev recurrence r_k = two_x * r_(k-1) - r_(k-2) from r_0 = 1 and r_1 = q, to r_n
// (n >= 2); two_x is 2x, of x mapped to [-1, 1] for the shifted polynomials.
template <typename T>
T ChebyshevRecurrence(T two_x, T q, int64_t n) {
  T p = 1, r = 0;
  for (int64_t k = 2; k <= n; ++k) {
    r = Fms(two_x, q, p);
    p = q;
    q = r;
  }
  return r;
}

template <typename T>
T ChebyshevT(T x, int64_t n) {
  if (n < 0) return 0;
  if (std::abs(x) == T(1)) return (x > 0 || n % 2 == 0) ? T(1) : T(-1);
  if (n > 6 && std::abs(x) < T(1)) return std::cos(n * std::acos(x));
  if (n == 0) return 1;
  if (n == 1) return x;
  return ChebyshevRecurrence<T>(x + x, x, n);
}
template <typename T>
T ChebyshevU(T x, int64_t n) {
  if (n < 0) return 0;
  if (std::abs(x) == T(1)) return (x > 0 || n % 2 == 0) ? T(n + 1) : T(-(n + 1));
  if (n > 8 && std::abs(x) < T(1)) {
    const T t = std::acos(x);
    if (std::sin(t) != T(0)) return std::sin((n + 1) * t) / std::sin(t);
    return (n + 1) * std::cos((n + 1) * t) / x;
  }
  if (n == 0) return 1;
  if (n == 1) return x + x;
  return ChebyshevRecurrence<T>(x + x, x + x, n);
}
template <typename T>
T ChebyshevV(T x, int64_t n) {
  if (n < 0) return 0;
  if (std::abs(x) == T(1)) {
    if (x > 0) return 1;
    return n % 2 == 0 ? T(n + n + 1) : T(-(n + n + 1));
  }
  if (n > 8 && std::abs(x) < T(1)) {
    const T t = std::acos(x);
    if (std::sin(t / 2) != T(1)) return std::cos((n + T(0.5)) * t) / std::cos(t / 2);
    return n % 2 == 0 ? T(n + n + 1) : T(-(n + n + 1));
  }
  if (n == 0) return 1;
  if (n == 1) return x + x - 1;
  return ChebyshevRecurrence<T>(x + x, x + x - 1, n);
}
template <typename T>
T ChebyshevW(T x, int64_t n) {
  if (n < 0) return 0;
  if (std::abs(x) == T(1)) {
    if (x > 0) return T(n + n + 1);
    return n % 2 == 0 ? T(1) : T(-1);
  }
  if (n > 8 && std::abs(x) < T(1)) {
    const T t = std::acos(x);
    if (std::cos(t / 2) != T(1)) return std::sin((n + T(0.5)) * t) / std::sin(t / 2);
    if (x > 0) return T(n + n + 1);
    return n % 2 == 0 ? T(1) : T(-1);
  }
  if (n == 0) return 1;
  if (n == 1) return x + x + 1;
  return ChebyshevRecurrence<T>(x + x, x + x + 1, n);
}
template <typename T>
T ShiftedChebyshevT(T x, int64_t n) {
  if (n < 0) return 0;
  if (x == T(1)) return 1;
  if (x == T(0)) return n % 2 == 0 ? T(1) : T(-1);
  if (n > 6 && std::abs(x + x - T(1)) < T(1)) return std::cos(n * std::acos(x + x - T(1)));
  if (n == 0) return 1;
  if (n == 1) return x + x - T(1);
  const T y = x + x - T(1);  // x mapped to [-1, 1]
  return ChebyshevRecurrence<T>(y + y, y, n);
}
template <typename T>
T ShiftedChebyshevU(T x, int64_t n) {
  if (n < 0) return 0;
  if (x == T(1)) return T(n + 1);
  if (x == T(0)) return n % 2 == 0 ? T(n + 1) : T(-(n + 1));
  if (n > 6 && std::abs(x + x - T(1)) < T(1)) {
    const T t = std::acos(x + x - T(1));
    if (std::sin(t) != T(0)) return std::sin((n + 1) * t) / std::sin(t);
    return (n + 1) * std::cos((n + 1) * t) / (x + x - T(1));
  }
  if (n == 0) return 1;
  if (n == 1) return x + x - T(1) + (x + x - T(1));
  const T y = x + x - T(1);  // x mapped to [-1, 1]
  return ChebyshevRecurrence<T>(y + y, y + y, n);
}
template <typename T>
T ShiftedChebyshevV(T x, int64_t n) {
  if (n < 0) return 0;
  if (x == T(1)) return 1;
  if (x == T(0)) return n % 2 == 0 ? T(n + n + 1) : T(-(n + n + 1));
  if (n > 6 && std::abs(x + x - T(1)) < T(1)) {
    const T t = std::acos(x + x - T(1));
    if (std::sin(t / T(2)) != T(1)) return std::cos((n + T(0.5)) * t) / std::cos(t / T(2));
    return n % 2 == 0 ? T(n + n + 1) : T(-(n + n + 1));
  }
  if (n == 0) return 1;
  if (n == 1) return x + x - T(1) + (x + x - T(1)) - T(1);
  const T y = x + x - T(1);  // x mapped to [-1, 1]
  return ChebyshevRecurrence<T>(y + y, y + y - T(1), n);
}
template <typename T>
T ShiftedChebyshevW(T x, int64_t n) {
  if (n < 0) return 0;
  if (x == T(1)) return T(n + n + 1);
  if (x == T(0)) return n % 2 == 0 ? T(1) : T(-1);
  if (n > 4 && std::abs(x + x - T(1)) < T(1)) {
    const T t = std::acos(x + x - T(1));
    if (std::cos(t / T(2)) != T(1)) return std::sin((n + T(0.5)) * t) / std::sin(t / T(2));
    return n % 2 == 0 ? T(1) : T(-1);
  }
  if (n == 0) return 1;
  if (n == 1) return x + x - T(1) + (x + x - T(1)) + T(1);
  const T y = x + x - T(1);  // x mapped to [-1, 1]
  return ChebyshevRecurrence<T>(y + y, y + y + T(1), n);
}
template <typename T>
T HermiteH(T x, int64_t n) {
  if (n < 0) return 0;
  if (n == 0) return 1;
  if (n == 1) return x + x;
  T p = 1, q = x + x, r = 0;
  for (int64_t k = 2; k < n + n; k += 2) {
    r = Fms(x + x, q, T(k) * p);
    p = q;
    q = r;
  }
  return r;
}
template <typename T>
T HermiteHe(T x, int64_t n) {
  if (n < 0) return 0;
  if (n == 0) return 1;
  if (n == 1) return x;
  T p = 1, q = x, r = 0;
  for (int64_t k = 1; k < n; ++k) {
    r = Fms(x, q, T(k) * p);
    p = q;
    q = r;
  }
  return r;
}
template <typename T>
T LaguerreL(T x, int64_t n) {
  if (n < 0) return 0;
  if (std::abs(x) == T(0)) return 1;
  if (n == 0) return 1;
  if (n == 1) return T(1) - x;
  T p = 1, q = T(1) - x, r = 0;
  for (int64_t k = 1; k < n; ++k) {
    r = Fms((T(k) + (T(k) + T(1))) - x, q, T(k) * p) / T(k + 1);
    p = q;
    q = r;
  }
  return r;
}
template <typename T>
T LegendreP(T x, int64_t n) {
  if (n < 0) return 0;
  if (std::abs(x) == T(1)) return (x > 0 || n % 2 == 0) ? T(1) : T(-1);
  if (n == 0) return 1;
  if (n == 1) return x;
  T p = 1, q = x, r = 0;
  for (int64_t k = 1; k < n; ++k) {
    r = Fms((T(k) + T(k) + T(1)) * x, q, T(k) * p) / T(k + 1);
    p = q;
    q = r;
  }
  return r;
}

// The highest degree evaluated. torch runs the recurrences n steps whatever n is (hours for
// n near 1e12, where a fuzzer's or a bug's n lands); degrees above this give NaN instead of
// holding the thread.
constexpr double kMaxPolyDegree = double{1 << 24};

// NaN n gives NaN; otherwise n is truncated to an integer, as torch casts it.
#define TB_POLY(FN, NAME, F)                                                                 \
  template <typename T>                                                                      \
  T FN##Of(T x, T n) {                                                                       \
    if (std::isnan(n)) return n;                                                             \
    if (static_cast<double>(n) > kMaxPolyDegree) return std::numeric_limits<T>::quiet_NaN(); \
    if (n <= T(-1)) return T(0); /* every polynomial here is 0 for a truncated n < 0 */      \
    return F(x, static_cast<int64_t>(n));                                                    \
  }                                                                                          \
  TB_BINARY_FN(FN, NAME, FN##Of)                                                             \
  TB_BINARY_SCALARS(FN, NAME, FN##Of, "x_scalar", "n_scalar")

TB_POLY(ChebT, "special_chebyshev_polynomial_t", ChebyshevT)
TB_POLY(ChebU, "special_chebyshev_polynomial_u", ChebyshevU)
TB_POLY(ChebV, "special_chebyshev_polynomial_v", ChebyshevV)
TB_POLY(ChebW, "special_chebyshev_polynomial_w", ChebyshevW)
TB_POLY(SChebT, "special_shifted_chebyshev_polynomial_t", ShiftedChebyshevT)
TB_POLY(SChebU, "special_shifted_chebyshev_polynomial_u", ShiftedChebyshevU)
TB_POLY(SChebV, "special_shifted_chebyshev_polynomial_v", ShiftedChebyshevV)
TB_POLY(SChebW, "special_shifted_chebyshev_polynomial_w", ShiftedChebyshevW)
TB_POLY(HermH, "special_hermite_polynomial_h", HermiteH)
TB_POLY(HermHe, "special_hermite_polynomial_he", HermiteHe)
TB_POLY(LagL, "special_laguerre_polynomial_l", LaguerreL)
TB_POLY(LegP, "special_legendre_polynomial_p", LegendreP)

#undef TB_POLY
#undef TB_BINARY_FN
#undef TB_BINARY_INPLACE
#undef TB_BINARY_SCALARS

// ---- polygamma, mvlgamma -------------------------------------------------------------------

// out = f(x) in the floating result dtype of self; f takes and returns opmath values.
template <typename F>
Tensor FloatUnary(const char* op, const Tensor& self, const Tensor* dest, F f) {
  const DType dt = kernels::FloatResult(self.dtype());
  return Elementwise(op, {{&self, dt}}, dt, dest, [&](const Tensor& out, const In& in) {
    TB_DISPATCH_T(dt, op, TB_TYPES_FLOAT, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using M = opmath_t<T>;
      kernels::Map<T, T>(
          out, [f](T x) { return static_cast<T>(f(static_cast<M>(x))); }, in[0]);
    });
  });
}

// psi(x) in T (Cephes' psi, as aten::digamma; polygamma's n = 0). The reflection term is
// computed in double for both types, as digamma's.
template <typename T>
T Digamma(T x) {
  if (x == T(0)) return std::copysign(std::numeric_limits<T>::infinity(), -x);
  if (x < T(0)) {
    if (x == std::trunc(x)) return std::numeric_limits<T>::quiet_NaN();
    double q;
    const double r = std::modf(static_cast<double>(x), &q);
    return Digamma<T>(T(1) - x) - static_cast<T>(sp::kPiD / std::tan(sp::kPiD * r));
  }
  T result = 0;
  while (x < T(10)) {
    result -= T(1) / x;
    x += T(1);
  }
  if (x == T(10)) return result + T(2.25175258906672110764);
  static constexpr double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                                 7.57575757575757575758E-3, -4.16666666666666666667E-3,
                                 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                                 8.33333333333333333333E-2};
  T y = 0;
  if (x < T(1.0e17)) {
    const T z = T(1) / (x * x);
    T p = static_cast<T>(A[0]);
    for (int i = 1; i < 7; ++i) p = p * z + static_cast<T>(A[i]);
    y = z * p;
  }
  return result + std::log(x) - T(0.5) / x - y;
}

Tensor PolygammaImpl(const char* op, int64_t n, const Tensor& self, const Tensor* dest) {
  TB_CHECK(n >= 0, ValueError) << op << ": polygamma(n, x) does not support negative n (" << n
                               << ")";
  if (n == 0) return FloatUnary(op, self, dest, [](auto x) { return Digamma(x); });
  if (n == 1) return FloatUnary(op, self, dest, [](auto x) { return sp::Trigamma(x); });
  // (-1)^(n+1) n! zeta(n + 1, x), in the compute type as torch's calc_polygamma.
  const double sign = (n % 2) ? 1.0 : -1.0;
  const double factor = sign * std::exp(sp::LgammaR(static_cast<double>(n) + 1));
  return FloatUnary(op, self, dest, [factor, n](auto x) {
    using M = decltype(x);
    return static_cast<M>(factor) * sp::Zeta<M>(static_cast<M>(n + 1), x);
  });
}
Tensor Polygamma(int64_t n, const Tensor& self) {
  return PolygammaImpl("aten::polygamma", n, self, nullptr);
}
Tensor PolygammaOut(int64_t n, const Tensor& self, const Tensor& out) {
  return PolygammaImpl("aten::polygamma.out", n, self, &out);
}
Tensor PolygammaInplace(const Tensor& self, int64_t n) {
  return PolygammaImpl("aten::polygamma_", n, self, &self);
}

// sum_{i < p} lgamma(x - i / 2) + p (p - 1) / 4 log(pi); every element must exceed (p - 1) / 2.
Tensor MvlgammaImpl(const char* op, const Tensor& self, int64_t p, const Tensor* dest) {
  TB_CHECK(p >= 1, ValueError) << op << ": p has to be greater than or equal to 1 (got " << p
                               << ")";
  const double bound = (static_cast<double>(p) - 1) / 2;
  kernels::LoopFlag below;
  {
    const Tensor x = Cast(self, DType::kFloat64);
    kernels::Map<bool, double>(
        Tensor::Empty(x.shape(), DType::kBool),
        [&below, bound](double v) {
          if (!(v > bound)) below.Set();
          return true;
        },
        x);
  }
  TB_CHECK(!below.get(), ValueError)
      << op << ": all elements must be greater than (p-1)/2 = " << bound;
  const double c = static_cast<double>(p) * (p - 1) / 4 * std::log(sp::kPiD);
  return FloatUnary(op, self, dest, [p, c](auto x) {
    double s = c;
    for (int64_t i = 0; i < p; ++i) s += sp::LgammaR(x - static_cast<double>(i) / 2);
    return static_cast<decltype(x)>(s);
  });
}
Tensor Mvlgamma(const Tensor& self, int64_t p) {
  return MvlgammaImpl("aten::mvlgamma", self, p, nullptr);
}
Tensor MvlgammaOut(const Tensor& self, int64_t p, const Tensor& out) {
  return MvlgammaImpl("aten::mvlgamma.out", self, p, &out);
}
Tensor MvlgammaInplace(const Tensor& self, int64_t p) {
  return MvlgammaImpl("aten::mvlgamma_", self, p, &self);
}

}  // namespace

TB_REGISTER_KERNELS(binary_special) {
  const DeviceType cpu = DeviceType::kCPU;
#define TB_REG(NAME, FN) table.RegisterKernel("aten::" NAME, cpu, Boxed<&FN>(), TB_HERE)
  TB_REG("igamma", IgammaK);
  TB_REG("igamma.out", IgammaKOut);
  TB_REG("igamma_", IgammaKInplace);
  TB_REG("igammac", IgammacK);
  TB_REG("igammac.out", IgammacKOut);
  TB_REG("igammac_", IgammacKInplace);
  TB_REG("polygamma", Polygamma);
  TB_REG("polygamma.out", PolygammaOut);
  TB_REG("polygamma_", PolygammaInplace);
  TB_REG("mvlgamma", Mvlgamma);
  TB_REG("mvlgamma.out", MvlgammaOut);
  TB_REG("mvlgamma_", MvlgammaInplace);
#define TB_REG_SCALARS(NAME, FN, SELF, OTHER) \
  TB_REG(NAME, FN);                           \
  TB_REG(NAME ".out", FN##Out);               \
  TB_REG(NAME "." SELF, FN##SelfScalar);      \
  TB_REG(NAME "." OTHER, FN##OtherScalar)
  TB_REG_SCALARS("special_zeta", ZetaK, "self_scalar", "other_scalar");
  TB_REG_SCALARS("special_xlog1py", Xlog1pyK, "self_scalar", "other_scalar");
  TB_REG_SCALARS("special_chebyshev_polynomial_t", ChebT, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_chebyshev_polynomial_u", ChebU, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_chebyshev_polynomial_v", ChebV, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_chebyshev_polynomial_w", ChebW, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_shifted_chebyshev_polynomial_t", SChebT, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_shifted_chebyshev_polynomial_u", SChebU, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_shifted_chebyshev_polynomial_v", SChebV, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_shifted_chebyshev_polynomial_w", SChebW, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_hermite_polynomial_h", HermH, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_hermite_polynomial_he", HermHe, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_laguerre_polynomial_l", LagL, "x_scalar", "n_scalar");
  TB_REG_SCALARS("special_legendre_polynomial_p", LegP, "x_scalar", "n_scalar");
#undef TB_REG_SCALARS
#undef TB_REG
}

}  // namespace tb
