// Hot float row loops in several ISA versions (see kernels/simd_internal.h).
//
// Each loop is written once, as a template over the vector register width in bytes (16: SSE2,
// 32: AVX2, 64: AVX-512), and instantiated inside functions compiled for that ISA
// (__attribute__((target))). A row sum keeps 16 lanes in 16 / W registers of W lanes, lane k
// in register k / W, so every width adds the same numbers in the same order. The version is
// picked once, on first use, from the CPU's features.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/simd_internal.h"

// The vector helpers below pass vectors by value between inline functions of this file only;
// no vector crosses the library's ABI.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TB_X86_DISPATCH 1
#define TB_TARGET(isa) __attribute__((target(isa)))
#else
#define TB_X86_DISPATCH 0
#define TB_TARGET(isa)
#endif
#define TB_INLINE inline __attribute__((always_inline))

namespace tb::kernels::simd {
namespace {

// A vector of kBytes / sizeof(T) lanes of T (GCC/Clang vector extensions).
template <typename T, int kBytes>
struct VecOf;
#define TB_VEC(T, B)                                                \
  template <>                                                       \
  struct VecOf<T, B> {                                              \
    typedef T type __attribute__((vector_size(B), aligned(B)));     \
  }
TB_VEC(float, 16);
TB_VEC(float, 32);
TB_VEC(float, 64);
TB_VEC(double, 16);
TB_VEC(double, 32);
TB_VEC(double, 64);
#undef TB_VEC

template <typename V, typename T>
TB_INLINE V Load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Sum of x[0, n) in kLanes lanes (see SumRow in the header).
template <int kBytes, typename T>
TB_INLINE T SumLeaf(const T* x, int64_t n) {
  using V = typename VecOf<T, kBytes>::type;
  constexpr int W = kBytes / static_cast<int>(sizeof(T)), NA = kLanes / W;
  V acc[NA];
  for (int a = 0; a < NA; ++a) acc[a] = V{};
  int64_t r = 0;
  for (; r + kLanes <= n; r += kLanes) {
#pragma GCC unroll 16
    for (int a = 0; a < NA; ++a) acc[a] += Load<V>(x + r + a * W);
  }
  T l[kLanes];
  for (int k = 0; k < kLanes; ++k) l[k] = acc[k / W][k % W];
  for (int64_t k = 0; r + k < n; ++k) l[k] += x[r + k];
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int k = 0; k < w; ++k) l[k] += l[k + w];
  }
  return l[0];
}

// Sum of (x - mu)^2 over x[0, n), in the lane order of SumLeaf.
template <int kBytes>
TB_INLINE float SqDevLeaf(const float* x, int64_t n, float mu) {
  using V = typename VecOf<float, kBytes>::type;
  constexpr int W = kBytes / 4, NA = kLanes / W;
  V acc[NA];
  for (int a = 0; a < NA; ++a) acc[a] = V{};
  int64_t r = 0;
  for (; r + kLanes <= n; r += kLanes) {
#pragma GCC unroll 16
    for (int a = 0; a < NA; ++a) {
      const V d = Load<V>(x + r + a * W) - mu;
      acc[a] += d * d;
    }
  }
  float l[kLanes];
  for (int k = 0; k < kLanes; ++k) l[k] = acc[k / W][k % W];
  for (int64_t k = 0; r + k < n; ++k) l[k] += (x[r + k] - mu) * (x[r + k] - mu);
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int k = 0; k < w; ++k) l[k] += l[k + w];
  }
  return l[0];
}

inline constexpr int64_t kLeaf = 1024;  // as kernels::kRowLeaf

// Pairwise (cascade) sum over leaves of kLeaf elements: leaf sums are merged like a binary
// counter, so each partial sum combines two of equal size. Iterative, so that it is inlined
// into each ISA version.
template <int kBytes, bool kSqDev>
TB_INLINE float Pairwise(const float* x, int64_t n, float mu) {
  auto leaf = [&](const float* p, int64_t k) {
    return kSqDev ? SqDevLeaf<kBytes>(p, k, mu) : SumLeaf<kBytes>(p, k);
  };
  if (n <= kLeaf) return leaf(x, n);
  float stack[64];
  int top = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; i += kLeaf, ++count) {
    float s = leaf(x + i, std::min(kLeaf, n - i));
    for (int64_t c = count; c & 1; c >>= 1) s = stack[--top] + s;
    stack[top++] = s;
  }
  float s = stack[--top];
  while (top > 0) s = stack[--top] + s;
  return s;
}

template <int kBytes>
TB_INLINE void LayerNormRowT(const float* x, float* y, const float* w, const float* b, int64_t n,
                             float eps, float* mean, float* rstd) {
  const float mu = Pairwise<kBytes, false>(x, n, 0.0f) / static_cast<float>(n);
  const float var = Pairwise<kBytes, true>(x, n, mu) / static_cast<float>(n);
  const float rs = 1.0f / std::sqrt(var + eps);
  *mean = mu;
  *rstd = rs;
  // Element-wise: every lane width gives the same bits.
  if (w && b) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs * w[i] + b[i];
  } else if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs * w[i];
  } else if (b) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs + b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs;
  }
}

// NAME##_512 / _256 / _128: the body `BODY<bytes>(args...)` compiled per ISA.
#define TB_ISA_VERSIONS(RET, NAME, BODY, PARAMS, ARGS)                                     \
  TB_TARGET("avx512f,avx2,fma") RET NAME##_512 PARAMS { return BODY<64> ARGS; }            \
  TB_TARGET("avx2,fma") RET NAME##_256 PARAMS { return BODY<32> ARGS; }                    \
  RET NAME##_128 PARAMS { return BODY<16> ARGS; }                                          \
  using NAME##_fn = RET(*) PARAMS;                                                         \
  NAME##_fn NAME##_pick() { return PickIsa<NAME##_fn>(NAME##_512, NAME##_256, NAME##_128); }

// The version for this CPU.
template <typename F>
F PickIsa(F v512, F v256, F v128) {
#if TB_X86_DISPATCH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return v512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return v256;
#endif
  return v128;
}

TB_ISA_VERSIONS(float, SumRowF32, SumLeaf, (const float* x, int64_t n), (x, n))
TB_ISA_VERSIONS(double, SumRowF64, SumLeaf, (const double* x, int64_t n), (x, n))
TB_ISA_VERSIONS(void, LayerNorm, LayerNormRowT,
                (const float* x, float* y, const float* w, const float* b, int64_t n, float eps,
                 float* mean, float* rstd),
                (x, y, w, b, n, eps, mean, rstd))
#undef TB_ISA_VERSIONS

}  // namespace

float SumRow(const float* x, int64_t n) {
  static const SumRowF32_fn f = SumRowF32_pick();
  return f(x, n);
}

double SumRow(const double* x, int64_t n) {
  static const SumRowF64_fn f = SumRowF64_pick();
  return f(x, n);
}

void LayerNormRow(const float* x, float* y, const float* w, const float* b, int64_t n, float eps,
                  float* mean, float* rstd) {
  static const LayerNorm_fn f = LayerNorm_pick();
  f(x, y, w, b, n, eps, mean, rstd);
}

}  // namespace tb::kernels::simd
