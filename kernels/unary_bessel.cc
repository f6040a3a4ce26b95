// Bessel functions: aten::special_bessel_j0 / j1 / y0 / y1, special_modified_bessel_i0 / i1 /
// k0 / k1, special_scaled_modified_bessel_k0 / k1, special_i0e / i1 / i1e and
// special_spherical_bessel_j0. Every floating dtype evaluates in double (the C library's
// j0 / j1 / y0 / y1, the C++17 cylindrical Bessel functions, asymptotic series where those
// overflow) and rounds once; integer and bool inputs give float32.
#include <math.h>

#include <cmath>
#include <limits>

#include "dispatch/op_table.h"
#include "kernels/special_math_internal.h"
#include "kernels/unary_internal.h"

namespace tb {
namespace {

using kernels::special::kInf;
using kernels::special::kNaN;
using kernels::special::kPiD;
using kernels::unary::FloatingUnary;

// e^-x I_nu(x) for large x: 1 / sqrt(2 pi x) * sum_k (-1)^k a_k(nu) / x^k.
double ScaledIAsymptotic(double nu, double x) {
  const double mu = 4 * nu * nu;
  double term = 1, sum = 1;
  for (int k = 1; k < 12; ++k) {
    term *= -(mu - (2 * k - 1) * (2 * k - 1)) / (k * 8 * x);
    sum += term;
  }
  return sum / std::sqrt(2 * kPiD * x);
}
// e^x K_nu(x) for large x: sqrt(pi / (2x)) * sum_k a_k(nu) / x^k.
double ScaledKAsymptotic(double nu, double x) {
  const double mu = 4 * nu * nu;
  double term = 1, sum = 1;
  for (int k = 1; k < 12; ++k) {
    term *= (mu - (2 * k - 1) * (2 * k - 1)) / (k * 8 * x);
    sum += term;
  }
  return sum * std::sqrt(kPiD / (2 * x));
}

constexpr double kLarge = 700;  // below: e^x and I_nu(x) stay finite in double

// e^-|x| I_nu(|x|), nu = 0 or 1 (the sign of odd orders is the caller's).
double ScaledI(double nu, double x) {
  if (x > kLarge) return ScaledIAsymptotic(nu, x);
  return std::exp(-x) * std::cyl_bessel_i(nu, x);
}

double ModifiedI(double nu, double x) {  // I_nu(x) for nu = 0, 1 (odd in x for nu = 1)
  if (std::isnan(x)) return x;
  const double a = std::abs(x);
  if (std::isinf(a)) return kNaN;  // as torch's (exp(x) times a vanishing series)
  const double v = a > kLarge ? kInf : std::cyl_bessel_i(nu, a);
  return (nu == 1 && x < 0) ? -v : v;
}
double ScaledModifiedI(double nu, double x) {
  if (std::isnan(x)) return x;
  const double a = std::abs(x);
  if (std::isinf(a)) return 0.0;
  const double v = ScaledI(nu, a);
  return (nu == 1 && x < 0) ? -v : v;
}
double ModifiedK(double nu, double x, bool scaled) {
  if (std::isnan(x)) return x;
  if (x < 0) return kNaN;
  if (x == 0) return kInf;
  if (std::isinf(x)) return 0.0;
  if (x > kLarge) return scaled ? ScaledKAsymptotic(nu, x) : 0.0;
  const double k = std::cyl_bessel_k(nu, x);
  return scaled ? std::exp(x) * k : k;
}

#define TB_BESSEL_OP(STRUCT, NAME, EXPR)                \
  struct STRUCT : FloatingUnary<STRUCT> {               \
    static constexpr const char* kName = "aten::" NAME; \
    template <typename T>                               \
    T operator()(T t) const {                           \
      const double x = static_cast<double>(t);          \
      return static_cast<T>(EXPR);                      \
    }                                                   \
  }

TB_BESSEL_OP(J0Op, "special_bessel_j0", ::j0(x));
TB_BESSEL_OP(J1Op, "special_bessel_j1", ::j1(x));
TB_BESSEL_OP(Y0Op, "special_bessel_y0", x < 0 ? kNaN : ::y0(x));
TB_BESSEL_OP(Y1Op, "special_bessel_y1", x < 0 ? kNaN : ::y1(x));
TB_BESSEL_OP(I0Op, "special_modified_bessel_i0", ModifiedI(0, x));
TB_BESSEL_OP(I1Op, "special_modified_bessel_i1", ModifiedI(1, x));
TB_BESSEL_OP(K0Op, "special_modified_bessel_k0", ModifiedK(0, x, false));
TB_BESSEL_OP(K1Op, "special_modified_bessel_k1", ModifiedK(1, x, false));
TB_BESSEL_OP(K0eOp, "special_scaled_modified_bessel_k0", ModifiedK(0, x, true));
TB_BESSEL_OP(K1eOp, "special_scaled_modified_bessel_k1", ModifiedK(1, x, true));
TB_BESSEL_OP(I0eOp, "special_i0e", ScaledModifiedI(0, x));
TB_BESSEL_OP(I1SOp, "special_i1", ModifiedI(1, x));
TB_BESSEL_OP(I1eOp, "special_i1e", ScaledModifiedI(1, x));
// sin(x) / x, its Taylor series near 0.
TB_BESSEL_OP(SphericalJ0Op, "special_spherical_bessel_j0",
             std::isinf(x) ? 0.0
             : std::abs(x) < 0.5
                 ? 1 + x * x *
                           (-1.0 / 6 +
                            x * x *
                                (1.0 / 120 +
                                 x * x * (-1.0 / 5040 + x * x * (1.0 / 362880 - x * x / 39916800))))
                 : std::sin(x) / x);

#undef TB_BESSEL_OP

}  // namespace

TB_REGISTER_KERNELS(unary_bessel) {
  TB_REGISTER_UNARY_FUNCTIONAL(J0Op);
  TB_REGISTER_UNARY_FUNCTIONAL(J1Op);
  TB_REGISTER_UNARY_FUNCTIONAL(Y0Op);
  TB_REGISTER_UNARY_FUNCTIONAL(Y1Op);
  TB_REGISTER_UNARY_FUNCTIONAL(I0Op);
  TB_REGISTER_UNARY_FUNCTIONAL(I1Op);
  TB_REGISTER_UNARY_FUNCTIONAL(K0Op);
  TB_REGISTER_UNARY_FUNCTIONAL(K1Op);
  TB_REGISTER_UNARY_FUNCTIONAL(K0eOp);
  TB_REGISTER_UNARY_FUNCTIONAL(K1eOp);
  TB_REGISTER_UNARY_FUNCTIONAL(I0eOp);
  TB_REGISTER_UNARY_FUNCTIONAL(I1SOp);
  TB_REGISTER_UNARY_FUNCTIONAL(I1eOp);
  TB_REGISTER_UNARY_FUNCTIONAL(SphericalJ0Op);
}

}  // namespace tb
