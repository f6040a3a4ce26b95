// tensorbridge::pointwise(Tensor[] inputs, SymInt[] size, str program) -> Tensor[]: a group of
// element-wise ops that the compile backend's fusion pass (python/tensorbridge/_fuse.py) puts
// in place of a chain of ATen nodes, run as one loop over blocks of the output.
//
// The program is text, one instruction per ';':
//   "T f32" / "T f64"        the type every value is computed in (first instruction)
//   "op d a [b [c]]"         register d = op(a, b, c); operands are registers "rN" or
//                            constants "kVALUE" (strtod syntax: 0.5, -inf, nan)
//   "O r dtype"              an output: register r, stored as dtype (float32, float64, bool;
//                            bfloat16 or float16 from a float32 program)
//   "rsum d a" / "rmax d a"  row reductions: d = the sum / max (NaN propagating) of a over
//                            the last dimension of `size`, the same for every element of a row
//   "P r dtype"              a per-row output: register r's value of each row, of shape
//                            `size` with the last dimension 1
//   "S r dtype"              a column-sum output: register r summed over every dimension of
//                            `size` but the last (in float64, in block order), of shape `size`
//                            with every dimension but the last 1 (a norm's weight gradient)
//   "L d0 d1 .."             the outputs' layout: the dims of `size` in memory order, outer
//                            to inner (a permutation; without it, row-major). The outputs are
//                            dense in that order (a transposed value keeps its strides), and
//                            the loop runs over it. Not with "rsum", "rmax" or "S".
//   "C d [-]iA [-]iB .."     register d holds the concatenation along the last dim of `size`
//                            of inputs A, B, ... (negated where marked): each of the full
//                            rank, broadcast in every other dim, their last dims summing to
//                            size[-1]. Those inputs are read only so (rotate_half of rotary
//                            embeddings: "C r5 -i3 i2").
// Registers 0 .. len(inputs) - 1 hold the inputs, each broadcast to `size` and converted to the
// compute type as it is loaded. Outputs are contiguous tensors of shape `size`.
//
// The output is cut into blocks of kBlock elements; each block loads its inputs (a pointer into
// the input where it is contiguous and of the compute type, else a converting gather into a
// scratch register), runs the instructions over the block, and stores the outputs, so the
// intermediates stay in registers of a few KB (the L1 cache) and are never written to memory.
// Blocks run in parallel for large outputs; a program with a row reduction takes whole rows
// per block, so a reduction sees its whole row and fuses with its prologue and epilogue (RMS
// norm, softmax). The instruction loops are built for AVX-512, AVX2 and the baseline and picked
// by the CPU's features; float32 exp, tanh, erf and the functions made of them (sigmoid, silu,
// gelu and their backward) are plain-arithmetic approximations (Cephes' expf, Eigen's rational
// erf and tanh) that vectorise there, log, sqrt and rsqrt run on Eigen's vectorised functions,
// and the rest (float64 transcendentals, sin, cos, pow) on the C library.
// Programs are parsed once and cached by their text.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <Eigen/Core>

#include "dispatch/op_table.h"
#include "kernels/common_internal.h"
#include "kernels/cpu/isa_internal.h"
#include "kernels/dtype_internal.h"
#include "kernels/fused_pointwise_internal.h"

