// Bessel functions: aten::special_bessel_j0 / j1 / y0 / y1, special_modified_bessel_i0 / i1 /
// k0 / k1, special_scaled_modified_bessel_k0 / k1, special_i0e / i1 / i1e and
// special_spherical_bessel_j0. Every floating dtype evaluates in double and rounds once; integer
// and bool inputs give float32. J0, J1 and Y1 use the rational approximations torch evaluates
// (Cephes': a rational function of x^2 up to x = 5, the Hankel asymptotic form with rational
// P(25 / x^2), Q(25 / x^2) beyond), so float64 results agree with torch's to rounding where
// torch's are a few 1e-7 from the exact value; y0 uses the C library's, the modified functions
// the C++17 cylindrical Bessel functions and asymptotic series where those overflow.
#include <math.h>

#include <cmath>
#include <cstddef>
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

// ---- the Cephes forms of J0, J1, Y1 (coefficients from the Cephes Math Library, public domain)

// Horner's rule, highest coefficient first.
template <size_t N>
double Horner(const double (&c)[N], double z) {
  double r = 0;
  for (double v : c) r = r * z + v;
  return r;
}

constexpr double kSqrt2OverPi = 0.797884560802865355879892119868763737;  // sqrt(2 / pi)
constexpr double kTwoOverPi = 0.636619772367581343075535053490057448;

// Hankel asymptotic coefficients of order 0 (PP / PQ, QP / QQ in z = 25 / x^2).
constexpr double kJ0PP[] = {7.96936729297347051624e-04, 8.28352392107440799803e-02,
                            1.23953371646414299388e+00, 5.44725003058768775090e+00,
                            8.74716500199817011941e+00, 5.30324038235394892183e+00,
                            9.99999999999999997821e-01};
constexpr double kJ0PQ[] = {9.24408810558863637013e-04, 8.56288474354474431428e-02,
                            1.25352743901058953537e+00, 5.47097740330417105182e+00,
                            8.76190883237069594232e+00, 5.30605288235394617618e+00,
                            1.00000000000000000218e+00};
constexpr double kJ0QP[] = {-1.13663838898469149931e-02, -1.28252718670509318512e+00,
                            -1.95539544257735972385e+01, -9.32060152123768231369e+01,
                            -1.77681167980488050595e+02, -1.47077505154951170175e+02,
                            -5.14105326766599330220e+01, -6.05014350600728481186e+00};
constexpr double kJ0QQ[] = {6.43178256118178023184e+01, 8.56430025976980587198e+02,
                            3.88240183605401609683e+03, 7.24046774195652478189e+03,
                            5.93072701187316984827e+03, 2.06209331660327847417e+03,
                            2.42005740240291393179e+02};
// J0 on [0, 5]: (x^2 - r1^2)(x^2 - r2^2) RP(x^2) / RQ(x^2), r1, r2 its first two zeros.
constexpr double kJ0RP[] = {-4.79443220978201773821e+09, 1.95617491946556577543e+12,
                            -2.49248344360967716204e+14, 9.70862251047306323952e+15};
constexpr double kJ0RQ[] = {4.99563147152651017219e+02, 1.73785401676374683123e+05,
                            4.84409658339962045305e+07, 1.11855537045356834862e+10,
                            2.11277520115489217587e+12, 3.10518229857422583814e+14,
                            3.18121955943204943306e+16, 1.71086294081043136091e+18};
// Order 1.
constexpr double kJ1PP[] = {7.62125616208173112003e-04, 7.31397056940917570436e-02,
                            1.12719608129684925192e+00, 5.11207951146807644818e+00,
                            8.42404590141772420927e+00, 5.21451598682361504063e+00,
                            1.00000000000000000254e+00};
constexpr double kJ1PQ[] = {5.71323128072548699714e-04, 6.88455908754495404082e-02,
                            1.10514232634061696926e+00, 5.07386386128601488557e+00,
                            8.39985554327604159757e+00, 5.20982848682361821619e+00,
                            9.99999999999999997461e-01};
constexpr double kJ1QP[] = {5.10862594750176621635e-02, 4.98213872951233449420e+00,
                            7.58238284132545283818e+01, 3.66779609360150777800e+02,
                            7.10856304998926107277e+02, 5.97489612400613639965e+02,
                            2.11688757100572135698e+02, 2.52070205858023719784e+01};
