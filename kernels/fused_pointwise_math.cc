// The instructions of tensorbridge::pointwise's programs (kernels/fused_pointwise.cc) over a
// block of n values: their loops, built for AVX-512, AVX2 and the baseline and picked by the
// CPU's features. float32 exp, tanh, erf and the functions made of them (sigmoid, silu, gelu and
// their backward) are plain-arithmetic approximations (Cephes' expf, Eigen's rational erf and
// tanh) that vectorise there, log, sqrt and rsqrt run on Eigen's vectorised functions, and the
// rest (float64 transcendentals, sin, cos, pow) on the C library.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "kernels/common_internal.h"
#include "kernels/cpu/isa_internal.h"
#include "kernels/fused_pointwise_internal.h"

namespace tb {
namespace {

using fused_pointwise::kOpName;
using fused_pointwise::Op;

// ---- block evaluation ---------------------------------------------------------------------

// float32 functions written as plain arithmetic, so that a loop over them vectorises in each
// ISA's version of Arith (the branches are selects).

TB_INLINE uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

TB_INLINE float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// exp(x): Cephes' expf (2^n * exp(r), n = round(x / ln 2), r = x - n ln 2, a degree-7
// polynomial; within 1 ulp). n is rounded by adding 1.5 * 2^23 and read from the sum's bits
// (no float-to-int conversion, which would keep the loop from vectorising); 2^n is applied in
// two halves so that denormal results are right. inf above 88.72, 0 below -104, NaN kept.
TB_INLINE float ExpF(float x) {
  constexpr float kMagic = 12582912.0f;
  const float m = x * 1.44269504088896341f + kMagic;
  const float fx = m - kMagic;
  const float r = x - fx * 0.693359375f - fx * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t n = static_cast<int32_t>(Bits(m) - Bits(kMagic)), n1 = n >> 1;
  p = p * FromBits(static_cast<uint32_t>(n1 + 127) << 23) *
      FromBits(static_cast<uint32_t>(n - n1 + 127) << 23);
  p = x > 88.7228394f ? std::numeric_limits<float>::infinity() : p;
  p = x < -104.0f ? 0.0f : p;
  return x != x ? x : p;
}

// erf(x): Eigen's float rational approximation (a couple of ulp on [-4, 4], +-1 outside).
TB_INLINE float ErfF(float a) {
  const float x = a < -4.0f ? -4.0f : (a > 4.0f ? 4.0f : a);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * x;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return p / q;
}

// tanh(x): Eigen's float rational approximation (within a few ulp; x itself below 0.0004).
TB_INLINE float TanhF(float a) {
  const float x = a < -7.90531110763549805f ? -7.90531110763549805f
                                            : (a > 7.90531110763549805f ? 7.90531110763549805f : a);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  const float r = p / q;
  return std::fabs(a) < 0.0004f ? a : r;
}

TB_INLINE float SigmoidF(float x) { return 1.0f / (1.0f + ExpF(-x)); }

constexpr float kSqrt1_2F = 0.707106781186547524f;
constexpr float kBetaF = 0.797884560802865355f;   // sqrt(2 / pi)
constexpr float kAlphaF = 0.398942280401432678f;  // 1 / sqrt(2 pi)
constexpr float kKappaF = 0.044715f;

// torch's gelu_backward(approximate="tanh"): g * (0.5 (1 + t) + 0.5 x (1 - t^2) u'), t =
// tanh(u), u = beta (x + kappa x^3). 1 + t and 1 - t^2 come from s = exp(-2|u|) (2 / (1 + s)
// or 2 s / (1 + s), and 4 s / (1 + s)^2) rather than from t: near t = -1 and t = 1 they are
// then exact where 1 - t * t of a rounded t is 0 (x about -4.9: a gradient of 1e-5 lost).
TB_INLINE float GeluTanhBwF(float g, float x) {
  const float x2 = x * x, u = kBetaF * (x + kKappaF * x2 * x);
  const float s = ExpF(-2.0f * std::fabs(u)), inv = 1.0f / (1.0f + s);
  const float one_plus_t = (u < 0.0f ? 2.0f * s : 2.0f) * inv, sech2 = 4.0f * s * inv * inv;
  return g * (0.5f * one_plus_t + 0.5f * x * sech2 * (kBetaF * (1.0f + 3.0f * kKappaF * x2)));
}

// The float32 transcendental instructions; false for the others.
TB_INLINE bool MathF(Op op, float* __restrict d, const float* a, const float* b, int64_t n) {
#define TB_LOOP(EXPR)                            \
  for (int64_t i = 0; i < n; ++i) d[i] = (EXPR); \
  return true
  switch (op) {
    case Op::kExp: TB_LOOP(ExpF(a[i]));
    case Op::kTanh: TB_LOOP(TanhF(a[i]));
    case Op::kErf: TB_LOOP(ErfF(a[i]));
    case Op::kSigmoid: TB_LOOP(SigmoidF(a[i]));
    case Op::kSilu: TB_LOOP(a[i] / (1.0f + ExpF(-a[i])));
    case Op::kGelu: TB_LOOP(a[i] * 0.5f * (1.0f + ErfF(a[i] * kSqrt1_2F)));
    case Op::kGeluTanh:
      TB_LOOP(0.5f * a[i] * (1.0f + TanhF(kBetaF * (a[i] + kKappaF * a[i] * a[i] * a[i]))));
    case Op::kGeluBw:
      TB_LOOP(a[i] * (0.5f * (1.0f + ErfF(b[i] * kSqrt1_2F)) +
                      b[i] * ExpF(-0.5f * b[i] * b[i]) * kAlphaF));
    case Op::kGeluTanhBw: TB_LOOP(GeluTanhBwF(a[i], b[i]));
    case Op::kSiluBw: {
      for (int64_t i = 0; i < n; ++i) {
        const float s = SigmoidF(b[i]);
        d[i] = a[i] * s * (1.0f + b[i] * (1.0f - s));
      }
      return true;
    }
    default: return false;
  }
#undef TB_LOOP
}

// The arithmetic of one instruction over n elements; false for the functions left to Math.
template <typename T>
TB_INLINE bool Arith(Op op, T* __restrict d, const T* a, const T* b, const T* c, int64_t n) {
  const T one = T(1), zero = T(0);
#define TB_LOOP(EXPR)                            \
  for (int64_t i = 0; i < n; ++i) d[i] = (EXPR); \
  return true
  switch (op) {
    case Op::kCopy: TB_LOOP(a[i]);
    case Op::kNeg: TB_LOOP(-a[i]);
    case Op::kRelu: TB_LOOP(a[i] < zero ? zero : a[i]);
    case Op::kAbs: TB_LOOP(std::fabs(a[i]));
    case Op::kReciprocal: TB_LOOP(one / a[i]);
    case Op::kNot: TB_LOOP(a[i] == zero ? one : zero);
    case Op::kAdd: TB_LOOP(a[i] + b[i]);
    case Op::kSub: TB_LOOP(a[i] - b[i]);
    case Op::kMul: TB_LOOP(a[i] * b[i]);
    case Op::kDiv: TB_LOOP(a[i] / b[i]);
    case Op::kMax: TB_LOOP(a[i] != a[i] ? a[i] : (b[i] != b[i] || b[i] > a[i]) ? b[i] : a[i]);
    case Op::kMin: TB_LOOP(a[i] != a[i] ? a[i] : (b[i] != b[i] || b[i] < a[i]) ? b[i] : a[i]);
    case Op::kGt: TB_LOOP(a[i] > b[i] ? one : zero);
    case Op::kLt: TB_LOOP(a[i] < b[i] ? one : zero);
    case Op::kGe: TB_LOOP(a[i] >= b[i] ? one : zero);
    case Op::kLe: TB_LOOP(a[i] <= b[i] ? one : zero);
    case Op::kEq: TB_LOOP(a[i] == b[i] ? one : zero);
    case Op::kNe: TB_LOOP(a[i] != b[i] ? one : zero);
    case Op::kAnd: TB_LOOP((a[i] != zero && b[i] != zero) ? one : zero);
    case Op::kOr: TB_LOOP((a[i] != zero || b[i] != zero) ? one : zero);
    case Op::kSigmoidBw: TB_LOOP(a[i] * (one - b[i]) * b[i]);
    case Op::kTanhBw: TB_LOOP(a[i] * (one - b[i] * b[i]));
    case Op::kWhere: TB_LOOP(a[i] != zero ? b[i] : c[i]);
    case Op::kThresholdBw: TB_LOOP(b[i] <= c[i] ? zero : a[i]);
    case Op::kClamp: {
      // min(max(x, lo), hi), NaN x kept (torch.clamp)
      for (int64_t i = 0; i < n; ++i) {
        T v = a[i] < b[i] ? b[i] : a[i];
        d[i] = v > c[i] ? c[i] : v;
      }
      return true;
    }
    default: break;
  }
#undef TB_LOOP
  if constexpr (std::is_same_v<T, float>) return MathF(op, d, a, b, n);
  return false;
}

#if TB_X86_DISPATCH
TB_TARGET("avx512f,avx512vl,avx512dq")
bool ArithAvx512(Op op, float* d, const float* a, const float* b, const float* c, int64_t n) {
  return Arith<float>(op, d, a, b, c, n);
}
TB_TARGET("avx512f,avx512vl,avx512dq")
bool ArithAvx512(Op op, double* d, const double* a, const double* b, const double* c, int64_t n) {
  return Arith<double>(op, d, a, b, c, n);
}
TB_TARGET("avx2")
bool ArithAvx2(Op op, float* d, const float* a, const float* b, const float* c, int64_t n) {
  return Arith<float>(op, d, a, b, c, n);
}
TB_TARGET("avx2")
bool ArithAvx2(Op op, double* d, const double* a, const double* b, const double* c, int64_t n) {
  return Arith<double>(op, d, a, b, c, n);
}
#endif

int Isa() {
#if TB_X86_DISPATCH
  static const int isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                                 __builtin_cpu_supports("avx512dq")
                             ? 2
                         : __builtin_cpu_supports("avx2") ? 1
                                                          : 0;
  return isa;
#else
  return 0;
#endif
}

template <typename T>
bool ArithDispatch(Op op, T* d, const T* a, const T* b, const T* c, int64_t n) {
#if TB_X86_DISPATCH
  const int isa = Isa();
  if (isa == 2) return ArithAvx512(op, d, a, b, c, n);
  if (isa == 1) return ArithAvx2(op, d, a, b, c, n);
#endif
  return Arith<T>(op, d, a, b, c, n);
}

// sqrt and rsqrt (as 1 / sqrt, torch's) on Eigen's vectorised square root: a loop over
// std::sqrt does not vectorise where it may set errno.
template <typename T>
bool Roots(Op op, T* d, const T* a, int64_t n) {
  if (op != Op::kSqrt && op != Op::kRsqrt) return false;
  using A = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<A> out(d, n);
  out = Eigen::Map<const A>(a, n).sqrt();
  if (op == Op::kRsqrt) out = out.inverse();
  return true;
}

// The float32 instructions MathF leaves: log on Eigen's vectorised log (except blocks with
// denormal inputs, which Eigen mishandles), the rest on the C library.
void MathF32(Op op, float* d, const float* a, const float* b, int64_t n) {
  if (Roots(op, d, a, n)) return;
  if (op == Op::kLog) {
    bool bad = false;
    for (int64_t i = 0; i < n; ++i) bad |= a[i] > 0.0f && a[i] < std::numeric_limits<float>::min();
    if (!bad) {
      Eigen::Map<Eigen::ArrayXf>(d, n) = Eigen::Map<const Eigen::ArrayXf>(a, n).log();
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = a[i];
    switch (op) {
      case Op::kLog: d[i] = std::log(v); break;
      case Op::kSin: d[i] = std::sin(v); break;
      case Op::kCos: d[i] = std::cos(v); break;
      case Op::kLog1p: d[i] = std::log1p(v); break;
      case Op::kExpm1: d[i] = std::expm1(v); break;
      case Op::kPow: d[i] = std::pow(v, b[i]); break;
      default: TB_THROW(RuntimeError) << kOpName << ": no float32 loop for an instruction";
    }
  }
}

void MathF64(Op op, double* d, const double* a, const double* b, int64_t n) {
  if (Roots(op, d, a, n)) return;
  const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
  const double kAlpha = M_2_SQRTPI * M_SQRT1_2 * 0.5;
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i];
    switch (op) {
      case Op::kExp: d[i] = std::exp(x); break;
      case Op::kLog: d[i] = std::log(x); break;
      case Op::kTanh: d[i] = std::tanh(x); break;
      case Op::kSigmoid: d[i] = 1.0 / (1.0 + std::exp(-x)); break;
      case Op::kErf: d[i] = std::erf(x); break;
      case Op::kGelu: d[i] = x * 0.5 * (1.0 + std::erf(x * M_SQRT1_2)); break;
      case Op::kGeluTanh:
        d[i] = 0.5 * x * (1.0 + std::tanh(kBeta * (x + kKappa * x * x * x)));
        break;
      case Op::kSilu: d[i] = x / (1.0 + std::exp(-x)); break;
      case Op::kSiluBw: {
        const double v = b[i], s = 1.0 / (1.0 + std::exp(-v));
        d[i] = x * s * (1.0 + v * (1.0 - s));
        break;
      }
      case Op::kGeluBw: {
        const double v = b[i];
        d[i] = x * (0.5 * (1.0 + std::erf(v * M_SQRT1_2)) + v * std::exp(-0.5 * v * v) * kAlpha);
        break;
      }
      case Op::kGeluTanhBw: {
        const double v = b[i], t = std::tanh(kBeta * (v + kKappa * v * v * v));
        d[i] = x *
               (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * (kBeta * (1.0 + 3.0 * kKappa * v * v)));
        break;
      }
      case Op::kSin: d[i] = std::sin(x); break;
      case Op::kCos: d[i] = std::cos(x); break;
      case Op::kLog1p: d[i] = std::log1p(x); break;
      case Op::kExpm1: d[i] = std::expm1(x); break;
      case Op::kPow: d[i] = std::pow(x, b[i]); break;
      default: TB_THROW(RuntimeError) << kOpName << ": no float64 loop for an instruction";
    }
  }
}

}  // namespace

bool fused_pointwise::Arith(Op op, float* d, const float* a, const float* b, const float* c,
                            int64_t n) {
  return ArithDispatch<float>(op, d, a, b, c, n);
}

bool fused_pointwise::Arith(Op op, double* d, const double* a, const double* b, const double* c,
                            int64_t n) {
  return ArithDispatch<double>(op, d, a, b, c, n);
}

void fused_pointwise::Math(Op op, float* d, const float* a, const float* b, int64_t n) {
  MathF32(op, d, a, b, n);
}

void fused_pointwise::Math(Op op, double* d, const double* a, const double* b, int64_t n) {
  MathF64(op, d, a, b, n);
}

}  // namespace tb