namespace tb {
namespace {

constexpr int64_t kBlock = 512;
constexpr int64_t kParallelMin = 1 << 15;  // elements below which one thread runs the group

using fused_pointwise::Instr;
using fused_pointwise::kOpName;
using fused_pointwise::Op;
using fused_pointwise::Program;

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
void Math(Op op, float* d, const float* a, const float* b, int64_t n) {
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

void Math(Op op, double* d, const double* a, const double* b, int64_t n) {
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

// An input as the loop sees it: broadcast to the output's (coalesced) shape.
struct Operand {
  const char* data = nullptr;
  DType dtype = DType::kFloat32;
  Dims strides;                  // elements, per coalesced dim (0: broadcast)
  bool direct = false;           // contiguous like the output and of the compute type
  bool unit_rows = false;        // of the compute type, with unit stride along the inner dim
  bool scalar = false;           // one element for the whole output
  bool part = false;             // read only as a part of a "C" register
  int64_t width = 0;             // a part: its size along the last dim
};

template <typename T, typename In>
void Gather(const Operand& op, const Dims& shape, int64_t start, int64_t n,
            T* out) {
  const In* base = reinterpret_cast<const In*>(op.data);
  const int nd = static_cast<int>(shape.size());
  // The multi-index of `start`, and the offset of its row's first element.
  int64_t idx[16];
  int64_t rem = start, row = 0;
  for (int k = nd - 1; k >= 0; --k) {
    idx[k] = rem % shape[k];
    rem /= shape[k];
    if (k < nd - 1) row += idx[k] * op.strides[k];
  }
  const int64_t inner = shape[nd - 1], s = op.strides[nd - 1];
  int64_t col = idx[nd - 1], done = 0;
  while (true) {
    const int64_t m = std::min(inner - col, n - done);
    const In* x = base + row + col * s;
    if (s == 1) {
      for (int64_t i = 0; i < m; ++i) out[done + i] = kernels::Convert<T>(x[i]);
    } else {
      for (int64_t i = 0; i < m; ++i) out[done + i] = kernels::Convert<T>(x[i * s]);
    }
    done += m;
    if (done >= n) return;
    col = 0;
    for (int k = nd - 2; k >= 0; --k) {
      row += op.strides[k];
      if (++idx[k] < shape[k]) break;
      row -= idx[k] * op.strides[k];
      idx[k] = 0;
    }
  }
}

// Columns [lo, hi) of one row of a part (its elements x[j * s]), negated or not, into
// dst[lo, hi).
template <typename T, typename In>
TB_INLINE void CopyPart(const In* x, int64_t s, int64_t lo, int64_t hi, bool neg, T* dst) {
  if (neg) {
    for (int64_t j = lo; j < hi; ++j) dst[j] = -kernels::Convert<T>(x[j * s]);
  } else if (s == 1) {
    for (int64_t j = lo; j < hi; ++j) dst[j] = kernels::Convert<T>(x[j]);
  } else {
    for (int64_t j = lo; j < hi; ++j) dst[j] = kernels::Convert<T>(x[j * s]);
  }
}

// A "C" register over elements [start, start + n) of the loop: row by row (the row's outer
// index carried from row to row, as Gather does), each part's columns from that part.
template <typename T>
void GatherCat(const Program::Cat& cat, const std::vector<Operand>& ops, const Dims& shape,
               int64_t start, int64_t n, T* out) {
  const int nd = static_cast<int>(shape.size());
  const int64_t width = shape[nd - 1];
  const size_t np = cat.parts.size();
  int64_t idx[16];
  int64_t rem = start / width;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
  }
  // Per part: the offset of the current row, and the first column it fills.
  std::vector<int64_t> off(np, 0), first(np, 0);
  int64_t begin = 0;
  for (size_t k = 0; k < np; ++k) {
    const Operand& o = ops[cat.parts[k].first];
    for (int d = 0; d < nd - 1; ++d) off[k] += idx[d] * o.strides[d];
    first[k] = begin;
    begin += o.width;
  }
  int64_t col0 = start % width;
  for (int64_t i = 0; i < n;) {
    const int64_t m = std::min(width - col0, n - i);
    T* dst = out + i - col0;
    for (size_t k = 0; k < np; ++k) {
      const Operand& o = ops[cat.parts[k].first];
      const int64_t lo = std::max(first[k], col0), hi = std::min(first[k] + o.width, col0 + m);
      if (lo >= hi) continue;
      const int64_t s = o.strides[nd - 1];
      const bool neg = cat.parts[k].second;
      if (o.dtype == (std::is_same_v<T, float> ? DType::kFloat32 : DType::kFloat64)) {
        const T* x = reinterpret_cast<const T*>(o.data) + off[k] - first[k] * s;
        CopyPart<T, T>(x, s, lo, hi, neg, dst);
      } else {
        TB_DISPATCH(o.dtype, kOpName, TB_TYPES_ALL, [&] {
          const scalar_t* x = reinterpret_cast<const scalar_t*>(o.data) + off[k] - first[k] * s;
          CopyPart<T, scalar_t>(x, s, lo, hi, neg, dst);
        });
      }
    }
    i += m;
    col0 = 0;
    for (int d = nd - 2; d >= 0; --d) {  // the next row
      for (size_t k = 0; k < np; ++k) off[k] += ops[cat.parts[k].first].strides[d];
      if (++idx[d] < shape[d]) break;
      for (size_t k = 0; k < np; ++k) off[k] -= idx[d] * ops[cat.parts[k].first].strides[d];
      idx[d] = 0;
    }
  }
}

// d[0, n) = the sum (max, NaN propagating) of a[0, n), in 16 partial results so that the loop
// vectorises.
template <typename T, typename F>
TB_INLINE T Fold(const T* a, int64_t n, T init, F f) {
  T acc[16];
  std::fill(acc, acc + 16, init);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] = f(acc[j], a[i + j]);
  }
  for (int j = 0; i < n; ++i, ++j) acc[j] = f(acc[j], a[i]);
  for (int w = 8; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] = f(acc[j], acc[j + w]);
  }
  return acc[0];
}