constexpr double kJ1QQ[] = {7.42373277035675149943e+01, 1.05644886038262816351e+03,
                            4.98641058337653607651e+03, 9.56231892404756170795e+03,
                            7.99704160447350683650e+03, 2.82619278517639096600e+03,
                            3.36093607810698293419e+02};
constexpr double kJ1RP[] = {-8.99971225705559398224e+08, 4.52228297998194034323e+11,
                            -7.27494245221818276015e+13, 3.68295732863852883286e+15};
constexpr double kJ1RQ[] = {6.20836478118054335476e+02, 2.56987256757748830383e+05,
                            8.35146791431949253037e+07, 2.21511595479792499675e+10,
                            4.74914122079991414898e+12, 7.84369607876235854894e+14,
                            8.95222336184627338078e+16, 5.32278620332680085395e+18};
// Y1 on (0, 5]: x YP(x^2) / YQ(x^2) + 2/pi (J1(x) log x - 1/x).
constexpr double kY1YP[] = {1.26320474790178026440e+09, -6.47355876379160291031e+11,
                            1.14509511541823727583e+14, -8.12770255501325109621e+15,
                            2.02439475713594898196e+17, -7.78877196265950026825e+17};
constexpr double kY1YQ[] = {5.94301592346128195359e+02, 2.35564092943068577943e+05,
                            7.34811944459721705660e+07, 1.87601316108706159478e+10,
                            3.88231277496238566008e+12, 6.20557727146953693363e+14,
                            6.87141087355300489866e+16, 3.97270608116560655612e+18};

// sqrt(2 / (pi x)) (P cos(x - phase) - (5 / x) Q sin(x - phase)) for x > 5; `sine` swaps the
// roles (the Y form: P sin + (5 / x) Q cos).
template <size_t A, size_t B, size_t C, size_t D>
double Hankel(const double (&pp)[A], const double (&pq)[B], const double (&qp)[C],
              const double (&qq)[D], double phase, double x, bool sine) {
  const double z = 25.0 / (x * x);
  const double p = Horner(pp, z) / Horner(pq, z), q = Horner(qp, z) / Horner(qq, z);
  const double c = std::cos(x - phase), s = std::sin(x - phase);
  const double v = sine ? p * s + 5.0 / x * q * c : p * c - 5.0 / x * q * s;
  return v * kSqrt2OverPi / std::sqrt(x);
}

constexpr double kPhase0 = 0.785398163397448309615660845819875721;  // pi / 4
constexpr double kPhase1 = 2.356194490192344928846982537459627163;  // 3 pi / 4

double CephesJ0(double x) {
  x = std::abs(x);
  if (x > 5.0) return Hankel(kJ0PP, kJ0PQ, kJ0QP, kJ0QQ, kPhase0, x, false);
  if (x < 1e-5) return 1.0 - x * x / 4.0;
  const double z = x * x;
  return (z - 5.78318596294678452118e+00) * (z - 3.04712623436620863991e+01) * Horner(kJ0RP, z) /
         Horner(kJ0RQ, z);
}

double CephesJ1(double x) {
  if (x < 0) return -CephesJ1(-x);
  if (x > 5.0) return Hankel(kJ1PP, kJ1PQ, kJ1QP, kJ1QQ, kPhase1, x, false);
  const double z = x * x;
  return Horner(kJ1RP, z) / Horner(kJ1RQ, z) * x * (z - 1.46819706421238932572e+01) *
         (z - 4.92184563216946036703e+01);
}

double CephesY1(double x) {
  if (x > 5.0) return Hankel(kJ1PP, kJ1PQ, kJ1QP, kJ1QQ, kPhase1, x, true);
  if (x == 0) return -kInf;
  if (!(x > 0)) return kNaN;
  const double z = x * x;
  return x * (Horner(kY1YP, z) / Horner(kY1YQ, z)) +
         kTwoOverPi * (CephesJ1(x) * std::log(x) - 1 / x);
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

TB_BESSEL_OP(J0Op, "special_bessel_j0", CephesJ0(x));
TB_BESSEL_OP(J1Op, "special_bessel_j1", CephesJ1(x));
TB_BESSEL_OP(Y0Op, "special_bessel_y0", x < 0 ? kNaN : ::y0(x));
TB_BESSEL_OP(Y1Op, "special_bessel_y1", CephesY1(x));
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
