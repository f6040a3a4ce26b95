// Private to kernels/special_*.cc and kernels/unary_*.cc: scalar special functions in double
// precision. Kernels of every floating dtype evaluate them in double and round once, which
// keeps float32 / float16 / bfloat16 results within a rounding of the exact value (torch's
// float kernels are within a few ulp of it, inside torch's test tolerances).
#pragma once

#include <math.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace tb::kernels::special {

inline constexpr double kPiD = 3.14159265358979323846264338327950288;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// lgamma without the global signgam (a data race between threads): the reentrant forms where
// the C library has them.
inline float LgammaR(float x) {
#if defined(__GLIBC__)
  int sign;
  return ::lgammaf_r(x, &sign);
#else
  return std::lgamma(x);
#endif
}
inline double LgammaR(double x) {
#if defined(__GLIBC__)
  int sign;
  return ::lgamma_r(x, &sign);
#else
  return std::lgamma(x);
#endif
}

// Hurwitz zeta(x, q) = sum_k (k + q)^-x by Euler-Maclaurin summation (as Cephes' zeta):
// direct terms until the tail is small, then the Bernoulli-number corrections. In T (polygamma
// evaluates it in its compute type, as torch does).
template <typename T = double>
T Zeta(T x, T q) {
  // (2k)! / B_2k for k = 1..12.
  static constexpr double kA[] = {12.0,
                                  -720.0,
                                  30240.0,
                                  -1209600.0,
                                  47900160.0,
                                  -1.8924375803183791606e9,
                                  7.47242496e10,
                                  -2.950130727918164224e12,
                                  1.1646782814350067249e14,
                                  -4.5979787224074726105e15,
                                  1.8152105401943546773e17,
                                  -7.1661652561756670113e18};
  constexpr T kEps = std::numeric_limits<T>::epsilon() / 2;
  if (x == T(1)) return std::numeric_limits<T>::infinity();
  if (x < T(1)) return std::numeric_limits<T>::quiet_NaN();
  if (q <= T(0)) {
    if (q == std::floor(q)) return std::numeric_limits<T>::infinity();
    if (x != std::floor(x)) return std::numeric_limits<T>::quiet_NaN();  // q^-x is complex
  }
  T s = std::pow(q, -x);
  T a = q;
  int i = 0;
  T b = 0;
  while (i < 9 || a <= T(9)) {
    i += 1;
    a += T(1);
    b = std::pow(a, -x);
    s += b;
    if (std::abs(b / s) < kEps) return s;
  }
  const T w = a;
  s += b * w / (x - T(1));
  s -= T(0.5) * b;
  a = T(1);
  T k = T(0);
  for (double ai : kA) {
    a *= x + k;
    b /= w;
    T t = a * b / static_cast<T>(ai);
    s += t;
    if (std::abs(t / s) < kEps) return s;
    k += T(1);
    a *= x + k;
    b /= w;
  }
  return s;
}

// psi'(x) (torch's calc_trigamma), in T.
template <typename T>
T Trigamma(T x) {
  const T pi = static_cast<T>(kPiD);
  T sign = 1;
  T result = 0;
  if (x < T(0.5)) {
    sign = -1;
    const T s = std::sin(pi * x);
    result -= (pi * pi) / (s * s);
    x = T(1) - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += T(1) / (x * x);
    x += T(1);
  }
  const T ixx = T(1) / (x * x);
  result += (T(1) + T(1) / (T(2) * x) +
             ixx * (T(1) / T(6) - ixx * (T(1) / T(30) - ixx * (T(1) / T(42))))) /
            x;
  return sign * result;
}

// The regularized lower incomplete gamma P(a, x) and upper Q(a, x) = 1 - P: the power series
// where it converges fast (x < a + 1), Lentz's continued fraction otherwise; each computes
// the smaller of the two directly.
inline double IgammaSeries(double a, double x) {
  double sum = 1.0 / a, term = sum, ap = a;
  for (int n = 0; n < 100000; ++n) {
    ap += 1;
    term *= x / ap;
    sum += term;
    if (std::abs(term) < std::abs(sum) * 1e-17) break;
  }
  return sum * std::exp(a * std::log(x) - x - LgammaR(a));
}
inline double IgammacFraction(double a, double x) {
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < 1e-17) break;
  }
  return std::exp(a * std::log(x) - x - LgammaR(a)) * h;
}
inline double Igamma(double a, double x) {
  if (std::isnan(a) || std::isnan(x) || x < 0 || a < 0) return kNaN;
  if (a == 0) return x > 0 ? 1.0 : kNaN;
  if (x == 0) return 0.0;
  if (std::isinf(a)) return std::isinf(x) ? kNaN : 0.0;
  if (std::isinf(x)) return 1.0;
  if (x < a + 1) return IgammaSeries(a, x);
  return 1.0 - IgammacFraction(a, x);
}
inline double Igammac(double a, double x) {
  if (std::isnan(a) || std::isnan(x) || x < 0 || a < 0) return kNaN;
  if (a == 0) return x > 0 ? 0.0 : kNaN;
  if (x == 0) return 1.0;
  if (std::isinf(a)) return std::isinf(x) ? kNaN : 1.0;
  if (std::isinf(x)) return 0.0;
  if (x < a + 1) return 1.0 - IgammaSeries(a, x);
  return IgammacFraction(a, x);
}

// exp(x^2) erfc(x): in long double (its exponent range holds erfc(x) to x = 100), an
// asymptotic series beyond.
inline double Erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x < -26.7) return kInf;
  if (x < 100) {
    const long double lx = x;
    return static_cast<double>(std::exp(lx * lx) * std::erfc(lx));
  }
  const double z = 1 / (x * x);
  return (1 / (x * std::sqrt(kPiD))) * (1 - 0.5 * z * (1 - 1.5 * z * (1 - 2.5 * z)));
}

// The standard normal CDF and its logarithm.
inline double Ndtr(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
inline double LogNdtr(double x) {
  const double t = x / std::sqrt(2.0);
  if (x < -1) return std::log(Erfcx(-t) / 2) - t * t;
  return std::log1p(-std::erfc(t) / 2);
}

// The inverse of the standard normal CDF: Acklam's rational approximation refined by Newton
// steps on erfc in long double.
inline double Ndtri(double p) {
  if (std::isnan(p) || p < 0 || p > 1) return kNaN;
  if (p == 0) return -kInf;
  if (p == 1) return kInf;
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double plow = 0.02425;
  double x;
  if (p < plow) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - plow) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // Newton on F(x) = p with F(x) = erfc(-x / sqrt 2) / 2, relative to the smaller tail.
  const long double sqrt2 = std::sqrt(2.0L);
  const long double sqrt2pi = std::sqrt(2.0L * 3.14159265358979323846264338327950288L);
  for (int i = 0; i < 3; ++i) {
    const long double lx = x;
    const long double pdf = std::exp(-lx * lx / 2) / sqrt2pi;
    if (pdf == 0) break;
    long double err;
    if (p < 0.5) {
      err = std::erfc(-lx / sqrt2) / 2 - p;
    } else {
      err = (1.0L - p) - std::erfc(lx / sqrt2) / 2;
    }
    x = static_cast<double>(lx - err / pdf);
  }
  return x;
}

// -x log(x) (0 at 0, -inf below).
inline double Entr(double x) {
  if (std::isnan(x)) return x;
  if (x > 0) return -x * std::log(x);
  if (x == 0) return 0;
  return -kInf;
}

}  // namespace tb::kernels::special