template <typename T>
void RowReduce(Op op, const T* a, int64_t n, T* d) {
  const T r = op == Op::kRowSum ? Fold(a, n, T(0), [](T x, T v) { return x + v; })
                                : Fold(a, n, -std::numeric_limits<T>::infinity(),
                                       [](T x, T v) { return v > x || v != v ? v : x; });
  std::fill(d, d + n, r);
}

// Stores every `step`-th of v[0, n) (step 1, or a row's length for a per-row output) into out
// from element `at` on, converted to out's dtype (bool: nonzero; 16-bit floats: rounded).
template <typename T>
void Store(const Tensor& out, int64_t at, const T* v, int64_t n, int64_t step) {
  TB_DISPATCH(out.dtype(), kOpName, TB_TYPES_ALL, [&] {
    scalar_t* o = static_cast<scalar_t*>(out.mutable_data()) + at;
    for (int64_t i = 0, j = 0; i < n; i += step, ++j) o[j] = kernels::Convert<scalar_t>(v[i]);
  });
}

// acc[c] += v[i] for the elements v[0, n) of flat indices from `start` on, c = column (index
// modulo `cols`): runs of whole columns, each a loop that vectorises.
template <typename T>
void AddColumns(const T* v, int64_t n, int64_t start, int64_t cols, double* acc) {
  int64_t col = start % cols;
  for (int64_t i = 0; i < n;) {
    const int64_t m = std::min(cols - col, n - i);
    for (int64_t k = 0; k < m; ++k) acc[col + k] += static_cast<double>(v[i + k]);
    i += m;
    col = 0;
  }
}

// The calling thread's scratch memory of at least `bytes` bytes (64-byte aligned, kept for
// the thread's next calls): a program's operand pointers and registers.
char* Scratch(size_t bytes) {
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t bytes = 0;
  };
  thread_local Buffer buf;
  if (buf.bytes < bytes + 64) {
    buf.data.reset(new char[bytes + 64]);
    buf.bytes = bytes + 64;
  }
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(buf.data.get()) + 63) &
                                 ~static_cast<uintptr_t>(63));
}

