// Unary special functions: erf, erfc, erfinv, lgamma, digamma, sinc and i0 (with their
// in-place forms); special_erfcx, special_ndtri, special_log_ndtr and special_entr. Integer and
// bool inputs compute in float32; float16 / bfloat16 in float.
//
// erfinv, digamma and i0 follow the algorithms PyTorch uses on the CPU (ATen/native/Math.h),
// so that results agree to the last few ulp: erfinv is a rational approximation refined by
// two Newton steps; digamma and i0 are derived from the Cephes Math Library
// (Copyright (c) 2018, Steven Moshier, 3-clause BSD license).
#include <math.h>

#include <cmath>
#include <cstddef>
#include <limits>

#include <unsupported/Eigen/SpecialFunctions>

#include "dispatch/op_table.h"
#include "kernels/special_math_internal.h"
#include "kernels/unary_internal.h"

namespace tb {
namespace {

using kernels::unary::FloatingUnary;
using kernels::unary::kPi;

// Contiguous float32 rows use Eigen's vectorised erf: about 3-10x faster than std::erf and
// within 3e-7 relative of it for normal inputs (denormal inputs lose relative, not absolute,
// precision: errors stay below 1e-44).
struct ErfOp : FloatingUnary<ErfOp> {
  static constexpr const char* kName = "aten::erf";
  static constexpr bool kVec = true;
  template <typename T>
  T operator()(T x) const {
    return std::erf(x);
  }
  template <typename Y, typename A>
  void Vec(Y& y, const A& a) const {
    y = a.erf();
  }
};

struct ErfcOp : FloatingUnary<ErfcOp> {
  static constexpr const char* kName = "aten::erfc";
  template <typename T>
  T operator()(T x) const {
    return std::erfc(x);
  }
};

// ---- erfinv --------------------------------------------------------------------------------

template <typename T>
T CalcErfinv(T y) {
  constexpr T kCentralRange = T(0.7);
  constexpr T a[4] = {T(0.886226899), T(-1.645349621), T(0.914624893), T(-0.140543331)};
  constexpr T b[4] = {T(-2.118377725), T(1.442710462), T(-0.329097515), T(0.012229801)};
  constexpr T c[4] = {T(-1.970840454), T(-1.624906493), T(3.429567803), T(1.641345311)};
  constexpr T d[2] = {T(3.543889200), T(1.637067800)};
  const T y_abs = std::abs(y);
  if (y_abs > T(1)) return std::numeric_limits<T>::quiet_NaN();  // NaN compares false: below
  if (y_abs == T(1)) return std::copysign(std::numeric_limits<T>::infinity(), y);
  T x;
  if (y_abs <= kCentralRange) {
    const T z = y * y;
    const T num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
    const T dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + T(1);
    x = y * num / dem;
  } else {
    const T z = std::sqrt(-std::log((T(1) - y_abs) / T(2)));
    const T num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
    const T dem = (d[1] * z + d[0]) * z + T(1);
    x = std::copysign(num, y) / dem;
  }
  // Two Newton-Raphson steps.
  constexpr T two_over_sqrt_pi = T(1.12837916709551257389615890312154517);
  x = x - (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  x = x - (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  return x;
}

struct ErfinvOp : FloatingUnary<ErfinvOp> {
  static constexpr const char* kName = "aten::erfinv";
  template <typename T>
  T operator()(T x) const {
    return CalcErfinv(x);
  }
};

// ---- lgamma --------------------------------------------------------------------------------

struct LgammaOp : FloatingUnary<LgammaOp> {
  static constexpr const char* kName = "aten::lgamma";
  template <typename T>
  T operator()(T x) const {
    return kernels::special::LgammaR(x);
  }
};

// ---- digamma -------------------------------------------------------------------------------

template <typename T>
T Polevl(T x, const T* a, size_t len) {
  T r = a[0];
  for (size_t i = 1; i <= len; ++i) r = r * x + a[i];
  return r;
}

// Derived from Cephes' psi. The reflection term is computed in double for both types.
template <typename T>
T CalcDigamma(T x) {
  constexpr T kPsi10 = T(2.25175258906672110764);
  if (x == T(0)) return std::copysign(std::numeric_limits<T>::infinity(), -x);  // +-0 -> -+inf
  if (x < T(0)) {
    if (x == std::trunc(x)) return std::numeric_limits<T>::quiet_NaN();  // poles
    double q;
    const double r = std::modf(static_cast<double>(x), &q);
    const T pi_over_tan = static_cast<T>(kPi<double> / std::tan(kPi<double> * r));
    return CalcDigamma<T>(T(1) - x) - pi_over_tan;
  }
  T result = 0;
  while (x < T(10)) {  // NaN fails the test and falls through to NaN below
    result -= T(1) / x;
    x += T(1);
  }
  if (x == T(10)) return result + kPsi10;
  static constexpr T A[] = {
      T(8.33333333333333333333E-2),  T(-2.10927960927960927961E-2), T(7.57575757575757575758E-3),
      T(-4.16666666666666666667E-3), T(3.96825396825396825397E-3),  T(-8.33333333333333333333E-3),
      T(8.33333333333333333333E-2),
  };
  T y = 0;
  if (x < T(1.0e17)) {
    const T z = T(1) / (x * x);
    y = z * Polevl(z, A, 6);
  }
  return result + std::log(x) - (T(0.5) / x) - y;
}

struct DigammaOp : FloatingUnary<DigammaOp> {
  static constexpr const char* kName = "aten::digamma";
  template <typename T>
  T operator()(T x) const {
    return CalcDigamma(x);
  }
};

// ---- sinc ----------------------------------------------------------------------------------

// sin(pi x) / (pi x), 1 at 0.
struct SincOp : FloatingUnary<SincOp> {
  static constexpr const char* kName = "aten::sinc";
  template <typename T>
  T operator()(T x) const {
    if (x == T(0)) return T(1);
    const T product = kPi<T> * x;
    return std::sin(product) / product;
  }
};

// ---- i0 ------------------------------------------------------------------------------------

// Clenshaw evaluation of a Chebyshev series (Cephes' chbevl).
template <typename T>
T Chbevl(T x, const T* array, size_t len) {
  T b0 = array[0], b1 = T(0), b2 = T(0);
  for (size_t i = 1; i < len; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = x * b1 - b2 + array[i];
  }
  return T(0.5) * (b0 - b2);
}

// Chebyshev coefficients for exp(-x) I0(x) on [0, 8].
template <typename T>
constexpr T kI0eA[] = {
    T(-4.41534164647933937950E-18), T(3.33079451882223809783E-17),  T(-2.43127984654795469359E-16),
    T(1.71539128555513303061E-15),  T(-1.16853328779934516808E-14), T(7.67618549860493561688E-14),
    T(-4.85644678311192946090E-13), T(2.95505266312963983461E-12),  T(-1.72682629144155570723E-11),
    T(9.67580903537323691224E-11),  T(-5.18979560163526290666E-10), T(2.65982372468238665035E-9),
    T(-1.30002500998624804212E-8),  T(6.04699502254191894932E-8),   T(-2.67079385394061173391E-7),
    T(1.11738753912010371815E-6),   T(-4.41673835845875056359E-6),  T(1.64484480707288970893E-5),
    T(-5.75419501008210370398E-5),  T(1.88502885095841655729E-4),   T(-5.76375574538582365885E-4),
    T(1.63947561694133579842E-3),   T(-4.32430999505057594430E-3),  T(1.05464603945949983183E-2),
    T(-2.37374148058994688156E-2),  T(4.93052842396707084878E-2),   T(-9.49010970480476444210E-2),
    T(1.71620901522208775349E-1),   T(-3.04682672343198398683E-1),  T(6.76795274409476084995E-1)};

// Chebyshev coefficients for exp(-x) sqrt(x) I0(x) on the inverted interval [8, inf].
template <typename T>
constexpr T kI0eB[] = {
    T(-7.23318048787475395456E-18), T(-4.83050448594418207126E-18), T(4.46562142029675999901E-17),
    T(3.46122286769746109310E-17),  T(-2.82762398051658348494E-16), T(-3.42548561967721913462E-16),
    T(1.77256013305652638360E-15),  T(3.81168066935262242075E-15),  T(-9.55484669882830764870E-15),
    T(-4.15056934728722208663E-14), T(1.54008621752140982691E-14),  T(3.85277838274214270114E-13),
    T(7.18012445138366623367E-13),  T(-1.79417853150680611778E-12), T(-1.32158118404477131188E-11),
    T(-3.14991652796324136454E-11), T(1.18891471078464383424E-11),  T(4.94060238822496958910E-10),
    T(3.39623202570838634515E-9),   T(2.26666899049817806459E-8),   T(2.04891858946906374183E-7),
    T(2.89137052083475648297E-6),   T(6.88975834691682398426E-5),   T(3.36911647825569408990E-3),
    T(8.04490411014108831608E-1)};

// Modified Bessel function of the first kind, order zero (Cephes' i0).
template <typename T>
T CalcI0(T x) {
  x = std::abs(x);
  if (x <= T(8)) {
    return std::exp(x) * Chbevl(x / T(2) - T(2), kI0eA<T>, 30);
  }
  return std::exp(x) * Chbevl(T(32) / x - T(2), kI0eB<T>, 25) / std::sqrt(x);
}

struct I0Op : FloatingUnary<I0Op> {
  static constexpr const char* kName = "aten::i0";
  template <typename T>
  T operator()(T x) const {
    return CalcI0(x);
  }
};

// ---- erfcx, ndtri, log_ndtr, entr (double precision, rounded once) -------------------------

#define TB_SPECIAL_OP(STRUCT, NAME, FN)                  \
  struct STRUCT : FloatingUnary<STRUCT> {                \
    static constexpr const char* kName = "aten::" NAME;  \
    template <typename T>                                \
    T operator()(T x) const {                            \
      return static_cast<T>(FN(static_cast<double>(x))); \
    }                                                    \
  }
TB_SPECIAL_OP(ErfcxOp, "special_erfcx", kernels::special::Erfcx);
TB_SPECIAL_OP(NdtriOp, "special_ndtri", kernels::special::Ndtri);
TB_SPECIAL_OP(LogNdtrOp, "special_log_ndtr", kernels::special::LogNdtr);
TB_SPECIAL_OP(EntrOp, "special_entr", kernels::special::Entr);
#undef TB_SPECIAL_OP

}  // namespace

TB_REGISTER_KERNELS(unary_special) {
  TB_REGISTER_UNARY_FUNCTIONAL(ErfcxOp);
  TB_REGISTER_UNARY_FUNCTIONAL(NdtriOp);
  TB_REGISTER_UNARY_FUNCTIONAL(LogNdtrOp);
  TB_REGISTER_UNARY_FUNCTIONAL(EntrOp);
  TB_REGISTER_UNARY_PAIR("erf", ErfOp);
  TB_REGISTER_UNARY_PAIR("erfc", ErfcOp);
  TB_REGISTER_UNARY_PAIR("erfinv", ErfinvOp);
  TB_REGISTER_UNARY_PAIR("lgamma", LgammaOp);
  TB_REGISTER_UNARY_PAIR("digamma", DigammaOp);
  TB_REGISTER_UNARY_PAIR("sinc", SincOp);
  TB_REGISTER_UNARY_PAIR("i0", I0Op);
}

}  // namespace tb