template <typename T>
void RunProgram(const Program& p, const std::vector<Operand>& ins, const Dims& shape,
                int64_t numel, int64_t cols, const std::vector<Tensor>& outs) {
  // Long rows are cut into blocks within a row, so that inputs with unit inner stride (a
  // broadcast bias, a strided slice) are read in place; short rows into blocks of whole rows.
  // A program with a row reduction takes whole rows per block: one long row, or as many short
  // ones as fit in kBlock.
  const int nd = static_cast<int>(shape.size());
  const int64_t inner = shape[nd - 1];
  const int64_t rows_per_block = p.rows ? std::max<int64_t>(1, kBlock / inner) : 0;
  const int64_t blk = p.rows ? rows_per_block * inner : kBlock;
  const bool by_row = p.rows ? rows_per_block == 1 : inner >= kBlock / 2 && nd > 1;
  const int64_t per_row = p.rows ? 1 : by_row ? (inner + kBlock - 1) / kBlock : 0;
  const int64_t blocks = by_row ? numel / inner * per_row : (numel + blk - 1) / blk;
  const bool parallel = numel >= kParallelMin;
  // Column sums: per share of the blocks, one row of `cols` float64 sums per "S" output; the
  // shares are added in block order at the end (the same result on every run).
  std::vector<int> col_sums(p.outputs.size(), -1);
  int num_col_sums = 0;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    if (p.col_sum[k]) col_sums[k] = num_col_sums++;
  }
  std::mutex shares_mu;
  std::vector<std::pair<int64_t, std::vector<double>>> shares;
  auto body = [&](int64_t b0, int64_t b1) {
    std::vector<double> sums(static_cast<size_t>(num_col_sums * cols), 0.0);
    // 64-byte aligned registers (whole cache lines for the vector loads and stores), in the
    // thread's scratch memory, kept from call to call.
    const size_t ptr_bytes = (p.num_regs * sizeof(const T*) + 63) / 64 * 64;
    char* scratch = Scratch(ptr_bytes + static_cast<size_t>(p.num_regs) * blk * sizeof(T));
    const T** src = reinterpret_cast<const T**>(scratch);
    T* base = reinterpret_cast<T*>(scratch + ptr_bytes);
    std::fill(src, src + p.num_regs, nullptr);
    auto reg = [&](int r) { return base + static_cast<int64_t>(r) * blk; };
    for (const auto& [r, v] : p.constants) {
      std::fill(reg(r), reg(r) + blk, static_cast<T>(v));
      src[r] = reg(r);
    }
    for (size_t k = 0; k < ins.size(); ++k) {
      if (ins[k].scalar && !ins[k].part) {
        T v{};
        TB_DISPATCH(ins[k].dtype, kOpName, TB_TYPES_ALL, [&] {
          v = kernels::Convert<T>(*reinterpret_cast<const scalar_t*>(ins[k].data));
        });
        std::fill(reg(static_cast<int>(k)), reg(static_cast<int>(k)) + blk, v);
        src[k] = reg(static_cast<int>(k));
      }
    }
    for (int64_t b = b0; b < b1; ++b) {
      int64_t start, n, row = 0, col = 0;
      if (by_row) {
        row = b / per_row;
        col = b % per_row * blk;
        start = row * inner + col;
        n = std::min(blk, inner - col);
      } else {
        start = b * blk;
        n = std::min(blk, numel - start);
      }
      for (size_t k = 0; k < ins.size(); ++k) {
        const Operand& op = ins[k];
        if (op.scalar || op.part) continue;
        if (op.direct) {
          src[k] = reinterpret_cast<const T*>(op.data) + start;
          continue;
        }
        if (by_row && op.unit_rows) {
          int64_t off = col, rem = row;
          for (int d = nd - 2; d >= 0; --d) {
            off += rem % shape[d] * op.strides[d];
            rem /= shape[d];
          }
          src[k] = reinterpret_cast<const T*>(op.data) + off;
          continue;
        }
        T* dst = reg(static_cast<int>(k));
        TB_DISPATCH(op.dtype, kOpName, TB_TYPES_ALL,
                    [&] { Gather<T, scalar_t>(op, shape, start, n, dst); });
        src[k] = dst;
      }
      for (const Program::Cat& cat : p.cats) {
        T* dst = reg(cat.reg);
        GatherCat<T>(cat, ins, shape, start, n, dst);
        src[cat.reg] = dst;
      }
      for (const Instr& in : p.code) {
        const int o = p.writes_output[in.d];
        T* d = o >= 0 ? static_cast<T*>(outs[o].mutable_data()) + start : reg(in.d);
        if (in.op == Op::kRowSum || in.op == Op::kRowMax) {
          for (int64_t s = 0; s < n; s += inner) RowReduce<T>(in.op, src[in.a] + s, inner, d + s);
        } else if (!ArithDispatch<T>(in.op, d, src[in.a], src[in.b], src[in.c], n)) {
          Math(in.op, d, src[in.a], src[in.b], n);
        }
        src[in.d] = d;
      }
      for (size_t k = 0; k < p.outputs.size(); ++k) {
        if (p.writes_output[p.outputs[k].first] == static_cast<int>(k)) continue;  // written
        const T* v = src[p.outputs[k].first];
        if (col_sums[k] >= 0) {
          AddColumns(v, n, start, cols, sums.data() + col_sums[k] * cols);
        } else if (p.per_row[k]) {  // a row's value: its first element
          Store(outs[k], start / inner, v, n, inner);
        } else if (p.outputs[k].second == p.compute) {
          std::memcpy(static_cast<T*>(outs[k].mutable_data()) + start, v, n * sizeof(T));
        } else {
          Store(outs[k], start, v, n, 1);
        }
      }
    }
    if (num_col_sums > 0) {
      std::lock_guard<std::mutex> lock(shares_mu);
      shares.emplace_back(b0, std::move(sums));
    }
  };
  if (!parallel) {
    body(0, blocks);
  } else {
    kernels::ForEachThreadShare(blocks, body);
  }
  if (num_col_sums == 0) return;
  std::sort(shares.begin(), shares.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<double> total(static_cast<size_t>(num_col_sums * cols), 0.0);
  for (const auto& share : shares) {
    for (size_t i = 0; i < total.size(); ++i) total[i] += share.second[i];
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    if (col_sums[k] >= 0) Store(outs[k], 0, total.data() + col_sums[k] * cols, cols, 1);
  }
}

// The outputs, made in the loop's order, as views in the logical order of `size` (with the
// program's layout: the dims permuted back; without: themselves).
std::vector<Tensor> Logical(const Program& p, std::vector<Tensor> outs) {
  if (p.layout.empty()) return outs;
  std::vector<int64_t> back(p.layout.size());
  for (size_t i = 0; i < p.layout.size(); ++i) back[p.layout[i]] = static_cast<int64_t>(i);
  for (Tensor& t : outs) t = t.permute(back);
  return outs;
}

}  // namespace

std::vector<Tensor> fused_pointwise::Run(const std::vector<Tensor>& inputs,
                                         const std::vector<int64_t>& size,
                                         const std::string& program) {
  return RunParsed(inputs, size, *CachedProgram(program, static_cast<int>(inputs.size())));
}

std::vector<Tensor> fused_pointwise::RunParsed(const std::vector<Tensor>& inputs,
                                               const std::vector<int64_t>& size,
                                               const Program& p) {
  TB_CHECK(static_cast<int>(inputs.size()) == p.num_inputs, ValueError)
      << kOpName << ": the program takes " << p.num_inputs << " inputs, got " << inputs.size();
  int64_t numel = 1;
  for (int64_t s : size) {
    TB_CHECK(s >= 0, ValueError) << kOpName << ": negative size " << s;
    numel *= s;
  }
  TB_CHECK(size.size() <= 12, ValueError) << kOpName << ": at most 12 dimensions";
  const int nd = static_cast<int>(size.size());
  TB_CHECK(p.layout.empty() || static_cast<int>(p.layout.size()) == nd, ValueError)
      << kOpName << ": a layout of " << p.layout.size() << " dimensions for a size of " << nd;
  // The loop runs over the outputs' memory order: `size` in the layout's order (outer to
  // inner), the inputs' strides likewise.
  auto logical = [&](int d) { return p.layout.empty() ? d : p.layout[d]; };
  Dims psize(nd);
  for (int d = 0; d < nd; ++d) psize[d] = size[logical(d)];
  // Per input: element strides broadcast to `size`, in the loop's order.
  std::vector<Dims> strides(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    TB_CHECK(t.ndim() <= nd, ValueError) << kOpName << ": input " << k << " of shape " << t.ndim()
                                         << "-d does not broadcast to " << nd << "-d";
    TB_CHECK_SUPPORTED(!IsComplex(t.dtype()))
        << kOpName << ": dtype " << DTypeName(t.dtype()) << " is not supported";
    Dims st(nd, 0);
    const int lead = nd - static_cast<int>(t.ndim());
    const bool part = !p.part.empty() && p.part[k];
    TB_CHECK(!part || (t.ndim() == nd && nd > 0), ValueError)
        << kOpName << ": a part of a C register has " << t.ndim() << " dims, the size " << nd;
    for (int d = 0; d < t.ndim(); ++d) {
      const int64_t s = t.shape()[d];
      if (part && d == nd - 1) {  // its own width along the last dim
        st[d] = t.strides()[d];
        continue;
      }
      TB_CHECK(s == size[lead + d] || s == 1, ValueError)
          << kOpName << ": input " << k << " has size " << s << " at dim " << d
          << ", which does not broadcast to " << size[lead + d];
      st[lead + d] = s == 1 ? 0 : t.strides()[d];
    }
    strides[k] = Dims(nd);
    for (int d = 0; d < nd; ++d) strides[k][d] = st[logical(d)];
  }
  TB_CHECK(!p.rows || (nd > 0 && size[nd - 1] > 0), ValueError)
      << kOpName << ": a row reduction needs a last dimension of at least one element";
  std::vector<Tensor> outs;
  outs.reserve(p.outputs.size());
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    Dims shape = psize;
    if (p.per_row[k]) shape[nd - 1] = 1;
    if (p.col_sum[k]) {
      TB_CHECK(nd > 0, ValueError)
          << kOpName << ": a column-sum output needs at least one dimension";
      for (int d = 0; d < nd - 1; ++d) shape[d] = 1;
    }
    outs.push_back(Tensor::Empty(shape, p.outputs[k].second));
  }
  if (numel == 0) {
    for (size_t k = 0; k < outs.size(); ++k) {  // sums over no rows
      if (p.col_sum[k] && outs[k].numel() > 0) {
        std::memset(outs[k].mutable_data(), 0, outs[k].numel() * DTypeSize(outs[k].dtype()));
      }
    }
    return Logical(p, std::move(outs));
  }
  // Coalesce: drop size-1 dims, merge a dim into the one outside it where every input steps
  // over it exactly (the output is contiguous in the loop's order).
  Dims shape;
  std::vector<Operand> ops(inputs.size());
  for (int d = 0; d < nd; ++d) {
    // The reduced dim, and the dim a "C" register concatenates along, stay dims of their own.
    const bool last_of_rows = (p.rows || !p.cats.empty()) && d == nd - 1;
    if (psize[d] == 1 && !last_of_rows) continue;
    bool merge = shape.size() > 0 && !last_of_rows;
    for (size_t k = 0; k < inputs.size() && merge; ++k) {
      const Dims& cs = ops[k].strides;
      if (cs[cs.size() - 1] != strides[k][d] * psize[d]) merge = false;
    }
    if (merge) {
      shape[shape.size() - 1] *= psize[d];
      for (size_t k = 0; k < inputs.size(); ++k) {
        Dims& cs = ops[k].strides;
        cs[cs.size() - 1] = strides[k][d];
      }
    } else {
      shape.push_back(psize[d]);
      for (size_t k = 0; k < inputs.size(); ++k) ops[k].strides.push_back(strides[k][d]);
    }
  }
  if (shape.size() == 0) {
    shape.push_back(1);
    for (Operand& o : ops) o.strides.push_back(0);
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    Operand& o = ops[k];
    o.data = static_cast<const char*>(inputs[k].data());
    o.dtype = inputs[k].dtype();
    bool all_zero = true;
    for (int64_t s : o.strides) all_zero &= s == 0;
    o.scalar = all_zero;
    int64_t dense = 1;
    o.direct = o.dtype == p.compute;
    for (size_t d = shape.size(); d-- > 0;) {
      o.direct = o.direct && o.strides[d] == dense;
      dense *= shape[d];
    }
    o.unit_rows = o.dtype == p.compute && o.strides[o.strides.size() - 1] == 1;
    if (!p.part.empty() && p.part[k]) {
      o.part = true;
      o.scalar = o.direct = o.unit_rows = false;
      o.width = inputs[k].shape()[nd - 1];
    }
  }
  for (const Program::Cat& cat : p.cats) {
    int64_t total = 0;
    for (const auto& [k, neg] : cat.parts) total += ops[k].width;
    TB_CHECK(nd > 0 && total == size[nd - 1], ValueError)
        << kOpName << ": the parts of a C register take " << total << " of the last dim's "
        << (nd > 0 ? size[nd - 1] : 0) << " elements";
  }
  const int64_t cols = nd > 0 ? size.back() : 1;
  if (p.compute == DType::kFloat32) {
    RunProgram<float>(p, ops, shape, numel, cols, outs);
  } else {
    RunProgram<double>(p, ops, shape, numel, cols, outs);
  }
  return Logical(p, std::move(outs));
}

Tensor fused_pointwise::Float32Activation(const char* op, std::initializer_list<const Tensor*> in) {
  const Tensor& first = **in.begin();
  std::vector<Tensor> inputs;
  for (const Tensor* t : in) {
    if (t->dtype() != DType::kFloat32 || !t->is_contiguous() || t->shape() != first.shape()) {
      return Tensor();
    }
    inputs.push_back(*t);
  }
  // "T f32;<op> rK r0 .. rK-1;O rK float32", one text per op (cached programs are keyed by it).
  const int k = static_cast<int>(inputs.size());
  std::string text = "T f32;" + std::string(op) + " r" + std::to_string(k);
  for (int i = 0; i < k; ++i) text += " r" + std::to_string(i);
  text += ";O r" + std::to_string(k) + " float32";
  const std::vector<int64_t> size(first.shape().begin(), first.shape().end());
  return Run(inputs, size, text)[0];
}

TB_REGISTER_KERNELS(fused_pointwise) {
  OpTable& t = OpTable::Global();
  t.Define("tensorbridge::pointwise(Tensor[] inputs, SymInt[] size, str program) -> Tensor[]");
  table.RegisterKernel("tensorbridge::pointwise", DeviceType::kCPU, Boxed<&fused_pointwise::Run>(),
                       TB_HERE);
}

}  // namespace tb
